"""Finishing processes (spawned, real): stages run there with the key each process loaded once,
a process that dies fails only the job it ran, with its reason, and is replaced; one that dies
while idle costs no job. Plus the pod's CPUs as the cgroup says them."""

from __future__ import annotations

import asyncio
import io
import os
import signal
from pathlib import Path

import pikepdf
import pytest
from reportfarm_renderer import cpus, finishing
from reportfarm_renderer.finishing import keys, processes

from reportfarm import outcomes
from reportfarm.finishing import Finish, Metadata, Signature

from .keys import Pki, rsa_key, validate


def _pdf(pages: int) -> bytes:
    document = pikepdf.new()
    for index in range(pages):
        document.add_blank_page(page_size=(595, 842))
        page = document.pages[index]
        page.Contents = document.make_stream(b"BT /F1 12 Tf 72 720 Td (page) Tj ET " * 40)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _inputs(finish: Finish) -> finishing.Inputs:
    return finishing.Inputs(job_id="job-1", finish=finish)


async def test_stages_run_in_a_process_with_its_own_key(signing_dir: Path, pki: Pki) -> None:
    finishers = processes.FinishingProcesses(size=1, signing_dir=signing_dir)
    try:
        finish = Finish(
            metadata=Metadata(title="Rechnung Łódź"),
            sign=Signature(visible=True, reason="Rechnung", location="Kraków"),
        )
        first = await finishers.run(_pdf(2), _inputs(finish))
        second = await finishers.run(_pdf(2), _inputs(finish))
        assert [t.stage for t in first.timings] == ["metadata", "pdfua", "sign"]
        assert all(t.cpu_s > 0 for t in second.timings if t.stage == "sign")
        for done in (first, second):
            assert (await asyncio.to_thread(validate, done.pdf, pki)).bottom_line
        assert (await finishers.pids())[0] != os.getpid()
        # a stage's permanent failure comes back as the stage's error; the process stays
        with pytest.raises(finishing.FinishingFailed, match="past the last page") as failed:
            await finishers.run(_pdf(1), _inputs(Finish(sign=Signature(visible=True, page=7))))
        assert failed.value.stage == "sign"
        assert finishers.replaced == 0
    finally:
        await finishers.close()


async def test_a_signing_process_measures_a_signature_at_its_start(signing_dir: Path) -> None:
    """The operator's estimate of a signing job's finishing CPU before any job ended."""
    signing = processes.FinishingProcesses(size=2, signing_dir=signing_dir)
    printing = processes.FinishingProcesses(size=1)
    try:
        assert signing.signature_cpu_s() is None  # not started: nothing measured yet
        await asyncio.gather(signing.wait_ready(), printing.wait_ready())
        await asyncio.sleep(0)  # the figures come right after each process's ready answer
        for _ in range(100):
            if signing.signature_cpu_s() is not None:
                break
            await asyncio.sleep(0.05)
        measured = signing.signature_cpu_s()
        assert measured is not None and 0 < measured < 30
        assert printing.signature_cpu_s() is None  # no key: it does not sign
        finish = Finish(sign=Signature(visible=True, reason="Rechnung"))
        job = await signing.run(_pdf(1), _inputs(finish))
        print("start-up signature", measured, "a job's", [t.cpu_s for t in job.timings])
    finally:
        await signing.close()
        await printing.close()


async def test_a_process_that_cannot_sign_says_why_and_refuses_signing_jobs_as_temporary(
    pki: Pki, tmp_path: Path
) -> None:
    """A child's own load fails (here a key that is not the certificate's, as a Secret changed
    after the renderer proved it would be): its ``ready`` raises the reason, a job that asks for
    a signature there is refused as temporary with it (another pod may sign it), one that does
    not is finished, and no process is replaced (an initializer that raised broke the process at
    each signing job, the reason only in its stderr)."""
    folder = pki.write(tmp_path / "secret", key=rsa_key())  # not the certificate's key
    finishers = processes.FinishingProcesses(size=1, signing_dir=folder)
    try:
        finishers.start()
        with pytest.raises(keys.SignerError, match=r"does not match the certificate in"):
            await finishers._all[0].ready
        why, lasting = finishers.unable() or ("", False)  # the renderer is never ready
        assert why.startswith("no finishing process can sign: ") and "does not match" in why
        assert lasting
        for _ in range(2):
            with pytest.raises(outcomes.TemporaryError, match="this finishing process cannot sign"):
                await finishers.run(_pdf(1), _inputs(Finish(sign=Signature(visible=True))))
        done = await finishers.run(_pdf(1), _inputs(Finish(metadata=Metadata(title="x"))))
        assert done.pdf.startswith(b"%PDF") and finishers.replaced == 0
        assert finishers.signature_cpu_s() is None
    finally:
        await finishers.close()


async def test_processes_start_one_cpu_at_a_time_and_a_job_takes_the_first_ready() -> None:
    """On a 1-CPU pod the second process starts once the first is ready (a start is CPU-bound:
    together both were ready only after twice one's start); a job needs only the first, the
    renderer's readiness all of them (``unable``: a start takes the CPU the jobs would have)."""
    finishers = processes.FinishingProcesses(size=2, at_once=1)
    try:
        assert finishers.unable() is None  # not asked to start: nothing to wait for
        finishers.start()
        assert len(finishers._all) == 1  # the second waits for the first
        assert finishers.unable() == ("finishing processes starting: 0 of 2 ready", False)
        await finishers._all[0].ready  # the second starts now, on the pod's CPU: not ready yet
        assert finishers.unable() == ("finishing processes starting: 1 of 2 ready", False)
        done = await finishers.run(_pdf(1), _inputs(Finish(metadata=Metadata(title="x"))))
        assert done.pdf.startswith(b"%PDF")
        await finishers.wait_ready()
        first, second = finishers._all
        assert first.ready.done() and second.ready.done()
        assert finishers.unable() is None  # all up: the renderer may say it is ready
        assert len(set(await finishers.pids())) == 2
        assert processes.FinishingProcesses(size=3, at_once=9).at_once == 3
    finally:
        await finishers.close()


async def test_a_process_that_dies_fails_only_its_job_and_is_replaced() -> None:
    finishers = processes.FinishingProcesses(size=2)
    finish = Finish(metadata=Metadata(title="big"))
    try:
        # one that dies idle costs no job: the next job takes another, and it is replaced
        idle = (await finishers.pids())[0]
        os.kill(idle, signal.SIGKILL)
        await asyncio.sleep(0.5)  # the executor notices its process is gone
        for _ in range(2):
            assert (await finishers.run(_pdf(1), _inputs(finish))).pdf.startswith(b"%PDF")
        assert finishers.replaced == 1 and idle not in await finishers.pids()
        # one that dies while it runs a job fails that job only, naming how it died
        before = set(await finishers.pids())
        heavy = _pdf(3000)  # the metadata stage on it takes long enough to be killed in it
        doomed = asyncio.create_task(finishers.run(heavy, _inputs(finish)))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if finishers.working_pids():
                break
        (victim,) = finishers.working_pids()
        other = asyncio.create_task(finishers.run(_pdf(2), _inputs(finish)))
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(processes.FinisherDied, match=f"{victim} died \\(killed by SIGKILL\\)"):
            await doomed
        assert (await other).pdf.startswith(b"%PDF")
        assert finishers.replaced == 2
        after = set(await finishers.pids())
        assert len(after) == 2 and victim not in after and after & before
        assert (await finishers.run(_pdf(2), _inputs(finish))).pdf.startswith(b"%PDF")
    finally:
        await finishers.close()


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({"cpu.max": "150000 100000\n"}, 1.5, id="v2-quota"),
        pytest.param({"cpu.max": "max 100000\n"}, None, id="v2-none"),
        pytest.param({"cpu.cfs_quota_us": "200000", "cpu.cfs_period_us": "100000"}, 2.0, id="v1"),
        pytest.param({"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"}, None, id="v1-none"),
        pytest.param({}, None, id="no-cgroup"),
    ],
)
def test_the_pods_cpus_are_its_cgroups_quota(
    tmp_path: Path, files: dict[str, str], expected: float | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert cpus.quota(tmp_path) == expected
    limit = cpus.pod_cpus(tmp_path)
    assert limit == min(expected, cpus.affinity()) if expected else limit == cpus.affinity()
    assert cpus.whole(1.5) == 2 and cpus.whole(2.0) == 2 and cpus.whole(0.2) == 1
