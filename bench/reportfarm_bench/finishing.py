"""What finishing costs: each ``finish`` option on the example reports, as a ratio to the print.

One browser prints each example report (one per template) ``repeats`` times plain, then tagged
with an outline, then with a watermark (the print options: the ratio is of the prints). Every
other option runs the stages its plan asks for (:func:`reportfarm_renderer.finishing.plan`) on the
plain print, ``repeats`` times, in this process, as the renderer runs them (one thread, one job at
a time); its ratio is the stages' time over the document's plain print. The medians are taken
per document, and the table shows the median ratio over the documents with the milliseconds of
each. A signature needs a key: a throwaway one (self-signed, made here) stands in for the Secret.

Ratios, not milliseconds, are what to compare across runs (the machine is shared; the load
average is reported with them)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reportfarm_renderer import browser
from reportfarm_renderer import finishing as stages
from reportfarm_renderer.finishing import signing, watermark
from reportfarm_renderer.settings import RendererSettings

from reportfarm import contract, finishing
from reportfarm_bench import throwaway
from reportfarm_bench.documents import Document


def _rules() -> Path | None:
    """EN 16931's rules as the renderer is set, else where ``scripts/en16931/install.sh`` puts
    them; None: the ``facturx`` row is not measured (a renderer without them refuses invoices)."""
    given = RendererSettings.from_env().en16931_xslt
    if given is not None:
        return given
    cache = Path(os.environ.get("REPORTFARM_CACHE") or Path.home() / ".cache" / "reportfarm")
    found = sorted((cache / "en16931").glob("*/EN16931-CII-validation.xslt"))
    return found[-1] if found else None


RULES = _rules()

INVOICE_XML = Path(__file__).resolve().parents[2] / "examples" / "data" / "invoice.factur-x.xml"
"""The example invoice's Factur-X XML: the ``facturx`` row is measured on the invoice only."""
JOB = "bench-finish"
ATTACHMENT = "data.json"

Option = Callable[[Document], tuple[finishing.Finish, dict[str, bytes]] | None]
"""An option's finish and files for a document, or None where it does not apply."""


def _files(document: Document) -> dict[str, bytes]:
    """The report's own data as an attached file: what a statement would carry."""
    data = json.dumps(document.data, ensure_ascii=False).encode("utf-8")
    return {finishing.attachment_blob(JOB, ATTACHMENT): data}


def _metadata(document: Document) -> finishing.Metadata:
    return finishing.Metadata(
        title=f"{document.template} report", author="reportfarm bench", language="zh-CN"
    )


def _facturx(document: Document) -> tuple[finishing.Finish, dict[str, bytes]] | None:
    if document.template != "invoice" or not INVOICE_XML.exists() or RULES is None:
        return None
    blob = finishing.attachment_blob(JOB, finishing.FACTURX_XML_NAME)
    finish = finishing.Finish(
        metadata=_metadata(document), facturx=finishing.FacturX(xml_blob=blob)
    )
    return finish, {blob: INVOICE_XML.read_bytes()}


OPTIONS: dict[str, Option] = {
    "metadata": lambda d: (finishing.Finish(metadata=_metadata(d)), {}),
    "pdfa_2b": lambda d: (finishing.Finish(metadata=_metadata(d), pdfa="2b"), {}),
    "attachment_3b": lambda d: (
        finishing.Finish(
            metadata=_metadata(d),
            attachments=(
                finishing.Attachment(
                    blob=finishing.attachment_blob(JOB, ATTACHMENT),
                    mime="application/json",
                    relationship="Data",
                ),
            ),
        ),
        _files(d),
    ),
    "facturx": _facturx,
    "permissions": lambda d: (finishing.Finish(permissions=finishing.Permissions(print=False)), {}),
    "sign": lambda d: (finishing.Finish(sign=finishing.Signature()), {}),
    "sign_visible": lambda d: (finishing.Finish(sign=finishing.Signature(visible=True)), {}),
    "archival_signed": lambda d: (
        finishing.Finish(metadata=_metadata(d), pdfa="2b", sign=finishing.Signature(visible=True)),
        {},
    ),
}
PRINT_OPTIONS = ("tagged_outline", "watermark")


@dataclasses.dataclass
class Costs:
    """Per option, per document: median milliseconds and the ratio to the plain print."""

    print_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    ms: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    ratio: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    bytes_ratio: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

    def add(
        self, option: str, document: str, ms: float, size: int, base: tuple[float, int]
    ) -> None:
        self.ms.setdefault(option, {})[document] = round(ms, 1)
        self.ratio.setdefault(option, {})[document] = round(ms / base[0], 3)
        self.bytes_ratio.setdefault(option, {})[document] = round(size / base[1], 3)

    def summary(self) -> dict[str, Any]:
        rows = {}
        for option in [*PRINT_OPTIONS, *OPTIONS]:
            if option not in self.ratio:
                continue
            rows[option] = {
                "median_ratio_to_print": round(statistics.median(self.ratio[option].values()), 3),
                "median_size_ratio": round(statistics.median(self.bytes_ratio[option].values()), 3),
                "ms": self.ms[option],
                "ratio_to_print": self.ratio[option],
            }
        return {"print_ms": self.print_ms, "options": rows}


def throwaway_signer(folder: Path) -> signing.Signer:
    """A self-signed key and certificate (:func:`throwaway_key`), loaded as the renderer loads
    it."""
    throwaway_key(folder)
    signer = signing.Signer.load(folder)
    if signer is None:
        raise RuntimeError(f"the throwaway key in {folder} was not loaded")
    return signer


def throwaway_key(folder: Path) -> None:
    """A self-signed key and certificate (RSA 2048, one day) laid out as the Secret is mounted
    (``tls.key``, ``tls.crt``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa

    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=True,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    throwaway.self_signed(folder, "reportfarm bench", key, (usage, True))


def one_per_template(documents: list[Document]) -> list[Document]:
    seen: dict[str, Document] = {}
    for document in documents:
        seen.setdefault(document.template, document)
    return list(seen.values())


async def measure(
    launcher: browser.ChromiumLauncher,
    documents: list[Document],
    *,
    repeats: int = 3,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The costs of every option on one document per template (see the module docstring)."""
    costs = Costs()
    worker = await launcher.new_worker()
    with tempfile.TemporaryDirectory(prefix="reportfarm-bench-signing-") as folder:
        # pyHanko's synchronous calls run an event loop of their own: off this one, as in the
        # renderer (a thread)
        signer = await asyncio.to_thread(throwaway_signer, Path(folder))
        try:
            for document in one_per_template(documents):
                log(f"finishing: {document.template}")
                await _document(worker, document, signer, costs, repeats)
        finally:
            await worker.close()
    return costs.summary()


async def _document(
    worker: browser.ChromiumWorker,
    document: Document,
    signer: signing.Signer,
    costs: Costs,
    repeats: int,
) -> None:
    async def printed(html: str, options: contract.PdfOptions) -> tuple[float, bytes]:
        await worker.render(html, options, javascript=False)  # untimed: warm
        times, pdf = [], b""
        for _ in range(repeats):
            started = time.perf_counter()
            pdf = await worker.render(html, options, javascript=False)
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times), pdf

    plain_ms, plain = await printed(document.html, document.pdf)
    base = (plain_ms, len(plain))
    costs.print_ms[document.template] = round(plain_ms, 1)
    tagged = dataclasses.replace(document.pdf, tagged=True, outline=True)
    ms, pdf = await printed(document.html, tagged)
    costs.add("tagged_outline", document.template, ms, len(pdf), base)
    marked = watermark.apply(document.html, finishing.Watermark(text="DRAFT"))
    ms, pdf = await printed(marked, document.pdf)
    costs.add("watermark", document.template, ms, len(pdf), base)
    for option, build in OPTIONS.items():
        built = build(document)
        if built is None:
            continue
        finish, files = built
        ms, size = await asyncio.to_thread(_finished, plain, finish, files, signer, repeats)
        costs.add(option, document.template, ms, size, base)


def _finished(
    pdf: bytes,
    finish: finishing.Finish,
    files: Mapping[str, bytes],
    signer: signing.Signer,
    repeats: int,
) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeats + 1):  # the first is untimed: imports and caches warm
        inputs = stages.Inputs(
            job_id=JOB,
            finish=finish,
            files=files,
            signer=signer,
            moment=datetime.datetime.now(datetime.UTC),
            business_rules=RULES,
        )
        started = time.perf_counter()
        out = pdf
        for name, stage in stages.plan(finish):
            out = stages.run_stage(name, stage, out, inputs)
        times.append((time.perf_counter() - started) * 1000)
        size = len(out)
    return statistics.median(times[1:]), size


HOW = {
    "tagged_outline": "pdf.tagged + pdf.outline (Chromium)",
    "watermark": "finish.watermark (printed with the page)",
    "metadata": "finish.metadata",
    "pdfa_2b": "metadata + pdfa 2b",
    "attachment_3b": "metadata + an attached file (3b)",
    "facturx": "metadata + Factur-X XML (3b; the invoice)",
    "permissions": "finish.permissions (AES-256)",
    "sign": "finish.sign, invisible (PAdES B-B)",
    "sign_visible": "finish.sign, visible",
    "archival_signed": "metadata + pdfa 2b + visible signature",
}


def table(summary: Mapping[str, Any]) -> Any:
    """A rich table of :func:`measure`'s summary."""
    from rich.table import Table

    documents = list(summary["print_ms"])
    shown = Table(
        title="finishing: cost of each option as a ratio to the plain print (median over the "
        "documents); ms per document"
    )
    for column in ("option", "what runs", "x print", "x size", *documents):
        shown.add_column(column, justify="left" if column in ("option", "what runs") else "right")
    shown.add_row(
        "print",
        "plain print (the base)",
        "1.00",
        "1.00",
        *(f"{summary['print_ms'][d]:.0f}" for d in documents),
    )
    for option, row in summary["options"].items():
        cells = [f"{row['ms'][d]:.0f}" if d in row["ms"] else "-" for d in documents]
        shown.add_row(
            option,
            HOW.get(option, option),
            f"{row['median_ratio_to_print']:.2f}",
            f"{row['median_size_ratio']:.2f}",
            *cells,
        )
    return shown
