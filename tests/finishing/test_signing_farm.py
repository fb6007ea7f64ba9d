"""Signed PDFs end to end: a job asks for a signature through the queue, a real renderer (Chromium,
Azurite) with the farm's key mounted as a Secret folder prints and signs it, and the downloaded PDF
is checked as its recipient would, with pyHanko's validator trusting the test root."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from pathlib import Path

import aiohttp
import pikepdf
import pytest
from pyhanko.sign.diff_analysis import ModificationLevel
from pyhanko.sign.validation.status import PdfSignatureStatus, SignatureCoverageLevel
from reportfarm_renderer import service
from reportfarm_renderer.finishing import signing

from reportfarm import contract
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.finishing import Finish, Permissions, Signature
from reportfarm.settings import StorageSettings

from ..renderer.conftest import WorkerProcess, pdf_text, wait_for
from .conftest import renderer_settings
from .keys import SIGNER_NAME, Pki, rsa_key, validate

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]

PAGES = """<html><body>
{% for n in range(pages) %}<h1 style="break-after: page">第 {{ n + 1 }} 页 page {{ n + 1 }}</h1>{% endfor %}
</body></html>
"""


@pytest.fixture
def templates(template_dir: Path) -> Path:
    (template_dir / "pages.html").write_text(PAGES, encoding="utf-8")
    return template_dir


async def _signed(
    client: ReportFarmClient, finishes: dict[str, Finish], pages: int = 3
) -> dict[str, tuple[contract.ResultRecord, bytes]]:
    ids = {
        name: await client.submit(Submission(template="pages", data={"pages": pages}, finish=f))
        for name, f in finishes.items()
    }
    results = await client.wait(list(ids.values()), timeout_s=120)
    out = {}
    for name, job_id in ids.items():
        record = results[job_id]
        assert record is not None and record.state == "succeeded", record
        out[name] = (record, await client.download(record))
    return out


async def checked(pdf: bytes, pki: Pki) -> PdfSignatureStatus:
    """The validator runs its own event loop: in a thread, as the renderer signs."""
    return await asyncio.to_thread(validate, pdf, pki)


async def assert_valid(pdf: bytes, pki: Pki) -> None:
    status = await checked(pdf, pki)
    assert status.intact and status.valid and status.trusted, status.pretty_print_details()
    assert status.coverage is SignatureCoverageLevel.ENTIRE_FILE
    assert status.modification_level is ModificationLevel.NONE
    assert status.bottom_line, status.pretty_print_details()


async def test_signed_reports_come_out_of_the_farm_valid_visible_or_not(
    storage: StorageSettings,
    templates: Path,
    client: ReportFarmClient,
    signing_dir: Path,
    pki: Pki,
) -> None:
    box = (320.0, 40.0, 560.0, 110.0)
    finishes = {
        "invisible": Finish(sign=Signature(reason="Statement of account", location="Berlin")),
        "last page": Finish(sign=Signature(visible=True, page=-1, box=box, reason="Approved")),
        "first page": Finish(sign=Signature(visible=True, page=0, reason="审核通过")),
    }
    settings = renderer_settings(storage, templates, signing_dir=signing_dir)
    async with service.running(settings):
        done = await _signed(client, finishes)
    for name, (record, pdf) in done.items():
        assert "finish_sign" in record.stages_ms, name
        await assert_valid(pdf, pki)
        assert "page 3" in pdf_text(pdf)  # the report itself, as Chromium printed it
    for name, page, rect in (("last page", 2, box), ("first page", 0, Signature().box)):
        with pikepdf.open(io.BytesIO(done[name][1])) as opened:
            assert len(opened.pages) == 3
            [widget] = opened.Root.AcroForm.Fields
            assert [float(v) for v in widget.Rect] == list(rect), name
            assert widget.P.objgen == opened.pages[page].obj.objgen, name
            assert "/N" in widget.AP and widget.AP.N.read_bytes(), name  # the stamp is drawn
    with pikepdf.open(io.BytesIO(done["invisible"][1])) as opened:
        [widget] = opened.Root.AcroForm.Fields
        assert [float(v) for v in widget.Rect] == [0, 0, 0, 0]
    status = await checked(done["invisible"][1], pki)
    assert status.signing_cert.subject.native["common_name"] == SIGNER_NAME


async def test_a_locked_report_is_signed_and_stays_locked(
    storage: StorageSettings,
    templates: Path,
    client: ReportFarmClient,
    signing_dir: Path,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Also: a renderer with a signing key and EN 16931's rules prepares Saxon at start."""
    caplog.set_level(logging.INFO, logger="reportfarm_renderer.service")
    finish = Finish(
        permissions=Permissions(copy=False, modify=False, annotate=False),
        sign=Signature(visible=True, reason="Final"),
    )
    settings = renderer_settings(storage, templates, signing_dir=signing_dir)
    async with service.running(settings):
        [(record, pdf)] = (await _signed(client, {"locked": finish})).values()

        async def compiled() -> bool:
            return "EN 16931's rules compiled in" in caplog.text

        assert await wait_for(compiled, timeout=60)
    assert {"finish_permissions", "finish_sign"} <= set(record.stages_ms)
    await assert_valid(pdf, pki)
    with pikepdf.open(io.BytesIO(pdf)) as opened:  # opens without a password, as before
        assert opened.is_encrypted
        assert not opened.allow.extract and not opened.allow.modify_other
        assert not opened.allow.modify_annotation


async def test_a_farm_without_a_key_fails_signed_jobs_with_that_reason_and_goes_on(
    storage: StorageSettings, templates: Path, client: ReportFarmClient, tmp_path: Path
) -> None:
    settings = renderer_settings(storage, templates, signing_dir=tmp_path / "no-secret")
    async with service.running(settings):
        asked = await client.submit(
            Submission(template="pages", data={"pages": 1}, finish=Finish(sign=Signature()))
        )
        plain = await client.submit(Submission(template="pages", data={"pages": 1}))
        results = await client.wait([asked, plain], timeout_s=120)
        assert await wait_for(client.queue.poison_depth, timeout=30)
    record = results[asked]
    assert record is not None and record.state == "failed", record
    assert record.attempts == 1  # permanent: never retried, no browser replaced
    reason = (
        "finishing stage 'sign' failed: this farm has no signing key "
        f"(no tls.key in {tmp_path / 'no-secret'}; see docs/finishing/signing.md)"
    )
    assert reason in (record.error or "")
    [poisoned] = [json.loads(text) for text in await client.queue.peek_poison()]
    assert poisoned["job_id"] == asked and "no signing key" in poisoned["reason"]
    assert results[plain] is not None and results[plain].state == "succeeded"


async def test_a_signing_renderer_is_ready_once_its_finishing_processes_are_up(
    storage: StorageSettings, templates: Path, signing_dir: Path
) -> None:
    """A pod of a farm that signs is capacity only once its finishing processes are up: its
    browser prints within a second, but each process loads the key, the libraries and the
    fonts for seconds of CPU (on the real node a burst's first jobs waited for them while the
    operator counted the pod as ready). ``/readyz``, polled every 20 ms from the moment the
    renderer runs, answers 503 naming the finishing processes while they start, and its first
    200 comes only when all of them are up."""
    settings = renderer_settings(storage, templates, signing_dir=signing_dir)
    answers: list[tuple[int, str, bool]] = []
    async with service.running(settings) as renderer, aiohttp.ClientSession() as http:
        finishers = renderer.worker.runner.finishers
        assert finishers is not None
        for _ in range(3000):  # a minute
            async with http.get(f"http://127.0.0.1:{renderer.port}/readyz") as response:
                body = await response.text()
            up = all(process.ready.done() for process in finishers._all)
            answers.append((response.status, body, up and len(finishers._all) == finishers.size))
            if response.status == 200:
                break
            await asyncio.sleep(0.02)
    assert answers[-1][0] == 200, answers[-3:]
    assert answers[-1][2], "ready before its finishing processes were up"
    starting = [body for status, body, _ in answers if status == 503]
    assert any("finishing processes starting" in body for body in starting), answers[:3]


async def test_a_key_that_cannot_be_used_stops_the_renderer_at_start(
    storage: StorageSettings, templates: Path, signing_dir: Path
) -> None:
    (signing_dir / "tls.key").write_bytes(b"-----BEGIN PRIVATE KEY-----\nnope\n")
    settings = renderer_settings(storage, templates, signing_dir=signing_dir)
    with pytest.raises(signing.SignerError, match=r"tls.key is not a private key"):
        async with service.running(settings):
            pytest.fail("the renderer started with a key it cannot use")


async def test_the_worker_process_exits_with_the_reason_when_its_key_cannot_be_used(
    storage: StorageSettings,
    templates: Path,
    pki: Pki,
    tmp_path: Path,
    worker_process: type[WorkerProcess],
) -> None:
    """As a pod would: ``reportfarm worker`` with a Secret whose key is not the certificate's."""
    folder = pki.write(tmp_path / "secret", key=rsa_key())
    log = tmp_path / "worker.log"
    worker = worker_process(storage, templates, log, REPORTFARM_SIGNING_DIR=str(folder))
    code = await asyncio.to_thread(worker.process.wait, 60)
    text = log.read_text()
    assert code == 1, text
    assert "start-up failed" in text and "does not match the certificate" in text
    assert "BEGIN" not in text  # no key material in the log
