"""The browser pool's bookkeeping, with fake workers: fast, no browser.

A fake worker's behaviour is chosen by the HTML it renders: ``ok``, ``fail``, ``hang``,
``bad-document``, or ``gate:NAME`` (wait until the test opens that gate).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

import pytest
from reportfarm_renderer import pool as pooling

from reportfarm import contract, outcomes

OPTIONS = contract.PdfOptions()


class FakeWorker:
    def __init__(self, farm: Farm, number: int) -> None:
        self.farm = farm
        self.number = number
        self.jobs_done = 0
        self.alive = True
        self.closed = False
        self.rss = 100
        self.stopped = asyncio.Event()
        self.on_return: Callable[[], None] | None = None

    async def render(
        self,
        html: str,
        options: contract.PdfOptions,
        *,
        javascript: bool,
        sink: pooling.Sink | None = None,
    ) -> bytes:
        self.farm.running += 1
        self.farm.peak = max(self.farm.peak, self.farm.running)
        try:
            if html == "fail":
                raise RuntimeError("the browser fell over")
            if html == "bad-document":
                raise pooling.DocumentError("the document navigates away")
            if html == "sink-fails":  # what the Chromium worker raises when the sink does
                raise pooling.OutputFailed(ValueError("the blob store refused a block"))
            if html == "hang":  # until closed, like a browser stuck in a script
                await self.stopped.wait()
                raise RuntimeError("target closed")
            if html.startswith("gate:"):
                await self.farm.gates[html[5:]].wait()
            await asyncio.sleep(0)
        finally:
            self.farm.running -= 1
        self.jobs_done += 1
        if self.on_return is not None:
            self.on_return()
        return f"%PDF worker {self.number}".encode()

    async def rss_bytes(self) -> int:
        return self.rss

    async def close(self) -> None:
        self.closed = True
        self.alive = False
        self.stopped.set()


class Farm:
    """The worker factory: counts launches, can fail or hang on demand."""

    def __init__(self) -> None:
        self.workers: list[FakeWorker] = []
        self.failures_ahead = 0
        self.hang = False
        self.running = 0
        self.peak = 0
        self.gates: collections.defaultdict[str, asyncio.Event] = collections.defaultdict(
            asyncio.Event
        )

    async def __call__(self) -> FakeWorker:
        await asyncio.sleep(0)
        if self.hang:
            await asyncio.Event().wait()
        if self.failures_ahead:
            self.failures_ahead -= 1
            raise RuntimeError("chromium would not start")
        worker = FakeWorker(self, len(self.workers) + 1)
        self.workers.append(worker)
        return worker

    def open(self, gate: str) -> None:
        self.gates[gate].set()


class Events:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args: self.calls.append((name, args))

    def named(self, name: str) -> list[tuple[object, ...]]:
        return [args for called, args in self.calls if called == name]


@pytest.fixture
def farm() -> Farm:
    return Farm()


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pooling, "_BACKOFF_FIRST", 0.01)


def make_pool(farm: Farm, events: Events | None = None, **overrides: object) -> pooling.BrowserPool:
    settings: dict[str, object] = dict(
        size=2,
        borrow_timeout=5.0,
        launch_timeout=5.0,
        render_timeout=5.0,
        recycle_after_jobs=None,
        recycle_rss_bytes=None,
        memory_check_interval=0.0,
    )
    settings.update(overrides)
    return pooling.BrowserPool(farm, events=events, **settings)  # type: ignore[arg-type]


async def wait_until(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - polling pool state is the point
            await asyncio.sleep(0.005)


def render(pool: pooling.BrowserPool, html: str) -> asyncio.Task[bytes]:
    return asyncio.create_task(pool.render(html, OPTIONS))


# -- lending -----------------------------------------------------------------------------------


async def test_at_most_size_renders_run_at_once(farm: Farm) -> None:
    async with make_pool(farm, size=3) as pool:
        tasks = [render(pool, "gate:go") for _ in range(7)]
        await wait_until(lambda: farm.running == 3)
        assert (pool.busy, pool.free_capacity) == (3, 0)
        farm.open("go")
        assert len(await asyncio.gather(*tasks)) == 7
        assert farm.peak == 3 and len(farm.workers) == 3


async def test_the_next_borrower_waits_for_a_returned_worker(farm: Farm, events: Events) -> None:
    async with make_pool(farm, events, size=1) as pool:
        first = render(pool, "gate:first")
        await wait_until(lambda: pool.busy == 1)
        second = render(pool, "ok")
        await asyncio.sleep(0.05)
        assert not second.done()
        farm.open("first")
        assert await second == b"%PDF worker 1"
        assert first.done() and len(farm.workers) == 1
        assert max(args[0] for args in events.named("borrow_waited")) > 0.04  # type: ignore[type-var]


async def test_borrow_times_out_when_every_worker_is_busy(farm: Farm) -> None:
    async with make_pool(farm, size=1, borrow_timeout=0.05) as pool:
        holder = render(pool, "gate:hold")
        await wait_until(lambda: pool.busy == 1)
        with pytest.raises(pooling.BorrowTimeout) as caught:
            await pool.render("ok", OPTIONS)
        assert isinstance(caught.value, outcomes.TemporaryError)
        farm.open("hold")
        await holder
        assert await pool.render("ok", OPTIONS)


async def test_a_worker_returns_to_the_pool_after_success(farm: Farm) -> None:
    async with make_pool(farm, size=1) as pool:
        for _ in range(3):
            assert await pool.render("ok", OPTIONS) == b"%PDF worker 1"
        assert (pool.live, pool.idle, pool.busy) == (1, 1, 0)
        assert farm.workers[0].jobs_done == 3


async def test_borrowers_are_served_first_come_first_served(farm: Farm) -> None:
    async with make_pool(farm, size=1) as pool:
        holder = render(pool, "gate:hold")
        await wait_until(lambda: pool.busy == 1)
        finished: list[int] = []

        async def queued(number: int) -> None:
            await pool.render("ok", OPTIONS)
            finished.append(number)

        waiting = [asyncio.create_task(queued(number)) for number in range(5)]
        await asyncio.sleep(0.01)
        farm.open("hold")
        await asyncio.gather(holder, *waiting)
        assert finished == [0, 1, 2, 3, 4]


# -- failures ----------------------------------------------------------------------------------


async def test_a_failed_worker_is_closed_and_replaced(farm: Farm, events: Events) -> None:
    async with make_pool(farm, events, size=2) as pool:
        with pytest.raises(pooling.WorkerCrashed) as caught:
            await pool.render("fail", OPTIONS)
        assert isinstance(caught.value, outcomes.TemporaryError)
        assert isinstance(caught.value.__cause__, RuntimeError)
        await wait_until(lambda: pool.live == 2 and sum(w.closed for w in farm.workers) == 1)
        assert len(farm.workers) == 3
        assert events.named("worker_replaced") == [("failed",)]
        assert await pool.render("ok", OPTIONS)


async def test_a_render_timeout_replaces_the_worker(farm: Farm, events: Events) -> None:
    async with make_pool(farm, events, size=1, render_timeout=0.05) as pool:
        with pytest.raises(pooling.RenderTimeout) as caught:
            await pool.render("hang", OPTIONS)
        assert isinstance(caught.value, outcomes.TemporaryError)  # with its own limit
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 2"
        assert farm.workers[0].closed
        assert events.named("worker_replaced") == [("render_timeout",)]
        assert events.named("render_finished")[0][1] is False


async def test_a_document_error_keeps_the_worker(farm: Farm, events: Events) -> None:
    async with make_pool(farm, events, size=1) as pool:
        with pytest.raises(pooling.DocumentError) as caught:
            await pool.render("bad-document", OPTIONS)
        assert isinstance(caught.value, outcomes.PermanentError)
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 1"
        assert not farm.workers[0].closed and events.named("worker_replaced") == []
        assert [args[1] for args in events.named("render_finished")] == [False, True]


async def test_a_failing_sink_raises_its_own_error_and_keeps_the_worker(
    farm: Farm, events: Events
) -> None:
    """A blob store refusing a streamed block is not the browser's fault: the caller gets the
    store's error (for its own retry decision) and the worker stays."""
    async with make_pool(farm, events, size=1) as pool:
        with pytest.raises(ValueError, match="refused a block"):
            await pool.render("sink-fails", OPTIONS)
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 1"
        assert not farm.workers[0].closed and events.named("worker_replaced") == []


async def test_a_dead_idle_worker_is_replaced_before_it_is_lent(farm: Farm, events: Events) -> None:
    async with make_pool(farm, events, size=1) as pool:
        farm.workers[0].alive = False  # its browser was killed while idle
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 2"
        assert events.named("worker_replaced") == [("dead",)]


async def test_a_failed_replacement_launch_is_retried_and_reported(
    farm: Farm, events: Events
) -> None:
    async with make_pool(farm, events, size=1) as pool:
        farm.failures_ahead = 2
        with pytest.raises(pooling.WorkerCrashed):
            await pool.render("fail", OPTIONS)
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 2"
        assert [args[0] for args in events.named("worker_launch_failed")] == [1, 2]
        assert pool.live == 1 and pool.launching == 0


async def test_start_up_fails_clearly_if_a_worker_cannot_launch(farm: Farm) -> None:
    farm.failures_ahead = 1
    pool = make_pool(farm, size=3)
    with pytest.raises(pooling.LaunchFailed, match="1 of 3 workers failed"):
        await pool.start()
    assert len(farm.workers) == 2 and all(worker.closed for worker in farm.workers)
    with pytest.raises(pooling.PoolClosed):
        await pool.render("ok", OPTIONS)


async def test_start_up_fails_if_a_launch_exceeds_the_launch_timeout(farm: Farm) -> None:
    farm.hang = True
    pool = make_pool(farm, size=1, launch_timeout=0.05)
    with pytest.raises(pooling.LaunchFailed) as caught:
        await pool.start()
    assert isinstance(caught.value.__cause__, TimeoutError)


async def test_closing_while_starting_closes_what_launched(farm: Farm) -> None:
    pool = make_pool(farm, size=2)
    starting = asyncio.create_task(pool.start())
    await asyncio.sleep(0)
    await pool.close()
    with pytest.raises(pooling.PoolClosed):
        await starting
    assert len(farm.workers) == 2 and all(worker.closed for worker in farm.workers)


# -- cancellation ------------------------------------------------------------------------------


async def test_a_borrower_cancelled_while_waiting_leaks_nothing(farm: Farm) -> None:
    async with make_pool(farm, size=1) as pool:
        holder = render(pool, "gate:hold")
        await wait_until(lambda: pool.busy == 1)
        waiting = render(pool, "ok")
        await asyncio.sleep(0.01)
        waiting.cancel()
        farm.open("hold")
        await holder
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (pool.idle, pool.busy) == (1, 0)
        assert await pool.render("ok", OPTIONS)


async def test_a_borrower_cancelled_just_after_being_handed_a_worker_passes_it_on(
    farm: Farm,
) -> None:
    async with make_pool(farm, size=1) as pool:
        holder = render(pool, "gate:hold")
        await wait_until(lambda: pool.busy == 1)
        waiting = render(pool, "ok")
        await asyncio.sleep(0.01)
        # Cancel the waiter in the same loop iteration in which the worker is handed to it.
        loop = asyncio.get_running_loop()
        farm.workers[0].on_return = lambda: loop.call_soon(waiting.cancel)
        farm.open("hold")
        await holder
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (pool.idle, pool.busy, pool.live) == (1, 0, 1)
        assert not farm.workers[0].closed
        farm.workers[0].on_return = None
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 1"


async def test_a_caller_cancelled_mid_render_gets_its_worker_replaced(farm: Farm) -> None:
    async with make_pool(farm, size=1) as pool:
        task = render(pool, "hang")
        await wait_until(lambda: pool.busy == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 2"
        assert farm.workers[0].closed


# -- recycling ---------------------------------------------------------------------------------


async def test_a_worker_is_recycled_after_k_jobs(farm: Farm, events: Events) -> None:
    async with make_pool(farm, events, size=1, recycle_after_jobs=3) as pool:
        for _ in range(3):
            assert await pool.render("ok", OPTIONS) == b"%PDF worker 1"
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 2"
        assert farm.workers[0].closed
        assert events.named("worker_recycled")[0] == ("jobs",)  # (worker 2 is due after it too)


async def test_a_worker_over_the_memory_cap_is_recycled_after_its_render(
    farm: Farm, events: Events
) -> None:
    async with make_pool(farm, events, size=1, recycle_rss_bytes=1000) as pool:
        farm.workers[0].rss = 2000
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 1"
        await wait_until(lambda: farm.workers[0].closed and pool.live == 1)
        assert events.named("worker_recycled") == [("memory",)]
        assert (2000,) in events.named("worker_memory")


async def test_a_busy_worker_over_the_cap_finishes_its_render_first(farm: Farm) -> None:
    async with make_pool(farm, size=1, recycle_rss_bytes=1000) as pool:
        task = render(pool, "gate:hold")
        await wait_until(lambda: pool.busy == 1)
        farm.workers[0].rss = 2000
        assert await pool.memory() == [2000]
        assert not farm.workers[0].closed
        farm.open("hold")
        assert await task == b"%PDF worker 1"
        await wait_until(lambda: len(farm.workers) == 2 and pool.idle == 1)
        assert farm.workers[0].closed


# -- resizing ----------------------------------------------------------------------------------


async def test_growing_launches_new_workers(farm: Farm) -> None:
    async with make_pool(farm, size=1) as pool:
        await pool.resize(3)
        assert pool.size == 3 and pool.free_capacity == 3
        await wait_until(lambda: pool.live == 3)
        tasks = [render(pool, "gate:go") for _ in range(3)]
        await wait_until(lambda: farm.running == 3)
        farm.open("go")
        await asyncio.gather(*tasks)


async def test_shrinking_retires_idle_workers_first_and_never_aborts_a_render(
    farm: Farm, events: Events
) -> None:
    async with make_pool(farm, events, size=3) as pool:
        busy = [render(pool, "gate:go") for _ in range(2)]
        await wait_until(lambda: pool.busy == 2)
        await pool.resize(1)
        assert (pool.live, pool.idle, pool.busy, pool.free_capacity) == (2, 0, 2, 0)
        assert sum(worker.closed for worker in farm.workers) == 1
        farm.open("go")
        assert all(pdf.startswith(b"%PDF") for pdf in await asyncio.gather(*busy))
        await wait_until(lambda: pool.live == 1)
        assert len(events.named("worker_retired")) == 2 and len(farm.workers) == 3


async def test_growing_back_keeps_a_busy_worker_that_was_leaving(farm: Farm) -> None:
    async with make_pool(farm, size=2) as pool:
        busy = [render(pool, "gate:go") for _ in range(2)]
        await wait_until(lambda: pool.busy == 2)
        await pool.resize(1)
        await pool.resize(2)
        farm.open("go")
        await asyncio.gather(*busy)
        assert pool.live == 2 and len(farm.workers) == 2
        assert not any(worker.closed for worker in farm.workers)


async def test_shrinking_to_zero_and_back(farm: Farm) -> None:
    async with make_pool(farm, size=2) as pool:
        await pool.resize(0)
        assert pool.live == 0 and pool.free_capacity == 0
        await pool.resize(1)
        assert await pool.render("ok", OPTIONS) == b"%PDF worker 3"


# -- capacity and shutdown ---------------------------------------------------------------------


async def test_wait_for_capacity_returns_when_a_worker_frees_up(farm: Farm) -> None:
    async with make_pool(farm, size=1) as pool:
        assert await pool.wait_for_capacity() == 1
        holder = render(pool, "gate:hold")
        await wait_until(lambda: pool.busy == 1)
        waiter = asyncio.create_task(pool.wait_for_capacity())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        farm.open("hold")
        assert await waiter == 1
        await holder


async def test_close_closes_every_worker_and_later_use_fails(farm: Farm) -> None:
    pool = make_pool(farm, size=2)
    await pool.start()
    holder = render(pool, "hang")
    await wait_until(lambda: pool.busy == 1)
    capacity = asyncio.create_task(pool.wait_for_capacity())
    await pool.resize(1)  # leaves the busy worker marked, nothing idle
    queued = render(pool, "ok")
    await asyncio.sleep(0.01)
    await pool.close()
    assert all(worker.closed for worker in farm.workers)
    for task in (holder, queued, capacity):
        with pytest.raises(pooling.PoolClosed):
            await task
    with pytest.raises(pooling.PoolClosed):
        await pool.render("ok", OPTIONS)
    with pytest.raises(pooling.PoolClosed):
        await pool.resize(3)


async def test_close_with_grace_lets_running_renders_finish(farm: Farm) -> None:
    pool = make_pool(farm, size=1)
    await pool.start()
    running = render(pool, "gate:go")
    await wait_until(lambda: pool.busy == 1)
    closing = asyncio.create_task(pool.close(grace=5.0))
    await asyncio.sleep(0.01)
    assert not farm.workers[0].closed
    farm.open("go")
    await closing
    assert await running == b"%PDF worker 1" and farm.workers[0].closed


async def test_a_failing_event_hook_does_not_break_the_pool(farm: Farm) -> None:
    class Broken:
        def borrow_waited(self, seconds: float) -> None:
            raise ValueError("metrics are down")

    async with make_pool(farm, Broken(), size=1) as pool:  # type: ignore[arg-type]
        assert await pool.render("ok", OPTIONS)


# -- pages per worker --------------------------------------------------------------------------


def worker_number(pdf: bytes) -> int:
    return int(pdf.decode().rsplit(" ", 1)[1])


async def test_a_worker_takes_as_many_renders_as_it_has_pages(farm: Farm) -> None:
    async with make_pool(farm, size=2, pages_per_worker=2) as pool:
        assert pool.lanes == pool.free_capacity == 4
        running = [render(pool, "gate:a") for _ in range(4)]
        await wait_until(lambda: farm.running == 4)
        assert (pool.busy, pool.renders, pool.free_capacity) == (2, 4, 0)
        fifth = render(pool, "ok")
        await asyncio.sleep(0.02)
        assert not fifth.done(), "a fifth render found a page where there is none"
        farm.open("a")
        pdfs = await asyncio.gather(*running, fifth)
    assert sorted(worker_number(pdf) for pdf in pdfs[:4]) == [1, 1, 2, 2]
    assert len(farm.workers) == 2 and farm.peak == 4


async def test_renders_go_to_an_idle_worker_before_sharing_one(farm: Farm) -> None:
    async with make_pool(farm, size=2, pages_per_worker=2) as pool:
        first, second = render(pool, "gate:a"), render(pool, "gate:a")
        await wait_until(lambda: farm.running == 2)
        assert pool.busy == 2, "both renders went to one browser while another idled"
        farm.open("a")
        assert {worker_number(await first), worker_number(await second)} == {1, 2}


async def test_a_failure_replaces_the_worker_at_once_and_its_other_render_finishes(
    farm: Farm, events: Events
) -> None:
    async with make_pool(farm, events, size=1, pages_per_worker=2) as pool:
        survivor = render(pool, "gate:a")
        await wait_until(lambda: farm.running == 1)
        with pytest.raises(pooling.WorkerCrashed):
            await pool.render("fail", OPTIONS)
        await wait_until(lambda: len(farm.workers) == 2)  # replaced now, not after the survivor
        first = farm.workers[0]
        assert not first.closed, "closing the failed browser aborted its other render"
        assert worker_number(await pool.render("ok", OPTIONS)) == 2  # the failed one lends no more
        farm.open("a")
        assert worker_number(await survivor) == 1
        await wait_until(lambda: first.closed)
        assert events.named("worker_replaced") == [("failed",)]
        assert pool.live == 1 and pool.busy == 0


async def test_a_crashed_worker_with_every_page_busy_is_replaced_once_and_loses_no_job(
    farm: Farm, events: Events
) -> None:
    async with make_pool(farm, events, size=1, pages_per_worker=3) as pool:
        running = [render(pool, "hang") for _ in range(3)]
        await wait_until(lambda: farm.running == 3)
        crashed = farm.workers[0]
        crashed.alive = False
        crashed.stopped.set()  # the browser died: every page's render fails
        errors = await asyncio.gather(*running, return_exceptions=True)
        assert all(isinstance(error, pooling.WorkerCrashed) for error in errors), errors
        # each failed job is a temporary error: the queue delivers it again
        assert all(isinstance(error, outcomes.TemporaryError) for error in errors)
        assert events.named("worker_replaced") == [("failed",)]
        retried = await asyncio.gather(*(pool.render("ok", OPTIONS) for _ in range(3)))
        assert {worker_number(pdf) for pdf in retried} == {2}
        assert len(farm.workers) == 2 and crashed.closed


async def test_a_worker_recycled_after_k_jobs_closes_when_its_last_page_is_back(
    farm: Farm, events: Events
) -> None:
    async with make_pool(farm, events, size=1, pages_per_worker=2, recycle_after_jobs=1) as pool:
        long = render(pool, "gate:a")
        await wait_until(lambda: farm.running == 1)
        assert worker_number(await pool.render("ok", OPTIONS)) == 1  # its first job: now due
        waiting = render(pool, "ok")
        await asyncio.sleep(0.02)
        assert not waiting.done(), "a browser due for recycling took another job"
        assert not farm.workers[0].closed, "recycling aborted a render"
        farm.open("a")
        assert worker_number(await long) == 1
        assert worker_number(await waiting) == 2
        assert farm.workers[0].closed
        assert events.named("worker_recycled")[0] == ("jobs",)  # (worker 2 is due after it too)


async def test_open_lanes_count_the_launched_workers_not_the_target(farm: Farm) -> None:
    async with make_pool(farm, size=1, pages_per_worker=2) as pool:
        farm.hang = True  # the next launches do not finish
        await pool.resize(3)
        assert (pool.lanes, pool.open_lanes, pool.launching) == (6, 2, 2)
        running = [render(pool, "gate:a") for _ in range(2)]
        await wait_until(lambda: farm.running == 2)
        assert pool.open_lanes == 2  # busy pages still count: they are up
        farm.open("a")
        await asyncio.gather(*running)
        await pool.resize(0)
        assert pool.open_lanes == 0


async def test_a_worker_that_comes_up_is_a_change_the_queue_worker_hears(farm: Farm) -> None:
    """The queue worker waits on ``changed()`` for room: a launch must resolve it (else a
    starting pod's browsers take jobs only at the worker's next look)."""
    async with make_pool(farm, size=1, pages_per_worker=2) as pool:
        changed = pool.changed()
        await asyncio.sleep(0.05)
        assert not changed.done()  # nothing happened
        await pool.resize(2)  # a resize is a change
        assert changed.done()
        changed = pool.changed()
        assert pool.open_lanes == 2 and not changed.done()  # the second is still launching
        await wait_until(lambda: pool.open_lanes == 4)  # the second browser is up
        assert changed.done()


async def test_resizing_counts_workers_and_capacity_follows_in_pages(farm: Farm) -> None:
    async with make_pool(farm, size=1, pages_per_worker=2) as pool:
        await pool.resize(3)
        await wait_until(lambda: pool.live == 3)
        assert (pool.size, pool.lanes, pool.free_capacity) == (3, 6, 6)
        running = [render(pool, "gate:a") for _ in range(2)]
        await wait_until(lambda: farm.running == 2)
        assert pool.busy == 2  # spread over two browsers
        await pool.resize(1)  # the idle one closes; one busy one leaves when its render is back
        assert pool.live == 2 and pool.free_capacity == 0
        farm.open("a")
        await asyncio.gather(*running)  # no render aborted
        await wait_until(lambda: pool.live == 1)
        assert len([worker for worker in farm.workers if not worker.closed]) == 1
        assert pool.free_capacity == 2


async def test_pages_per_worker_below_one_is_refused(farm: Farm) -> None:
    with pytest.raises(ValueError, match="pages per worker"):
        make_pool(farm, pages_per_worker=0)
