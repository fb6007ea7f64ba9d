"""The end-to-end throughput phase learns that a chunk ended from the in-process renderer's job
counter (no storage reads while the chunk runs): ended means succeeded or poisoned, not
retried, and the wait returns once the counter reaches the chunk."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from reportfarm_renderer.benchmarking import end_to_end
from reportfarm_renderer.metrics import RendererMetrics


def farm(metrics: RendererMetrics | None) -> end_to_end.Farm:
    client: Any = object()  # never used by the counter
    return end_to_end.Farm(client, [], random.Random(0), metrics=metrics)


def test_ended_counts_succeeded_and_poisoned_jobs_of_every_template() -> None:
    metrics = RendererMetrics()
    watched = farm(metrics)
    assert watched._jobs_ended() == 0
    metrics.jobs.labels(outcome="succeeded", template="a").inc(3)
    metrics.jobs.labels(outcome="succeeded", template="b").inc()
    metrics.jobs.labels(outcome="poisoned", template="a").inc()
    metrics.jobs.labels(outcome="retried", template="a").inc(5)  # will come back: not ended
    assert watched._jobs_ended() == 5


def test_without_an_in_process_renderer_nothing_is_counted() -> None:
    assert farm(None)._jobs_ended() == 0


@pytest.mark.asyncio
async def test_the_wait_ends_when_the_counter_reaches_the_chunk() -> None:
    metrics = RendererMetrics()
    watched = farm(metrics)
    waiting = asyncio.create_task(watched._ended(2))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    metrics.jobs.labels(outcome="succeeded", template="a").inc()
    await asyncio.sleep(0.1)
    assert not waiting.done()
    metrics.jobs.labels(outcome="poisoned", template="a").inc()
    await asyncio.wait_for(waiting, timeout=5)
