"""The queue worker: receive as many jobs as the pool has room for, keep them leased, drain.

- Receives in batches sized to the pool's free capacity (its launched browsers' pages) plus one
  job taken ahead (at most 32, Azure's limit). A receive that gave fewer than it asked for found
  the lanes drained: the next waits the first idle pause (or a wake), as after an empty one,
  instead of asking again at once.
- Lanes: the interactive lane is asked first; bulk gets what is left, limited to a weighted
  share while interactive traffic is live (``lanes.LaneShare``), so it never starves.
- A lease keeper extends every running job's visibility at a third of the visibility timeout,
  so a render longer than the timeout is never delivered twice; it goes on through a drain until
  every job is settled (it once stopped with the receiving, and a job that ran on through the
  grace period came back to another pod).
- Storage outages: each failed receive backs off (with jitter) and the loop goes on.
- ``wake()`` (``POST /wake``, the gateway's hint that a job a client waits for is on the lane)
  ends an idle pause at once, at most once per :data:`WAKE_GAP_S`; it never ends a failure's
  backoff, and a lost one costs the idle pause it would have cut.
- ``take()`` (``POST /handoff``, a job the gateway handed over: its message sent invisible, with
  the pop receipt the put answered): run it now as if received, if there is room for it and the
  worker is not draining; a receive skipped (a storage round trip of the job's wait). Its lease
  is first extended within a third of what is left of its hold, counted from the message's
  insertion (storage's clock): an offer taken late (this loop lagging, the gateway no longer
  waiting) with less than :data:`HANDOFF_MIN_LEFT_S` left is refused, and its hold ends and it
  is received, rather than run here while another renderer receives it too.
- ``drain()``: stop receiving, let running jobs finish within the grace period, then make what is
  left visible again at once (visibility 0) so another pod takes it. Jobs a receive still in
  flight brings back are run too, within the same grace period: handing them back made each a
  second delivery on another pod (attempts 2) though nothing of it had run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from reportfarm import backoff, contract
from reportfarm.storage import errors as storage_errors
from reportfarm.storage.queueing import MAX_BATCH, Delivery, JobQueue
from reportfarm_renderer import lanes as lanes_module
from reportfarm_renderer import pool as pooling
from reportfarm_renderer import starting
from reportfarm_renderer.jobs import JobRunner, Lease
from reportfarm_renderer.metrics import RendererMetrics

logger = logging.getLogger(__name__)

TAKE_AHEAD = 1
"""Jobs received beyond the pool's size; each waits for a browser with its lease kept alive."""
STORING_PER_BROWSER = 1
"""Jobs storing their PDFs (upload, record, delete: no browser needed) a worker holds at most,
per browser, on top of the jobs that need one; a storage that slows down cannot make the
worker hoard messages."""


HANDOFF_MIN_LEFT_S = 3.0
"""A hand-off with less of its hold left than this when it is taken is refused: its lease's first
extension is due at a third of what is left and the lease keeper looks once a second, so with
less the hold could end before the extension, and another renderer receive and run the job too.
A gateway whose hold is under 4 s hands off few jobs or none (storage keeps the insertion time
in whole seconds; a refused offer's message is revealed at once: wakes only)."""
Taken = Literal["taken", "busy", "late"]
"""What became of a hand-off (:meth:`QueueWorker.take`)."""


def hold_left_s(held_s: int, inserted_on: datetime | None, now: datetime) -> float:
    """How long a message sent invisible for ``held_s`` seconds at ``inserted_on`` (storage's
    clock, which keeps whole seconds: never later than the send) stays invisible at ``now``
    (this pod's clock); the whole hold when its insertion is unknown, or when this clock is
    behind storage's (then as before this check: the offer is fresh)."""
    if inserted_on is None:
        return float(held_s)
    if inserted_on.tzinfo is None:
        inserted_on = inserted_on.replace(tzinfo=UTC)
    return held_s - max(0.0, (now - inserted_on).total_seconds())


ROOM_LOOK_S = 0.5
"""A worker without room looks again at least this often (it is also woken by a job ending and
by any change of the pool: a browser launched takes jobs at once)."""
WAKE_GAP_S = 0.02
"""A wake starts a receive at least this long after the last one began: a flood of wakes costs at
most 50 receives a second."""


class QueueWorker:
    def __init__(
        self,
        *,
        runner: JobRunner,
        lanes: list[JobQueue],
        pool: pooling.BrowserPool,
        metrics: RendererMetrics,
        visibility_timeout: int,
        poll_max_s: float = 1.0,
        interactive_weight: int = 3,
        timeline: starting.Timeline | None = None,
    ) -> None:
        self.runner = runner
        self.lanes = lanes
        """Queues in priority order: the interactive lane first, then bulk (the farm's queue)."""
        self.share = lanes_module.LaneShare(weight=interactive_weight, recheck_s=poll_max_s)
        self.pool = pool
        self.metrics = metrics
        self.visibility_timeout = visibility_timeout
        self.leases: dict[asyncio.Task[object], Lease] = {}
        self.queue_ready = False
        """False until a receive succeeds, and again after a failed one: /readyz reports it."""
        self.last_error: str | None = None
        self._stopping = asyncio.Event()
        self._drained = False
        """Set when drain() stops waiting: after that, what a receive brings is handed back."""
        self._keeper: asyncio.Task[None] | None = None
        """Extends the running jobs' leases from run()'s start until drain() has settled them."""
        self._not_receiving = asyncio.Event()
        self._not_receiving.set()
        self._room = asyncio.Event()
        self._pacing = backoff.Pacing(poll_max_s=poll_max_s)
        self._woken = asyncio.Event()
        self._received_at = 0.0
        self.wakes = 0
        """Wakes that ended an idle pause (a receive began sooner than its pacing said)."""
        self.handoffs = 0
        """Jobs handed over (``take``) and run without a receive."""
        self.handoffs_late = 0
        """Hand-offs refused for too little hold left (taken late, or this clock ahead)."""
        self.metrics.oldest_job.set_function(self.oldest_job_s)
        self.timeline = timeline or starting.Timeline.from_now()
        """The start's phases: ready (the first receive answered), first_receive, first_stored."""

    @property
    def running(self) -> int:
        return len(self.leases)

    def oldest_job_s(self) -> float:
        """Seconds the longest-running unsettled job has run (0: none): read at each scrape."""
        now = time.monotonic()
        return max((now - lease.received_at for lease in list(self.leases.values())), default=0.0)

    def capacity(self) -> int:
        """Jobs to ask for now: room in the pool, plus one taken ahead, less the jobs received
        that still need a browser. A job storing its PDF does not count: its browser already
        prints the next one, and the job after that should be here, rendered, when a browser
        comes free (before: a browser idled while the job ahead of it uploaded, recorded and
        deleted its message, then while the next was received). Jobs storing are bounded too
        (:data:`STORING_PER_BROWSER`).

        Room is counted in the browsers launched, not in the pool's target: a starting pod (Ready
        with its first browser), a grown pool or a failed browser's replacement takes jobs for
        a browser once it is up. Before, a pod took jobs for browsers still launching; on a
        starved node a launch can outlast the borrow timeout, and each such job went back to
        the queue with an attempt counted."""
        size = self.pool.open_lanes  # launched browsers x pages: the jobs printing at once
        ahead = TAKE_AHEAD if size else 0
        waiting = sum(1 for lease in self.leases.values() if not lease.printed)
        room = size + ahead - waiting
        room = min(room, size * (1 + STORING_PER_BROWSER) + ahead - self.running)
        return max(0, min(MAX_BATCH, room))

    async def run(self) -> None:
        # The leases are kept until the drain has settled every job, not until this loop ends:
        # a job that runs on through the grace period must not come back to another pod.
        self._keeper = asyncio.create_task(self._keep_leases(), name="lease-keeper")
        pause = 0.0  # the first receive goes at once
        try:
            while not self._stopping.is_set():
                if pause:
                    await self._sleep(pause)
                    if self._stopping.is_set():
                        break
                wanted = self.capacity()
                if wanted == 0:
                    self._room.clear()
                    await self._wait_for_room()
                    continue
                self._not_receiving.clear()
                self._woken.clear()  # a wake from now on may be for a job this receive misses
                self._received_at = time.monotonic()
                try:
                    received = await self._receive(wanted)
                finally:
                    self._not_receiving.set()
                pause = self._pacing.pause_s()
                if received is None:  # storage error: back off and go on
                    continue
                if self._stopping.is_set():  # drain began during this receive
                    for lease in received:
                        if self._drained:  # too late to run: hand it back
                            await self._release(lease)
                        else:  # drain() waits for it with the running ones
                            self._start(lease)
                    break
                for lease in received:
                    self._start(lease)
        except BaseException:  # cancelled or failed: no drain will stop the keeper
            await self._stop_keeper()
            raise

    async def _stop_keeper(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper

    def _plan(self, wanted: int) -> Iterator[tuple[JobQueue, int]]:
        """(queue, how many to ask for), in order; sizes are decided as the receives go."""
        if len(self.lanes) == 1:
            yield self.lanes[0], wanted
            return
        interactive, bulk = self.lanes
        yield bulk, self.share.bulk_first(wanted)
        yield interactive, wanted
        yield bulk, self.share.bulk_after(wanted)

    async def _receive(self, wanted: int) -> list[Lease] | None:
        leases: list[Lease] = []
        queue = self.lanes[0]
        try:
            for queue, room in self._plan(wanted):
                room = min(room, wanted - len(leases))
                if room <= 0:
                    continue
                deliveries = await queue.receive(
                    max_messages=room, visibility_timeout=self.visibility_timeout
                )
                leases += [Lease(delivery, queue) for delivery in deliveries]
                self._count_started(queue, len(deliveries))
        except Exception as error:
            for lease in leases:  # what the first lane gave is ours now: run it
                self._start(lease)
            if not storage_errors.is_transient(error):
                logger.exception("receiving from queue %s failed", queue.name)
            failures = self._pacing.failed()
            self.queue_ready = False
            self.last_error = f"{type(error).__name__}: {error}"[:300]
            self.metrics.storage_errors.labels(operation="receive").inc()
            logger.warning(
                "queue %s unreachable (%d in a row): %s",
                queue.name,
                failures,
                self.last_error,
            )
            return None
        if ended := self._pacing.received(len(leases), asked=wanted):
            logger.info("queues reachable again after %d failures", ended)
        self.queue_ready, self.last_error = True, None
        self.timeline.mark("ready")
        if leases:
            self.timeline.mark("first_receive")
        return leases

    def _start(self, lease: Lease) -> None:
        lease.on_printed = self._room.set
        task: asyncio.Task[object] = asyncio.create_task(self._run_job(lease))
        self.leases[task] = lease
        self.metrics.in_flight.set(len(self.leases))
        task.add_done_callback(self._job_done)

    async def _run_job(self, lease: Lease) -> object:
        try:
            outcome = await self.runner.run(lease)
            if outcome == "succeeded":
                self.timeline.mark("first_stored")
            return outcome
        except asyncio.CancelledError:
            raise
        except Exception:
            # The runner handles job failures; this is a failure to record one (storage away).
            # The message stays leased until its visibility ends, then comes back: nothing lost.
            logger.exception("job of message %s could not be settled", lease.delivery.message_id)
            lease.done = True
            return "unsettled"

    def _job_done(self, task: asyncio.Task[object]) -> None:
        self.leases.pop(task, None)
        self.metrics.in_flight.set(len(self.leases))
        self._room.set()

    async def _wait_for_room(self) -> None:
        """Until a job ends, the pool changes (a browser launched: its pages take jobs at once,
        not at the next look), the worker stops, or :data:`ROOM_LOOK_S` passes (a look now and
        then all the same)."""
        stop = asyncio.ensure_future(self._stopping.wait())
        room = asyncio.ensure_future(self._room.wait())
        pool_changed = self.pool.changed()
        waits: set[asyncio.Future[Any]] = {stop, room, pool_changed}
        await asyncio.wait(waits, timeout=ROOM_LOOK_S, return_when=asyncio.FIRST_COMPLETED)
        for future in waits:
            future.cancel()

    def wake(self) -> bool:
        """A job may be waiting: end an idle pause now (see the module's docstring). Whether
        the worker was idle (pausing between empty receives) when the wake came."""
        self._woken.set()
        return self._pacing.idle_s > 0 and not self._stopping.is_set()

    def take(self, queue_name: str, delivery: Delivery, *, held_s: int) -> Taken:
        """Run a handed-over message's job now, as if received, when the pool has room for one
        and the worker is not draining (else ``busy``) and enough of its hold is left (else
        ``late``, see :data:`HANDOFF_MIN_LEFT_S`). ``held_s``: how long the message was sent
        invisible for; its lease is first extended within a third of what is left of it."""
        queue = next((lane for lane in self.lanes if lane.name == queue_name), None)
        if queue is None or self._stopping.is_set() or self.capacity() == 0:
            return "busy"
        left_s = hold_left_s(held_s, delivery.inserted_on, datetime.now(UTC))
        if left_s < HANDOFF_MIN_LEFT_S:
            self.handoffs_late += 1
            return "late"
        lease = Lease(delivery, queue)
        lease.extended_at -= max(0.0, self._lease_period_s() - left_s / 3)
        self._count_started(queue, 1)
        self.handoffs += 1
        self.timeline.mark("first_receive")
        self._start(lease)
        return "taken"

    async def _sleep(self, seconds: float) -> None:
        waits = [asyncio.ensure_future(self._stopping.wait())]
        if not self._pacing.failures:  # a storage outage's backoff is kept
            waits.append(asyncio.ensure_future(self._woken.wait()))
        done, _ = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        for future in waits:
            future.cancel()
        if done and not self._stopping.is_set():
            self.wakes += 1
            gap = WAKE_GAP_S - (time.monotonic() - self._received_at)
            if gap > 0:
                await asyncio.sleep(gap)

    def _count_started(self, queue: JobQueue, jobs: int) -> None:
        """Jobs begun from ``queue``, for the lanes' share (one lane: nothing to share)."""
        if len(self.lanes) > 1:
            if queue is self.lanes[0]:
                self.share.interactive_started(jobs)
            else:
                self.share.bulk_started(jobs)

    def _lease_period_s(self) -> float:
        """How often a lease is extended: a third of the visibility, so two extensions may fail
        before the message comes back."""
        return max(1.0, self.visibility_timeout / 3)

    async def _keep_leases(self) -> None:
        every = self._lease_period_s()
        while True:
            await asyncio.sleep(min(every, 1.0))
            now = time.monotonic()
            due = [
                lease
                for lease in self.leases.values()
                if not lease.done and now - lease.extended_at >= every
            ]
            # Together: one slow call (storage in trouble) must not hold up the other leases.
            await asyncio.gather(*(self._extend(lease) for lease in due))

    async def _extend(self, lease: Lease) -> None:
        async with lease.lock:
            if lease.done:
                return
            try:
                age = time.monotonic() - lease.extended_at
                await lease.queue.extend(lease.delivery, visibility_timeout=self.visibility_timeout)
                lease.extended_at = time.monotonic()
                self.metrics.lease_age.observe(age)
            except Exception as error:
                self.metrics.storage_errors.labels(operation="extend").inc()
                logger.warning("could not extend message %s: %s", lease.delivery.message_id, error)

    async def drain(self, *, timeout: float) -> int:
        """Stop receiving; wait up to ``timeout`` for running jobs; release the rest at once.

        Returns the number of jobs released unfinished."""
        self._stopping.set()
        self.metrics.draining.set(1)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        logger.info("draining: %d job(s) running, grace %.0f s", len(self.leases), timeout)
        # A receive in flight comes back first (its jobs are run, see run()), then every job,
        # including those, gets what is left of the grace period.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._not_receiving.wait(), timeout=max(0.0, timeout))
        leases: dict[asyncio.Task[object], Lease] = {}
        while True:
            leases.update(self.leases)
            pending = [task for task in leases if not task.done()]
            remaining = deadline - loop.time()
            if not pending or remaining <= 0:
                break
            await asyncio.wait(pending, timeout=remaining)
        self._drained = True
        leases.update(self.leases)
        unfinished = [task for task in leases if not task.done()]
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.wait(unfinished)
        released = 0
        for task in unfinished:
            released += await self._release(leases[task])
        await self._stop_keeper()  # every lease is settled now
        finished = len(leases) - len(unfinished)
        logger.info("drained: %d finished, %d released", finished, released)
        return released

    async def _release(self, lease: Lease) -> int:
        async with lease.lock:
            if lease.done:
                return 0
            lease.done = True
            logger.warning(
                "job %s handed back unfinished (message %s): it runs again on another pod",
                contract.peek_job_id(lease.delivery.content) or "?",
                lease.delivery.message_id,
            )
            try:
                await lease.queue.release(lease.delivery, delay_s=0)
            except Exception as error:
                logger.warning(
                    "could not release message %s (it returns after its visibility timeout): %s",
                    lease.delivery.message_id,
                    error,
                )
            return 1
