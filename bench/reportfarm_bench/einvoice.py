"""Finishing through the queue: kinds of jobs (a plain print, a signed PDF/A-3 Factur-X invoice,
signatures on light and heavy documents) sent to one real ``reportfarm worker`` process, in
interleaved rounds, as a month-end run meets them.

Each round sends a chunk of every kind, one kind at a time (forward one round, backward the
next), each chunk submitted at once; the renderer is the same process throughout, with the
throwaway signing key, EN 16931's rules and the pool size given. Per kind:

- PDFs/s: a chunk's jobs over its span, from the first job taken (its finish less its stages) to
  the last stored, summed over the chunks;
- latency (submitted to stored, the records' clocks) p50 and p95, inside bursts of a chunk;
- CPU per PDF of the renderer's whole process tree (its Python, Chromium, the finishing
  processes, Saxon), from ``/proc``; and the finishing stages' own CPU per PDF, by stage, from
  ``reportfarm_stage_cpu_seconds``; and the client's and Azurite's CPU per PDF, which are
  outside a pod in production (on the renderer's CPUs here when it is not pinned);
- the event loop's lag while the kind ran (p99 and max from ``reportfarm_event_loop_lag_seconds``'
  buckets: a bucket's upper bound) and the oldest lease at its extension.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from reportfarm_renderer import local

from reportfarm import azurite, contract, finishing, renderer_api
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.quantiles import quantile
from reportfarm_bench import cpu, end_to_end
from reportfarm_bench import finishing as finish_costs

VISIBILITY_S = 9
"""The renderer's visibility timeout here (production: 60 s): its leases are extended every 3 s,
so even the light jobs show whether an extension comes late (the oldest lease at its extension,
against this)."""
LAG = "reportfarm_event_loop_lag_seconds"
LEASE = "reportfarm_lease_age_seconds"
STAGE_CPU = "reportfarm_stage_cpu_seconds_total"
Report = dict[str, Any]
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]
INVOICE = local.EXAMPLES / "data" / "invoice.json"


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of job: a template, its data, and what finishing it asks."""

    name: str
    template: str
    data: Mapping[str, Any]
    finish: finishing.Finish | None = None
    files: Mapping[str, bytes] | None = None
    pdf: contract.PdfOptions | None = None

    def submission(self) -> Submission:
        return Submission(
            template=self.template,
            data=self.data,
            finish=self.finish,
            files=dict(self.files) if self.files else None,
            pdf=self.pdf,
        )


@dataclasses.dataclass
class Tally:
    """What one kind measured over its chunks."""

    pdfs: int = 0
    span_s: float = 0.0
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    cpu_s: float = 0.0
    outside_cpu_s: float = 0.0
    """The client's (this process) and Azurite's CPU: outside a pod in production, on its CPUs
    here when the renderer is not pinned."""
    stage_cpu_s: dict[str, float] = dataclasses.field(default_factory=dict)
    stage_wall_ms: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    lag: dict[float, float] = dataclasses.field(default_factory=dict)
    """The lag histogram's cumulative buckets (upper bound -> count), summed over chunks."""
    lease: dict[float, float] = dataclasses.field(default_factory=dict)
    """The lease-age histogram's cumulative buckets, the same way."""

    def summary(self) -> dict[str, Any]:
        per = max(1, self.pdfs)
        return {
            "pdfs": self.pdfs,
            "pdf_per_s": round(self.pdfs / self.span_s, 2) if self.span_s > 0 else 0.0,
            "p50_ms": round((quantile(self.latencies_s, 0.50) or 0.0) * 1000),
            "p95_ms": round((quantile(self.latencies_s, 0.95) or 0.0) * 1000),
            "cpu_ms_per_pdf": round(self.cpu_s * 1000 / per, 1),
            "outside_cpu_ms_per_pdf": round(self.outside_cpu_s * 1000 / per, 1),
            "finish_cpu_ms_per_pdf": {
                stage: round(seconds * 1000 / per, 1)
                for stage, seconds in sorted(self.stage_cpu_s.items())
            },
            "finish_wall_ms_p50": {
                stage: round(quantile(values, 0.5) or 0.0, 1)
                for stage, values in sorted(self.stage_wall_ms.items())
            },
            "loop_lag_p99_ms": _bucket_quantile(self.lag, 0.99),
            "loop_lag_max_ms": _bucket_quantile(self.lag, 1.0),
            "loop_lag_samples": int(max(self.lag.values(), default=0)),
            "lease_age_max_s": _bucket_quantile(self.lease, 1.0, scale=1.0),
        }


def einvoice_finish(*, author: str = "reportfarm bench") -> finishing.Finish:
    """What a month-end run keeps of each invoice: metadata, Factur-X (its XML attached as
    ``finishing.FACTURX_XML_NAME``, EN 16931's rules checked), PDF/A-3b and a visible PAdES
    signature. The real node's signing farm (``tests/node/signing.py``) sends the same."""
    return finishing.Finish(
        metadata=finishing.Metadata(title="Invoice", author=author, language="de"),
        facturx=finishing.FacturX(xml_blob=finishing.FACTURX_XML_NAME),
        pdfa="3b",
        sign=finishing.Signature(visible=True, reason="Rechnung", location="Berlin"),
    )


def einvoice_kinds() -> list[Kind]:
    """The month-end pair: the example invoice printed plain, and the same invoice as a signed
    PDF/A-3 Factur-X e-invoice with a visible stamp (EN 16931's rules checked)."""
    data = json.loads(INVOICE.read_text())
    finish = einvoice_finish()
    xml = {finishing.FACTURX_XML_NAME: finish_costs.INVOICE_XML.read_bytes()}
    return [
        Kind("plain", "invoice", data),
        Kind("einvoice", "invoice", data, finish=finish, files=xml),
    ]


def signature_kinds(*, heavy_pages: int = 20) -> list[Kind]:
    """Signatures on a light document (the invoice, one page) and a heavy one (a statement of
    ``heavy_pages`` pages): plain, signed invisibly, signed with a visible stamp."""
    from reportfarm_bench import statements

    documents = {
        "light": ("invoice", json.loads(INVOICE.read_text()), None),
        "heavy": (
            statements.TEMPLATE,
            statements.statement(statements.lines_for(heavy_pages)),
            statements.pdf_options(),
        ),
    }
    signs = {
        "plain": None,
        "sign": finishing.Finish(sign=finishing.Signature()),
        "sign_visible": finishing.Finish(sign=finishing.Signature(visible=True, reason="Bench")),
    }
    return [
        Kind(f"{weight}_{sign}", template, data, finish=finish, pdf=pdf)
        for weight, (template, data, pdf) in documents.items()
        for sign, finish in signs.items()
    ]


async def run(
    kinds: Sequence[Kind],
    *,
    rounds: int,
    chunk: int,
    pool_size: int,
    cpus: Sequence[int] | None,
    extra_env: Mapping[str, str] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every kind measured in ``rounds`` interleaved rounds of ``chunk`` jobs (see the module)."""
    tallies = {kind.name: Tally() for kind in kinds}
    server = azurite.Azurite()
    await asyncio.to_thread(server.start)
    try:
        with tempfile.TemporaryDirectory(prefix="reportfarm-bench-einvoice-") as folder:
            environment = await asyncio.to_thread(_environment, Path(folder))
            environment.update(extra_env or {})
            connection = server.connection_string
            async with (
                ReportFarmClient(
                    connection, queue=end_to_end.QUEUE, container=end_to_end.CONTAINER
                ) as client,
                end_to_end.worker_process(
                    connection,
                    pool_size=pool_size,
                    log=Path(folder) / "worker.log",
                    cpus=cpus,
                    extra_env=environment,
                ) as worker,
            ):
                await client.ensure()
                await worker.watching(_up(worker.port))
                # warm: browsers, Saxon's compile, and every finishing process (each one's
                # first signature sizes its placeholder, ~100-200 ms once: a chunk of a couple
                # of jobs warmed only some of them, and the rest paid it inside the rounds)
                for kind in kinds:
                    log(f"warming up: {kind.name}")
                    await _chunk(client, worker, kind, max(chunk, 2 * pool_size), None)
                for index in range(rounds):
                    order = list(kinds) if index % 2 == 0 else list(reversed(kinds))
                    for kind in order:
                        log(f"round {index + 1}/{rounds}: {chunk} x {kind.name}")
                        await _chunk(client, worker, kind, chunk, tallies[kind.name])
    finally:
        await asyncio.to_thread(server.stop)
    return {name: tally.summary() for name, tally in tallies.items()}


def _environment(folder: Path) -> dict[str, str]:
    """A throwaway signing key and EN 16931's rules, as the renderer's variables."""
    keys = folder / "signing"
    keys.mkdir()
    finish_costs.throwaway_key(keys)
    environment = {
        "REPORTFARM_SIGNING_DIR": str(keys),
        "REPORTFARM_VISIBILITY_TIMEOUT": str(VISIBILITY_S),
    }
    if finish_costs.RULES is not None:
        environment["REPORTFARM_EN16931_XSLT"] = str(finish_costs.RULES)
    return environment


async def _chunk(
    client: ReportFarmClient,
    worker: end_to_end.Worker,
    kind: Kind,
    count: int,
    tally: Tally | None,
) -> None:
    before_all, before_cpu = cpu.sample(), cpu.sample(worker.pid)
    before = await scrape(worker.port)
    job_ids = await asyncio.gather(*(client.submit(kind.submission()) for _ in range(count)))
    waiting = client.wait(
        job_ids, timeout_s=end_to_end.WAIT_TIMEOUT_S, poll_s=0.5, window=end_to_end.WAIT_WINDOW
    )
    results = await worker.watching(waiting)
    after_all, after_cpu = cpu.sample(), cpu.sample(worker.pid)
    after = await scrape(worker.port)
    records = [record for record in results.values() if record is not None]
    failed = [record.error for record in records if record.state != "succeeded"]
    if failed or len(records) < count:
        raise end_to_end.JobsFailed(f"{kind.name}: {len(failed)} failed: {failed[:2]}")
    if tally is None:
        return
    tally.pdfs += len(records)
    first = min((r.finished_at or 0.0) - _worker_s(r) for r in records)
    tally.span_s += max(r.finished_at or 0.0 for r in records) - first
    tally.latencies_s += [(r.finished_at or 0.0) - (r.submitted_at or 0.0) for r in records]
    tally.cpu_s += sum(cpu.spent(before_cpu, after_cpu).values())
    outside = cpu.spent(before_all, after_all)
    tally.outside_cpu_s += outside["python"] + outside["azurite"]
    for record in records:
        for stage, ms in record.stages_ms.items():
            if stage.startswith("finish_"):
                tally.stage_wall_ms.setdefault(stage, []).append(ms)
    for (name, labels), value in after.items():
        spent = value - before.get((name, labels), 0.0)
        if name == STAGE_CPU:
            stage = dict(labels)["stage"]
            tally.stage_cpu_s[stage] = tally.stage_cpu_s.get(stage, 0.0) + spent
        elif name == f"{LAG}_bucket":
            bound = float(dict(labels)["le"])
            tally.lag[bound] = tally.lag.get(bound, 0.0) + spent
        elif name == f"{LEASE}_bucket":
            bound = float(dict(labels)["le"])
            tally.lease[bound] = tally.lease.get(bound, 0.0) + spent


def _worker_s(record: contract.ResultRecord) -> float:
    """The worker's time for a job: its stages, less the whole (``generation_succeeded``)."""
    stages = record.stages_ms.items()
    return sum(ms for stage, ms in stages if stage != "generation_succeeded") / 1000


async def _up(port: int, *, timeout_s: float = 180.0) -> None:
    """Once the renderer answers on its port (it starts its browsers first)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            await scrape(port)
            return
        except aiohttp.ClientError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def scrape(port: int) -> Scrape:
    """Every sample of the renderer's ``/metrics``, by name and labels."""
    url = f"http://127.0.0.1:{port}{renderer_api.METRICS_PATH}"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        response.raise_for_status()
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _bucket_quantile(
    buckets: Mapping[float, float], q: float, *, scale: float = 1000.0
) -> float | None:
    """The upper bound (ms; seconds with ``scale`` 1) of the bucket where the ``q`` quantile
    falls (cumulative counts); None without samples or past the last finite bound."""
    if not buckets:
        return None
    ordered = sorted(buckets.items())
    total = ordered[-1][1]
    if total <= 0:
        return None
    for bound, count in ordered:
        if count >= q * total - 1e-9:
            return round(bound * scale, 1) if bound != float("inf") else None
    return None
