"""How many jobs the queue worker asks for: pure bookkeeping, with fake leases and pool."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from reportfarm_renderer import worker as working
from reportfarm_renderer.jobs import Lease
from reportfarm_renderer.metrics import RendererMetrics


@dataclasses.dataclass
class FakePool:
    size: int
    """Browsers."""
    pages: int = 1
    launched: int | None = None
    """Browsers up (default: all of them)."""

    @property
    def lanes(self) -> int:
        return self.size * self.pages

    @property
    def open_lanes(self) -> int:
        launched = self.size if self.launched is None else self.launched
        return min(self.size, launched) * self.pages


def make_worker(
    size: int, pages: int = 1, launched: int | None = None
) -> tuple[working.QueueWorker, list[Lease]]:
    worker = working.QueueWorker(
        runner=cast(Any, None),
        lanes=[cast(Any, None)],
        pool=cast(Any, FakePool(size, pages, launched)),
        metrics=RendererMetrics(),
        visibility_timeout=30,
    )
    return worker, []


def receive(worker: working.QueueWorker, leases: list[Lease], count: int) -> None:
    for _ in range(count):
        lease = Lease(delivery=cast(Any, None), queue=cast(Any, None))
        lease.on_printed = worker._room.set
        worker.leases[cast(Any, object())] = lease
        leases.append(lease)


def test_a_browser_and_one_job_ahead_then_no_more_until_a_job_is_printed() -> None:
    worker, leases = make_worker(2)
    assert worker.capacity() == 3  # two browsers and one job taken ahead
    receive(worker, leases, 3)
    assert worker.capacity() == 0
    leases[0].mark_printed()  # it stores its PDF now: its browser prints the job ahead
    assert worker.capacity() == 1  # the next job is taken while the first one stores
    assert worker._room.is_set()  # and the worker is woken for it


def test_jobs_storing_their_pdfs_are_bounded_too() -> None:
    worker, leases = make_worker(2)
    receive(worker, leases, 3)
    for lease in leases:
        lease.mark_printed()
    # 3 storing: room for 3 needing a browser, but at most 2 x (1 + 1) + 1 leases in all.
    assert worker.capacity() == 2
    receive(worker, leases, 2)
    assert worker.capacity() == 0  # storage slowed down: the worker does not hoard messages
    for lease in leases[3:]:
        lease.mark_printed()
    assert worker.capacity() == 0  # still 5 leases held, all storing


def test_an_empty_pool_takes_nothing_and_marking_twice_counts_once() -> None:
    worker, leases = make_worker(0)
    assert worker.capacity() == 0
    worker, leases = make_worker(1)
    receive(worker, leases, 2)
    leases[0].mark_printed()
    leases[0].mark_printed()
    assert worker.capacity() == 1


def test_pages_per_browser_count_as_lanes() -> None:
    worker, leases = make_worker(2, pages=2)
    assert worker.capacity() == 5  # 2 browsers x 2 pages, and one job ahead
    receive(worker, leases, 5)
    leases[0].mark_printed()
    assert worker.capacity() == 1


def test_the_batch_is_capped_at_azure_s_limit() -> None:
    worker, _ = make_worker(100)
    assert worker.capacity() == 32


def test_browsers_still_launching_get_no_jobs_until_they_are_up() -> None:
    # A pod Ready with its first of 4 browsers (2 pages each): jobs for that browser and one
    # ahead, not for the 3 launching (on a starved node a launch can outlast the borrow timeout,
    # and a job waiting for it went back to the queue with an attempt counted).
    worker, leases = make_worker(4, pages=2, launched=1)
    assert worker.capacity() == 3
    receive(worker, leases, 3)
    assert worker.capacity() == 0
    cast(FakePool, worker.pool).launched = 3  # two more are up
    assert worker.capacity() == 4
    # Its one browser failed and a replacement launches:
    worker, _ = make_worker(1, pages=2, launched=0)
    assert worker.capacity() == 0  # not even a job ahead: nothing is up to print it
