"""Draining while a receive is in flight: the jobs it brings back are run within the grace period,
not handed back (a handed-back job was a second delivery on another pod, attempts 2, though
nothing of it had run). Pure bookkeeping with a fake queue, runner and pool."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import pytest
from prometheus_client import generate_latest
from reportfarm_renderer import worker as working
from reportfarm_renderer.jobs import Lease
from reportfarm_renderer.metrics import RendererMetrics

from reportfarm import renderer_api


@dataclasses.dataclass
class FakePool:
    size: int = 2
    lanes: int = 2
    open_lanes: int = 2
    change: asyncio.Future[None] | None = None

    def changed(self) -> asyncio.Future[None]:
        self.change = asyncio.get_running_loop().create_future()
        return self.change

    def launch(self, lanes: int) -> None:
        """Browsers come up: their pages are open, and whoever waits for a change hears it."""
        self.open_lanes = lanes
        if self.change is not None and not self.change.done():
            self.change.set_result(None)


@dataclasses.dataclass
class FakeQueue:
    """A queue whose receive takes ``receive_s`` and returns ``batch`` messages."""

    receive_s: float
    batch: int = 2
    name: str = "fake"
    in_receive: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    released: list[str] = dataclasses.field(default_factory=list)
    served: int = 0

    async def receive(self, *, max_messages: int, visibility_timeout: int) -> list[Any]:
        self.in_receive.set()
        await asyncio.sleep(self.receive_s)
        count = min(max_messages, self.batch)
        self.served += count
        return [
            dataclasses.replace(_Delivery(), message_id=f"m{self.served - i}") for i in range(count)
        ]

    async def release(self, delivery: Any, *, delay_s: float) -> None:
        self.released.append(delivery.message_id)


@dataclasses.dataclass
class _Delivery:
    message_id: str = ""
    dequeue_count: int = 1
    content: str = ""


@dataclasses.dataclass
class FakeRunner:
    job_s: float
    done: list[str] = dataclasses.field(default_factory=list)

    async def run(self, lease: Lease) -> str:
        await asyncio.sleep(self.job_s)
        lease.done = True
        self.done.append(lease.delivery.message_id)
        return "succeeded"


def make(queue: FakeQueue, runner: FakeRunner, pool: FakePool | None = None) -> working.QueueWorker:
    return working.QueueWorker(
        runner=cast(Any, runner),
        lanes=[cast(Any, queue)],
        pool=cast(Any, pool or FakePool()),
        metrics=RendererMetrics(),
        visibility_timeout=30,
    )


async def test_a_receive_in_flight_at_sigterm_is_run_not_handed_back() -> None:
    queue, runner = FakeQueue(receive_s=0.3), FakeRunner(job_s=0.2)
    worker = make(queue, runner)
    loop = asyncio.create_task(worker.run())
    await queue.in_receive.wait()  # SIGTERM while the first receive is out
    released = await worker.drain(timeout=5)
    await loop
    assert released == 0 and queue.released == []
    assert sorted(runner.done) == ["m1", "m2"]  # what it brought back ran here, once


async def test_what_the_grace_period_cannot_finish_is_still_handed_back() -> None:
    queue, runner = FakeQueue(receive_s=0.1), FakeRunner(job_s=30)
    worker = make(queue, runner)
    loop = asyncio.create_task(worker.run())
    await queue.in_receive.wait()
    released = await worker.drain(timeout=0.5)
    await loop
    assert released == 2 and sorted(queue.released) == ["m1", "m2"]
    assert runner.done == []


async def test_a_receive_that_returns_after_the_drain_ended_is_handed_back() -> None:
    queue, runner = FakeQueue(receive_s=1.0), FakeRunner(job_s=0.1)
    worker = make(queue, runner)
    loop = asyncio.create_task(worker.run())
    await queue.in_receive.wait()
    released = await worker.drain(timeout=0.2)  # ends before the receive comes back
    await loop
    assert released == 0
    assert sorted(queue.released) == ["m1", "m2"] and runner.done == []


async def test_a_browser_that_comes_up_takes_jobs_at_once_not_at_the_next_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A starting pod's browsers are all launching: no room, no receive. The worker hears the
    pool change when one is up and receives for it then; with the look between waits pushed out
    to an hour, only that can start the receive."""
    monkeypatch.setattr(working, "ROOM_LOOK_S", 3600.0)
    pool = FakePool(open_lanes=0)
    queue, runner = FakeQueue(receive_s=0.0, batch=1), FakeRunner(job_s=0.0)
    worker = make(queue, runner, pool)
    loop = asyncio.create_task(worker.run())
    while pool.change is None:  # noqa: ASYNC110 - the worker waiting for room is the point
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert queue.served == 0  # nothing up, nothing received
    pool.launch(2)
    async with asyncio.timeout(10):  # a bound on a hang, not a timing: the next look is an hour
        while queue.served == 0:  # noqa: ASYNC110 - the receive the launch started
            await asyncio.sleep(0.01)
    await worker.drain(timeout=5)
    await loop


async def test_the_oldest_running_job_is_on_metrics_while_it_runs_and_zero_after() -> None:
    """What the operator reads to spare a pod whose job would outlive its drain."""
    queue, runner = FakeQueue(receive_s=0.05, batch=1), FakeRunner(job_s=1.0)
    worker = make(queue, runner)

    def oldest() -> float:
        text = generate_latest(worker.metrics.registry).decode()
        (line,) = [x for x in text.splitlines() if x.startswith(renderer_api.OLDEST_JOB_METRIC)]
        return float(line.split()[-1])

    assert oldest() == 0.0
    loop = asyncio.create_task(worker.run())
    while not worker.leases:  # noqa: ASYNC110 - the first job's start is the point
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.4)
    assert 0.3 <= oldest() < 30  # the job has run ~0.4 s (a loaded machine: only a floor)
    await worker.drain(timeout=5)
    await loop
    assert runner.done and oldest() == 0.0
