"""A pool of PDF workers: borrow one, render, give it back; replace what breaks.

The pool knows nothing about browsers. A worker is anything that turns HTML into PDF bytes
(:class:`Worker`), made by an async factory; ``browser.py`` provides the Chromium one and the unit
tests use fakes. A PDF too big to hold goes, while the worker is still lent, to the caller's
:class:`Sink` (for a job: its blob's blocks); the render timeout covers that too.

How a worker lives::

    launching ──> idle <──> busy ──> closed
                   (retired by a shrink, recycled after K jobs or above the memory cap,
                    replaced after a failure, a render timeout, or when found dead)

- :meth:`BrowserPool.start` launches every worker; start-up fails if one cannot launch.
- A failed or timed-out render closes its worker; a replacement launches in the background and,
  if launching fails, is retried with backoff for as long as the pool is short (each failure is
  logged and reported through :class:`PoolEvents`). The caller still gets the error.
- Recycling and shrinking never abort a render: a busy worker that must go is marked and closed
  when it comes back.
- A worker may take ``pages_per_worker`` renders at once (for Chromium: warm pages of one
  browser). The pool size counts workers; a borrower gets an idle worker first (renders spread
  over browsers), else the least busy one with a free page. A failure replaces the whole worker
  (everything that depended on it) at once; its other renders finish or fail on their own (a
  dead browser fails them, and the job is retried: nothing is lost) and the worker closes when
  the last one returns.
- Borrowers wait in FIFO order and a worker is handed directly to the first one; a borrower that
  leaves (timeout, cancellation) after being handed a worker passes it on: nothing leaks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, overload

from reportfarm import backoff, contract, outcomes

log = logging.getLogger(__name__)

_BACKOFF_FIRST = 0.5
_BACKOFF_MAX = 30.0
_CLOSE_TIMEOUT = 30.0
_MEMORY_TIMEOUT = 10.0


class Sink(Protocol):
    """Where a PDF too big to hold goes, chunk by chunk, while its worker is still lent out."""

    async def write(self, chunk: bytes) -> None:
        """Take the next chunk; raising stops the print (the worker stays healthy)."""
        ...


class Worker(Protocol):
    """One renderer (for Chromium: one browser). The pool lends it to one caller at a time."""

    jobs_done: int
    """Renders completed successfully; the pool recycles the worker after ``recycle_after_jobs``."""

    @property
    def alive(self) -> bool:
        """False once the worker knows it is broken (its browser died): the pool replaces it."""
        ...

    async def render(
        self, html: str, options: contract.PdfOptions, *, javascript: bool, sink: Sink | None
    ) -> bytes | None:
        """The PDF whole, or None when it was too big to hold and went to ``sink`` (given)."""
        ...

    async def rss_bytes(self) -> int:
        """Memory used by the worker's processes, in bytes."""
        ...

    async def close(self) -> None: ...


WorkerFactory = Callable[[], Awaitable[Worker]]


class PoolError(Exception):
    """Base of the pool's errors. Each job-level one is also an :mod:`reportfarm.outcomes` type:
    :class:`~reportfarm.outcomes.TemporaryError` if trying the same job again may succeed,
    :class:`~reportfarm.outcomes.PermanentError` if not."""


class BorrowTimeout(PoolError, outcomes.TemporaryError):
    """No worker came free within ``borrow_timeout``: the pool is saturated. Temporary."""


class RenderTimeout(PoolError, outcomes.TemporaryError):
    """The page work exceeded ``render_timeout``; the worker was replaced.

    Temporary, but suspect: the usual cause is the document itself (an endless script, a page
    count in the thousands), so the job runner retries it only up to its own, lower limit
    (``max_render_timeouts`` deliveries) before poisoning it.
    """


class WorkerCrashed(PoolError, outcomes.TemporaryError):
    """The worker failed during the render (browser crashed or was killed); it was replaced.

    Temporary: a retry runs on a fresh worker. The worker's own error is the ``__cause__``.
    """


class DocumentError(PoolError, outcomes.PermanentError):
    """The document itself cannot be rendered: it navigates away while loading, a header
    template references an external resource, Chromium fails to print it while the browser is
    fine. Raised by a worker where the failure is known; the worker stays healthy and goes back
    to the pool (no replacement: only a worker that is gone counts as a crash). Permanent.
    """

    default_kind = "documenterror"

    @property
    def description(self) -> str:
        return f"DocumentError: {self}"


class OutputFailed(Exception):
    """The caller's :class:`Sink` raised ``error`` during a render: neither the worker's fault
    nor the document's. The worker goes back to the pool and the pool raises ``error`` itself."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"the PDF's sink failed: {error!r}")
        self.error = error


class PoolClosed(PoolError, outcomes.TemporaryError):
    """The pool is shut down. Temporary for the job: another renderer can take it."""


class LaunchFailed(PoolError):
    """:meth:`BrowserPool.start` could not launch every worker (not a job's failure: the service
    cannot start; fix the setup)."""


class PoolEvents(Protocol):
    """Hooks for metrics, called synchronously (keep them cheap); a failing hook is only logged.

    Optional hooks, called when the object has them: ``worker_launched(seconds)``,
    ``worker_launch_failed(attempt, error)``, ``worker_retired()`` (a shrink),
    ``worker_memory(rss_bytes)``. Reasons, fit for metric labels: replaced ``failed``,
    ``render_timeout``, ``cancelled``, ``dead``; recycled ``jobs``, ``memory``.
    """

    def borrow_waited(self, seconds: float) -> None: ...
    def render_finished(self, seconds: float, ok: bool) -> None: ...
    def worker_replaced(self, reason: str) -> None: ...
    def worker_recycled(self, reason: str) -> None: ...


@dataclasses.dataclass(eq=False)
class _Slot:
    """The pool's bookkeeping around one worker."""

    worker: Worker
    retire: str | None = None
    """``shrink``, ``jobs``, ``memory`` or ``failed`` (already replaced): close it instead of
    lending it again, once its renders are back."""
    active: int = 0
    """Renders running on it now (at most the pool's ``pages_per_worker``)."""
    closer: asyncio.Task[None] | None = None
    """Set once the worker is being closed."""
    measuring: bool = False
    rss: int | None = None
    measured_at: float = -math.inf


class BrowserPool:
    """N workers lent to one render at a time, launched at start-up, replaced when they break.

    Timeouts are in seconds. ``recycle_after_jobs`` and ``recycle_rss_bytes`` may be None (never).
    Memory is measured after a job, at most every ``memory_check_interval`` seconds per worker.
    ``pages_per_worker``: renders one worker takes at once (see the module docstring).
    """

    def __init__(
        self,
        factory: WorkerFactory,
        *,
        size: int,
        borrow_timeout: float,
        launch_timeout: float,
        render_timeout: float,
        recycle_after_jobs: int | None = 100,
        recycle_rss_bytes: int | None = 700 * 2**20,
        memory_check_interval: float = 10.0,
        pages_per_worker: int = 1,
        events: PoolEvents | None = None,
    ) -> None:
        if size < 0:
            raise ValueError(f"pool size {size} is negative")
        if pages_per_worker < 1:
            raise ValueError(f"pages per worker {pages_per_worker} is below 1")
        if min(borrow_timeout, launch_timeout, render_timeout) <= 0:
            raise ValueError("pool timeouts must be positive")
        self._factory = factory
        self._target = size
        self._pages = pages_per_worker
        self._borrow_timeout = borrow_timeout
        self._launch_timeout = launch_timeout
        self._render_timeout = render_timeout
        self._recycle_jobs = recycle_after_jobs or None
        self._rss_cap = recycle_rss_bytes or None
        self._memory_interval = memory_check_interval
        self._events = events
        self._idle: collections.deque[_Slot] = collections.deque()
        self._busy: set[_Slot] = set()
        self._launching = 0
        self._waiters: collections.deque[asyncio.Future[_Slot]] = collections.deque()
        self._capacity_waiters: set[asyncio.Future[None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._close_tasks: set[asyncio.Task[None]] = set()
        self._started = False
        self._ready = False
        self._closed = False

    @property
    def size(self) -> int:
        """The target number of workers."""
        return self._target

    @property
    def live(self) -> int:
        """Workers launched and not closed (idle or busy)."""
        return len(self._idle) + len(self._busy)

    @property
    def pages_per_worker(self) -> int:
        return self._pages

    @property
    def busy(self) -> int:
        """Workers with at least one render running (the operator's "busy browsers")."""
        return len(self._busy)

    @property
    def renders(self) -> int:
        """Renders running now (at most size x pages_per_worker, plus a failed worker's)."""
        return sum(slot.active for slot in self._busy)

    @property
    def lanes(self) -> int:
        """Renders the pool takes at once at its target size: size x pages_per_worker."""
        return self._target * self._pages

    @property
    def open_lanes(self) -> int:
        """Renders the pool can take at once now: the pages of the launched workers that count
        towards the target, at most :attr:`lanes`. Workers still launching (a start's, a grow's,
        a failed one's replacement) and workers leaving are not counted."""
        return min(self._target, self._serving()) * self._pages

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def launching(self) -> int:
        """Replacements and new workers being launched (or waiting to retry a failed launch)."""
        return self._launching

    @property
    def free_capacity(self) -> int:
        """How many more renders the pool could take now: lanes minus renders, at least 0."""
        return max(0, self.lanes - self.renders)

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> BrowserPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Launch every worker; raise :class:`LaunchFailed` (and close the rest) if one fails."""
        if self._started:
            raise RuntimeError("the pool was already started")
        self._started = True
        tasks = [asyncio.ensure_future(self._launch()) for _ in range(self._target)]
        try:
            if tasks:
                await asyncio.wait(tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._closed = True
            await self._close_all(
                [t.result() for t in tasks if not t.cancelled() and not t.exception()]
            )
            raise
        errors = [error for t in tasks if (error := t.exception()) is not None]
        workers = [t.result() for t in tasks if t.exception() is None]
        if self._closed:  # closed while starting
            await self._close_all(workers)
            raise PoolClosed("the pool was closed while starting")
        if errors:
            self._closed = True
            await self._close_all(workers)
            raise LaunchFailed(
                f"{len(errors)} of {self._target} workers failed to launch within "
                f"{self._launch_timeout}s: {errors[0]!r}"
            ) from errors[0]
        self._idle.extend(_Slot(worker) for worker in workers)
        self._ready = True
        log.info("pool started with %d workers", len(workers))

    @overload
    async def render(
        self, html: str, options: contract.PdfOptions, *, javascript: bool = False
    ) -> bytes: ...

    @overload
    async def render(
        self, html: str, options: contract.PdfOptions, *, javascript: bool = False, sink: Sink
    ) -> bytes | None: ...

    async def render(
        self,
        html: str,
        options: contract.PdfOptions,
        *,
        javascript: bool = False,
        sink: Sink | None = None,
    ) -> bytes | None:
        """Render on a borrowed worker. Raises a :class:`PoolError` subclass on failure, or what
        ``sink`` raised.

        With a ``sink``, a PDF too big to hold streams into it and None is returned; the render
        timeout then covers the sink's writes too (the worker is held until the last chunk)."""
        slot = await self._borrow()
        started = time.monotonic()
        failure: str | None = "cancelled"  # why the worker must go; None: it may stay
        ok = False
        try:
            async with asyncio.timeout(self._render_timeout):
                pdf = await slot.worker.render(html, options, javascript=javascript, sink=sink)
            failure, ok = None, True
            return pdf
        except DocumentError:
            failure = None
            raise
        except OutputFailed as failed:
            failure = None
            raise failed.error from failed.error.__cause__
        except TimeoutError:
            failure = "render_timeout"
            raise RenderTimeout(f"render exceeded {self._render_timeout}s") from None
        except Exception as error:
            failure = "failed"
            if self._closed:
                raise PoolClosed("the pool closed during the render") from error
            raise WorkerCrashed(f"worker failed: {error!r}") from error
        finally:
            elapsed = time.monotonic() - started
            self._emit("render_finished", elapsed, ok)
            self._returned(slot, failure)

    async def wait_for_capacity(self) -> int:
        """Wait until :attr:`free_capacity` is above zero and return it."""
        while True:
            self._ensure_usable()
            if self.free_capacity > 0:
                return self.free_capacity
            await self._change()

    async def resize(self, size: int) -> None:
        """Change the target size; returns once excess idle workers are closed.

        Growing launches new workers in the background (or keeps busy ones marked for retirement).
        Shrinking closes idle workers first (least recently used), then marks busy ones, which
        close when their render finishes: a render is never aborted.
        """
        if size < 0:
            raise ValueError(f"pool size {size} is negative")
        self._ensure_usable()
        old, self._target = self._target, size
        for slot in self._busy:
            if self._serving() >= size:
                break
            if slot.retire == "shrink":
                slot.retire = None
        excess = self._serving() - size
        closing: list[asyncio.Task[None]] = []
        while excess > 0 and self._idle:
            slot = self._idle[0]  # the least recently used
            slot.retire = "shrink"
            self._leave(slot)
            closing.extend(task for task in [slot.closer] if task is not None)
            excess -= 1
        for slot in sorted(self._busy, key=lambda s: s.retire is None):
            if excess <= 0:
                break
            if slot.retire not in ("shrink", "failed"):
                slot.retire = "shrink"
                excess -= 1
        log.info("pool resized from %d to %d workers", old, size)
        self._reconcile()
        self._notify_capacity()
        await asyncio.gather(*closing)

    async def memory(self) -> list[int]:
        """Measure every live worker now; bytes each. Those over the cap get recycled."""
        slots = [*self._idle, *self._busy]
        await asyncio.gather(*(self._measure(slot) for slot in slots if not slot.measuring))
        return [slot.rss for slot in slots if slot.rss is not None]

    async def close(self, *, grace: float = 0.0) -> None:
        """Close every worker. Busy ones get up to ``grace`` seconds to finish their render."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(PoolClosed("the pool is closed"))
        self._waiters.clear()
        self._notify_capacity()
        while self._idle:
            self._close_soon(self._idle.popleft())
        deadline = time.monotonic() + grace
        while self._busy and (remaining := deadline - time.monotonic()) > 0:
            await asyncio.wait([self._change()], timeout=remaining)
        for slot in list(self._busy):
            self._close_soon(slot)
        for task in self._tasks:
            task.cancel()
        while self._tasks or self._close_tasks:
            await asyncio.gather(*self._tasks, *self._close_tasks, return_exceptions=True)

    # -- lending ------------------------------------------------------------------------------

    def _ensure_usable(self) -> None:
        if self._closed:
            raise PoolClosed("the pool is closed")
        if not self._ready:
            raise RuntimeError("the pool has not finished starting")

    async def _borrow(self) -> _Slot:
        self._ensure_usable()
        if not self._waiters and (slot := self._take()) is not None:
            self._emit("borrow_waited", 0.0)
            return slot
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiter: asyncio.Future[_Slot] = loop.create_future()
        self._waiters.append(waiter)
        self._dispatch()
        timer = loop.call_later(self._borrow_timeout, self._expire, waiter)
        try:
            slot = await waiter
        except BaseException:
            self._abandon(waiter)
            raise
        finally:
            timer.cancel()
        waited = loop.time() - started
        self._emit("borrow_waited", waited)
        return slot

    def _take(self) -> _Slot | None:
        """A page to render on, now taken: the most recently used live idle worker (dead ones
        found on the way go), else the least busy worker with a free page."""
        while self._idle:
            slot = self._idle.pop()
            self._busy.add(slot)
            if slot.worker.alive:
                slot.active += 1
                return slot
            self._leave(slot, "dead")
        spare = [
            slot
            for slot in self._busy
            if slot.active < self._pages and slot.retire is None and slot.worker.alive
        ]
        if not spare:
            return None
        slot = min(spare, key=lambda candidate: candidate.active)
        slot.active += 1
        return slot

    def _expire(self, waiter: asyncio.Future[_Slot]) -> None:
        if not waiter.done():
            waiter.set_exception(
                BorrowTimeout(
                    f"no worker came free within {self._borrow_timeout}s "
                    f"({len(self._busy)} busy, target {self._target})"
                )
            )

    def _abandon(self, waiter: asyncio.Future[_Slot]) -> None:
        """A borrower leaves: pass on the worker it was handed, if any."""
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            slot = waiter.result()
            slot.active -= 1
            self._check_in(slot)
        else:
            waiter.cancel()

    def _check_in(self, slot: _Slot) -> None:
        """Make a worker's free page available: to the first waiter, or idle once it has no
        render left."""
        if slot.active == 0:
            self._busy.discard(slot)
            if self._closed:
                self._close_soon(slot)
            else:
                self._idle.append(slot)
        if not self._closed:
            self._dispatch()
        self._notify_capacity()

    def _dispatch(self) -> None:
        """Hand free pages to waiting borrowers, first come first served."""
        while self._waiters:
            if self._waiters[0].done():
                self._waiters.popleft()
                continue
            slot = self._take()
            if slot is None:
                return
            self._waiters.popleft().set_result(slot)

    # -- after a render -----------------------------------------------------------------------

    def _returned(self, slot: _Slot, failure: str | None) -> None:
        """A render is back: ``failure`` None if its worker may stay."""
        slot.active -= 1
        if failure is not None and slot.retire != "failed":
            if slot.active == 0:
                self._leave(slot, failure)
                return
            # Its other renders are still running: replace it now, close it when they are back.
            slot.retire = "failed"
            if not self._closed:
                self._report_replaced(failure)
                self._reconcile()
        if slot.retire == "failed":
            if slot.active == 0:
                self._leave(slot)
            self._notify_capacity()
            return
        self._give_back(slot)

    def _give_back(self, slot: _Slot) -> None:
        jobs = slot.worker.jobs_done
        if slot.retire is None and self._recycle_jobs and jobs >= self._recycle_jobs:
            slot.retire = "jobs"
        if slot.retire is not None and not self._closed:
            if slot.active == 0:
                self._leave(slot)
            else:
                self._notify_capacity()  # it takes no more renders; it goes when they are back
            return
        self._check_in(slot)
        if not self._closed:
            self._maybe_measure(slot)

    def _leave(self, slot: _Slot, failure: str | None = None) -> None:
        """Close a worker that is leaving: failed (replaced), recycled (replaced) or retired."""
        self._busy.discard(slot)
        with contextlib.suppress(ValueError):
            self._idle.remove(slot)
        self._close_soon(slot)
        self._notify_capacity()
        if self._closed:
            return
        if slot.retire == "shrink":
            log.info("worker retired (pool target %d)", self._target)
            self._emit("worker_retired")
        elif failure is not None:
            self._report_replaced(failure)
        elif slot.retire == "failed":
            log.info("a failed worker's last render is back: closed")
        else:
            log.info("worker recycled (%s)", slot.retire)
            self._emit("worker_recycled", slot.retire)
        self._reconcile()

    def _report_replaced(self, failure: str) -> None:
        log.warning("worker closed and replaced (%s)", failure)
        self._emit("worker_replaced", failure)

    def _maybe_measure(self, slot: _Slot) -> None:
        if slot.measuring or time.monotonic() - slot.measured_at < self._memory_interval:
            return
        slot.measuring = True
        self._spawn(self._measure(slot))

    async def _measure(self, slot: _Slot) -> None:
        try:
            rss = await asyncio.wait_for(slot.worker.rss_bytes(), _MEMORY_TIMEOUT)
        except Exception as error:
            log.warning("could not measure a worker's memory: %r", error)
            return
        finally:
            slot.measuring = False
            slot.measured_at = time.monotonic()
        self._emit("worker_memory", rss)
        slot.rss = rss
        if self._rss_cap is None or rss <= self._rss_cap or slot.retire or slot.closer:
            return
        log.info("worker uses %d MiB, over the %d MiB cap", rss >> 20, self._rss_cap >> 20)
        slot.retire = "memory"
        if slot in self._idle:
            self._leave(slot)

    # -- launching and closing ----------------------------------------------------------------

    def _serving(self) -> int:
        """Workers that count towards the target: live ones not leaving because of a shrink or
        a failure (a failed one is replaced at once, even while its other renders finish)."""
        leaving = sum(1 for slot in self._busy if slot.retire in ("shrink", "failed"))
        return len(self._idle) + len(self._busy) - leaving

    def _reconcile(self) -> None:
        """Launch workers in the background until the pool reaches its target size."""
        if self._closed:
            return
        for _ in range(self._target - self._serving() - self._launching):
            self._launching += 1
            self._spawn(self._replace())

    async def _launch(self) -> Worker:
        started = time.monotonic()
        async with asyncio.timeout(self._launch_timeout):
            worker = await self._factory()
        elapsed = time.monotonic() - started
        self._emit("worker_launched", elapsed)
        return worker

    async def _replace(self) -> None:
        """Launch one worker, retrying with backoff while the pool is still short of it."""
        attempt = 0
        pending = True
        try:
            while not self._closed and self._serving() < self._target:
                attempt += 1
                try:
                    worker = await self._launch()
                except Exception as error:
                    delay = backoff.compute_backoff(
                        attempt, factor=_BACKOFF_FIRST, max_backoff=_BACKOFF_MAX
                    )
                    short = self._target - self._serving()
                    log.log(
                        logging.ERROR if attempt >= 3 else logging.WARNING,
                        "could not launch a worker (attempt %d, pool short by %d): %r; "
                        "retrying in %.1fs",
                        *(attempt, short, error, delay),
                    )
                    self._emit("worker_launch_failed", attempt, error)
                    await asyncio.sleep(delay)
                    continue
                self._launching -= 1
                pending = False
                if self._closed or self._serving() >= self._target:
                    self._close_soon(_Slot(worker))
                else:
                    self._check_in(_Slot(worker))
                    log.info("worker launched (%d live, target %d)", self.live, self._target)
                return
        finally:
            if pending:
                self._launching -= 1

    def _close_soon(self, slot: _Slot) -> None:
        if slot.closer is None:
            slot.closer = self._spawn(_close_worker(slot.worker), closing=True)

    async def _close_all(self, workers: list[Worker]) -> None:
        await asyncio.gather(*(_close_worker(worker) for worker in workers))

    def _spawn(
        self, coroutine: Coroutine[Any, Any, None], *, closing: bool = False
    ) -> asyncio.Task[None]:
        tasks = self._close_tasks if closing else self._tasks
        task = asyncio.get_running_loop().create_task(coroutine)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(_log_failure)
        return task

    def changed(self) -> asyncio.Future[None]:
        """A future resolved at the pool's next change: a worker launched, checked in or gone, a
        resize (the queue worker waits on it for room; cancel it when done waiting)."""
        return self._change()

    def _change(self) -> asyncio.Future[None]:
        """A future resolved at the next change of busy workers or target size."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._capacity_waiters.add(waiter)
        waiter.add_done_callback(self._capacity_waiters.discard)
        return waiter

    def _notify_capacity(self) -> None:
        for waiter in list(self._capacity_waiters):
            if not waiter.done():
                waiter.set_result(None)

    def _emit(self, hook: str, *args: object) -> None:
        if (call := getattr(self._events, hook, None)) is not None:
            try:
                call(*args)
            except Exception:
                log.exception("the pool event hook %s failed", hook)


async def _close_worker(worker: Worker) -> None:
    try:
        await asyncio.wait_for(worker.close(), _CLOSE_TIMEOUT)
    except Exception:
        log.warning("closing a worker failed", exc_info=True)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("pool background task failed", exc_info=error)
