"""The renderer end to end: real Chromium, real Azurite, the real worker loop."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
from pathlib import Path

import aiohttp
import pytest
from reportfarm_renderer import service

from reportfarm import contract
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm.storage.queueing import JobQueue

from .conftest import EXAMPLES, job_result_ok, pdf_text, renderer_settings, wait_for

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


def example(name: str) -> dict[str, object]:
    return json.loads((EXAMPLES / "data" / f"{name}.json").read_text(encoding="utf-8"))


async def test_a_job_becomes_a_pdf_with_its_chinese_text(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    async with service.running(renderer_settings(storage, template_dir)):
        job_id = await client.submit(
            Submission(template="achievement", data=example("achievement"))
        )
        results = await client.wait([job_id], timeout_s=60)
    record = results[job_id]
    assert record is not None and record.state == "succeeded", record
    assert record.output_blob == f"pdf/{job_id}.pdf"
    assert record.attempts == 1
    assert {"render_html", "pdf_generation", "storage_upload"} <= set(record.stages_ms)
    pdf = await client.download(record)
    assert pdf.startswith(b"%PDF")
    student = example("achievement")["student"]
    assert isinstance(student, dict)
    assert student["name"] in pdf_text(pdf)
    assert await client.queue.depth() == 0


async def test_large_data_travels_as_a_payload_blob(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    name = "王小明" + "长" * 30_000  # about 90 KB of UTF-8: over the queue's 64 KiB
    async with service.running(renderer_settings(storage, template_dir)):
        job_id = await client.submit(Submission(template="plain", data={"name": name}))
        assert await client.blobs.exists(contract.payload_blob(job_id))
        results = await client.wait([job_id], timeout_s=60)
    record = results[job_id]
    assert job_result_ok(record), record
    assert "王小明" in pdf_text(await client.download(record))  # type: ignore[arg-type]


async def test_bad_jobs_go_to_poison_with_their_reason_and_the_worker_keeps_going(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    queue: JobQueue = client.queue
    await queue.send("this is not json")
    await queue.send(base64.b64encode(b"\xff\xfe\xfd").decode())
    unknown = await client.submit(Submission(template="nosuch", data={}))
    broken = await client.submit(Submission(template="achievement", data={"student": {}}))
    good = await client.submit(Submission(template="plain", data={"name": "赵六"}))
    async with service.running(renderer_settings(storage, template_dir)) as renderer:
        results = await client.wait([unknown, broken, good], timeout_s=60)
        assert await wait_for(lambda: _poison_count(queue, 4), timeout=30)
        metrics = renderer.parts.metrics.registry
        poisoned = metrics.get_sample_value(
            "reportfarm_poison_messages_total", {"reason": "invalid_message"}
        )
    assert job_result_ok(results[good])
    assert results[unknown] is not None and results[unknown].state == "failed"
    assert "nosuch" in (results[unknown].error or "")
    assert "UnknownTemplateError" in (results[unknown].error or "")
    assert results[broken] is not None and "TemplateRenderError" in (results[broken].error or "")
    poison = [json.loads(text) for text in await queue.peek_poison()]
    reasons = " | ".join(item["reason"] for item in poison)
    assert "neither base64 nor JSON" in reasons and "not UTF-8" in reasons
    assert {item["job_id"] for item in poison} >= {unknown, broken}
    assert poisoned == 2
    assert await queue.depth() == 0


async def _poison_count(queue: JobQueue, expected: int) -> bool:
    return await queue.poison_depth() >= expected


async def test_a_render_longer_than_the_visibility_timeout_is_not_delivered_twice(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    settings = renderer_settings(storage, template_dir, visibility_timeout=3, pool_size=2)
    async with service.running(settings):
        job_id = await client.submit(
            Submission(template="slow", data={"name": "x", "busy_ms": 8000})
        )
        results = await client.wait([job_id], timeout_s=60)
    record = results[job_id]
    assert job_result_ok(record), record
    assert record is not None and record.attempts == 1
    assert await client.queue.depth() == 0


async def test_pool_resizes_at_run_time_over_http(
    storage: StorageSettings, template_dir: Path
) -> None:
    async with service.running(renderer_settings(storage, template_dir, pool_size=1)) as renderer:
        url = f"http://127.0.0.1:{renderer.port}"
        async with aiohttp.ClientSession() as http:
            async with http.put(f"{url}/pool", json={"size": 3}) as response:
                assert response.status == 200
            assert await wait_for(lambda: _live(http, url, 3), timeout=60)
            async with http.put(f"{url}/pool", json={"size": 1}) as response:
                assert response.status == 200
            assert await wait_for(lambda: _live(http, url, 1), timeout=60)
            async with http.put(f"{url}/pool", json={"size": -1}) as response:
                assert response.status == 400
            async with http.get(f"{url}/readyz") as response:
                assert response.status == 200
            async with http.get(f"{url}/metrics") as response:
                text = await response.text()
    assert "reportfarm_pool_size 1.0" in text


async def _live(http: aiohttp.ClientSession, url: str, count: int) -> bool:
    async with http.get(f"{url}/pool") as response:
        state = await response.json()
    return bool(state["live"] == count and state["size"] == count)


async def test_sigterm_drains_running_jobs_before_exit(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    worker_process,
    tmp_path: Path,
) -> None:
    worker = worker_process(
        storage, template_dir, tmp_path / "worker.log", REPORTFARM_DRAIN_TIMEOUT="30"
    )
    job_id = await client.submit(Submission(template="slow", data={"name": "x", "busy_ms": 3000}))
    await wait_for(lambda: _running_jobs(worker.port), timeout=60)
    worker.signal(signal.SIGTERM)
    exit_code = await asyncio.to_thread(worker.process.wait, 60)
    assert exit_code == 0, (tmp_path / "worker.log").read_text()
    record = await client.result(job_id)
    assert job_result_ok(record), (tmp_path / "worker.log").read_text()
    assert await client.queue.depth() == 0


async def test_a_job_running_on_through_a_drain_keeps_its_lease(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    worker_process,
    tmp_path: Path,
) -> None:
    """The leases are extended through the grace period, not only until receiving stops: a
    render longer than the visibility timeout that began before SIGTERM is never received by
    another pod while this one drains (before: it was, 3 s in here, once the keeper had stopped
    with the receiving)."""
    log = tmp_path / "worker.log"
    worker = worker_process(storage, template_dir, log, REPORTFARM_DRAIN_TIMEOUT="30",
                            REPORTFARM_VISIBILITY_TIMEOUT="3")  # fmt: skip
    job_id = await client.submit(Submission(template="slow", data={"name": "x", "busy_ms": 9000}))
    await wait_for(lambda: _running_jobs(worker.port), timeout=60)
    worker.signal(signal.SIGTERM)
    taken = []  # another pod's receives, while this one drains
    while worker.process.poll() is None:
        taken += await client.queue.receive(max_messages=1, visibility_timeout=30)
        await asyncio.sleep(0.25)
    assert worker.process.returncode == 0, log.read_text()
    assert taken == [], log.read_text()
    record = await client.result(job_id)
    assert job_result_ok(record) and record is not None and record.attempts == 1, record


async def test_sigterm_releases_what_cannot_finish_in_the_grace_period(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    worker_process,
    tmp_path: Path,
) -> None:
    worker = worker_process(
        storage,
        template_dir,
        tmp_path / "worker.log",
        REPORTFARM_DRAIN_TIMEOUT="1",
        REPORTFARM_VISIBILITY_TIMEOUT="300",
    )
    await client.submit(Submission(template="slow", data={"name": "x", "busy_ms": 15000}))
    await wait_for(lambda: _running_jobs(worker.port), timeout=60)
    worker.signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.process.wait, 60) == 0
    # Released at once (visibility 0), not after the 300 s visibility timeout.
    received = await client.queue.receive(max_messages=1, visibility_timeout=30)
    assert len(received) == 1 and received[0].dequeue_count == 2  # the worker had it once


async def test_kill_9_mid_render_and_the_job_still_completes_once(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    worker_process,
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    first = worker_process(storage, template_dir, log, REPORTFARM_VISIBILITY_TIMEOUT="4")
    job_id = await client.submit(Submission(template="slow", data={"name": "x", "busy_ms": 2500}))
    await wait_for(lambda: _running_jobs(first.port), timeout=60)
    first.signal(signal.SIGKILL)
    first.process.wait()
    assert await client.result(job_id) is None
    second = worker_process(storage, template_dir, log, REPORTFARM_VISIBILITY_TIMEOUT="4")
    record = await wait_for(lambda: client.result(job_id), timeout=90)
    assert record.state == "succeeded", log.read_text()
    assert record.attempts == 2
    await wait_for(lambda: _empty(client.queue), timeout=30)
    second.stop()


async def _empty(queue: JobQueue) -> bool:
    return await queue.depth() == 0


async def _running_jobs(port: int) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/pool") as response,
        ):
            return bool((await response.json())["running_jobs"] > 0)
    except aiohttp.ClientError:
        return False
