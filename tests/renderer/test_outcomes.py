"""Typed outcomes: the job runner decides by a failure's type, never by its text.

A real queue and blob store (Azurite), the real template catalog and runner; the pool is a stand-in
that raises the failure under test, so each row is one decision of the runner. Several messages
below say the words the runner used to search for ("deliveries", "DocumentError", "payload"):
they must change nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reportfarm_renderer import pool as pooling
from reportfarm_renderer import templates
from reportfarm_renderer.jobs import JobRunner, Lease
from reportfarm_renderer.metrics import RendererMetrics

from reportfarm import contract, outcomes
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm.storage import errors as storage_errors

from .conftest import renderer_settings, wait_for

pytestmark = [pytest.mark.azurite]


class FailingPool:
    """Stands in for the browser pool: every render raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def render(
        self, html: str, options: contract.PdfOptions, *, javascript: bool, sink: object = None
    ) -> bytes:
        raise self.error


CASES = [
    pytest.param(
        outcomes.TemporaryError("failed on 9 deliveries, DocumentError, payload", delay_s=0),
        ("retried", None, None, None),
        id="temporary-whatever-it-says",
    ),
    pytest.param(
        pooling.WorkerCrashed("render timed out on 3 deliveries"),
        ("retried", None, None, None),
        id="worker-crashed",
    ),
    pytest.param(
        outcomes.PermanentError("failed on 9 deliveries; last error: none", kind="other"),
        ("poisoned", "permanent", "other", "failed on 9 deliveries; last error: none"),
        id="permanent-whatever-it-says",
    ),
    pytest.param(
        pooling.DocumentError("it navigated away"),
        ("poisoned", "permanent", "documenterror", "DocumentError: it navigated away"),
        id="document-error",
    ),
    pytest.param(
        pooling.RenderTimeout("render exceeded 20s"),
        ("poisoned", "exhausted", "render_timeout", "render timed out on 1 deliveries: render"),
        id="render-timeout-limit",
    ),
    pytest.param(
        storage_errors.StorageUnavailable("upload", ConnectionError("refused")),
        ("retried", None, None, None),
        id="storage-away",
    ),
]


@pytest.mark.parametrize(("error", "expected"), CASES)
async def test_the_runner_reads_the_type(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    error: Exception,
    expected: tuple[str, str | None, str | None, str | None],
) -> None:
    outcome, error_kind, metric, reason = expected
    job_id = await client.submit(Submission(template="plain", data={"name": "x"}))
    settings = renderer_settings(storage, template_dir, max_render_timeouts=1)
    metrics = RendererMetrics()
    runner = JobRunner(
        settings=settings,
        catalog=templates.TemplateCatalog.load(template_dir),
        pool=FailingPool(error),  # type: ignore[arg-type]
        blobs=client.blobs,
        metrics=metrics,
    )
    (delivery,) = await client.queue.receive(max_messages=1, visibility_timeout=30)
    assert await runner.run(Lease(delivery, client.queue)) == outcome
    record = await client.result(job_id)
    if outcome == "retried":
        assert record is None
        # Released, not poisoned: delivered again (after the error's delay, else the backoff).
        again = await wait_for(
            lambda: client.queue.receive(max_messages=1, visibility_timeout=30), timeout=10
        )
        assert again[0].dequeue_count == 2 and await client.queue.poison_depth() == 0
        return
    assert record is not None and record.state == "failed"
    assert (record.error_kind, (record.error or "")[: len(reason or "")]) == (error_kind, reason)
    poison = [json.loads(text) for text in await client.queue.peek_poison()]
    assert [item["reason"] for item in poison] == [record.error]
    assert metrics.registry.get_sample_value("reportfarm_poison_messages_total", {"reason": metric})


async def test_an_unknown_error_is_retried_until_the_deliveries_run_out(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    await client.submit(Submission(template="plain", data={"name": "x"}))
    runner = JobRunner(
        settings=renderer_settings(storage, template_dir, max_dequeue_count=2),
        catalog=templates.TemplateCatalog.load(template_dir),
        pool=FailingPool(RuntimeError("DocumentError in the text")),  # type: ignore[arg-type]
        blobs=client.blobs,
        metrics=RendererMetrics(),
    )
    outcomes_seen = []
    for _ in range(2):
        (delivery,) = await client.queue.receive(max_messages=1, visibility_timeout=30)
        if delivery.dequeue_count == 1:
            await client.queue.release(delivery)  # the runner's backoff would make us wait
            outcomes_seen.append("retried")
            continue
        outcomes_seen.append(await runner.run(Lease(delivery, client.queue)))
    assert outcomes_seen == ["retried", "poisoned"]
    (poison,) = [json.loads(text) for text in await client.queue.peek_poison()]
    assert (
        poison["reason"]
        == "failed on 2 deliveries; last error: RuntimeError: DocumentError in the text"
    )
