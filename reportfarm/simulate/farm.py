"""
The simulated cluster: one Deployment of renderer pods, each with a pool of browser slots, all
pulling from one queue. Control happens at whole seconds; within a second the queue is served
first-in first-out by the earliest free browser (ties broken at random, like pods polling a queue).

Pod removal is what our renderer does on SIGTERM, whoever lowers the replicas (our operator or an
HPA): the pod takes no new job, finishes its running renders within the drain timeout (most of the
grace period), then releases the rest (their messages are visible again at once) and exits. A job
is interrupted only if its render would run past the drain timeout.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import math
import random

from reportfarm.simulate import latencies, workload


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timings:
    """How long the cluster takes to do things (the same for every strategy); the defaults are
    the real node's (``latencies.MEASURED``)."""

    pod_start_s: float = latencies.MEASURED.pod_start_s
    """Pod creation to ready: schedule, pull (cached), start Chromium, first poll."""
    resize_delay_s: float = latencies.MEASURED.resize_s
    """A pool-size change reaches a running pod and its new browsers are up."""
    resize_failure: float = latencies.MEASURED.resize_failure
    """The share of pool resizes that fail (that pod keeps its size until it is asked again)."""
    deletion_cost_lag_s: float = latencies.MEASURED.deletion_cost_lag_s
    """The ReplicaSet sees a pod-deletion-cost patch this long after it was made."""
    grace_period_s: float = 120.0
    """The pods' terminationGracePeriodSeconds (the chart's example pool sets 120 s)."""
    render_window_s: float = 60.0
    """The renderers' metrics report the mean render time over this window."""

    @property
    def drain_timeout_s(self) -> float:
        """REPORTFARM_DRAIN_TIMEOUT as the operator sets it: most of the grace period."""
        grace = self.grace_period_s
        return float(max(1, min(grace - 5, int(grace * 0.8))))


class Slot:
    __slots__ = ("free_at", "job", "pod")

    def __init__(self, free_at: float, *, pod: Pod) -> None:
        self.free_at = free_at
        self.job: workload.Job | None = None
        self.pod = pod


class Pod:
    __slots__ = ("browsers", "created_at", "draining", "name", "pending", "ready_at", "slots")

    def __init__(self, *, name: str, now: float, ready_at: float, browsers: int) -> None:
        self.name = name
        self.created_at = now
        self.ready_at = ready_at
        self.browsers = browsers
        self.slots = [Slot(ready_at, pod=self) for _ in range(browsers)]
        self.pending: tuple[float, int] | None = None
        self.draining = False

    def busy(self, now: float) -> int:
        return sum(1 for slot in self.slots if slot.job is not None and slot.free_at > now)

    def resize(self, browsers: int, *, at: float) -> None:
        self.slots.extend(Slot(at, pod=self) for _ in range(browsers - len(self.slots)))
        self.browsers = browsers  # slots past the size finish their render, then stay unused


class Farm:
    def __init__(
        self,
        *,
        timings: Timings,
        browsers_per_pod: int,
        rng: random.Random,
        pod_cpu_request: float = 2.0,
    ) -> None:
        self.timings = timings
        self.pod_cpu_request = pod_cpu_request
        """CPU cores each pod requests (its size never changes; the browsers inside it do)."""
        self.browsers_per_pod = browsers_per_pod
        """The pool size the Deployment asks for (pods reach it after ``resize_delay_s``)."""
        self.rng = rng
        self.pods: list[Pod] = []
        self.queue: list[tuple[float, int, workload.Job]] = []  # a heap by visibility
        self.pod_seconds = 0.0
        self.interrupted = 0
        self.resize_failures = 0
        self.replica_changes: list[tuple[float, int, int]] = []  # (time, before, after)
        self.pool_changes: list[tuple[float, int, int]] = []
        self._seq = itertools.count()
        self._names = itertools.count()
        self._renders: collections.deque[tuple[float, float]] = collections.deque()
        self._ends: list[tuple[float, int, float, Pod]] = []  # (end, seq, render, pod), unread
        self.lifetime = (0, 0.0)
        """(renders, render seconds) completed and read, as the renderers' counters."""

    # What the controllers observe.
    @property
    def replicas(self) -> int:
        """The Deployment's replicas: pods not draining (starting or ready)."""
        return sum(1 for pod in self.pods if not pod.draining)

    def ready(self, now: float) -> int:
        return sum(1 for pod in self.pods if not pod.draining and pod.ready_at <= now)

    def busy(self, now: float) -> int:
        return sum(pod.busy(now) for pod in self.pods)

    def approximate_count(self, now: float) -> int:
        """Queued (visible or not) plus in-flight messages, as Azure's approximate count."""
        return len(self.queue) + self.busy(now)

    def busy_by_pod(self, now: float) -> dict[str, int]:
        """Per pod not draining, its busy browsers as its renderer says them (``busy_of``)."""
        return {pod.name: self.busy_of(pod, now) for pod in self.pods if not pod.draining}

    def busy_of(self, pod: Pod, now: float) -> int:
        """A pod's busy browsers as its renderer says them: those holding a job (a farm that
        finishes its jobs counts those in finishing too: ``simulate.finishing``)."""
        return pod.busy(now)

    def oldest_by_pod(self, now: float) -> dict[str, float]:
        """Per pod not draining: seconds its longest-running job has run (0: none), as the
        renderer's gauge says it (never the job's length, which no one knows ahead)."""
        return {
            pod.name: max(
                (
                    max(0.0, now - slot.job.start)
                    for slot in pod.slots
                    if slot.job is not None and slot.free_at > now and slot.job.start is not None
                ),
                default=0.0,
            )
            for pod in self.pods
            if not pod.draining
        }

    def mean_render_s(self, now: float) -> float | None:
        while self._renders and self._renders[0][0] < now - self.timings.render_window_s:
            self._renders.popleft()
        if not self._renders:
            return None
        return sum(render for _, render in self._renders) / len(self._renders)

    def busy_seen(self, now: float) -> int:
        """Busy browsers as the operator reads them: from the pods that are not terminating (a
        draining pod's renders are still in the approximate count, not in the busy browsers)."""
        return sum(self.busy_of(pod, now) for pod in self.pods if not pod.draining)

    def read_renders(self, now: float) -> tuple[int, float]:
        """(renders, their seconds) completed since the previous read, as the operator reads
        the renderers' counters; the lifetime totals are kept in ``lifetime``."""
        count, seconds = 0, 0.0
        while self._ends and self._ends[0][0] <= now:
            _, _, render_s, pod = heapq.heappop(self._ends)
            if not pod.draining:  # a terminating pod is not read (``pods.pods_of``)
                count, seconds = count + 1, seconds + render_s
        self.lifetime = (self.lifetime[0] + count, self.lifetime[1] + seconds)
        return count, seconds

    def browsers(self, now: float) -> int:
        """Browsers able to take a job now."""
        live = (p for p in self.pods if not p.draining and p.ready_at <= now)
        return sum(pod.browsers for pod in live)

    # What the controllers do.
    def add_pods(self, count: int, *, now: float) -> None:
        self._note_replicas(now, self.replicas + count)
        for _ in range(count):
            name = f"pod-{next(self._names)}"
            ready_at = now + self.timings.pod_start_s
            self.pods.append(
                Pod(name=name, now=now, ready_at=ready_at, browsers=self.browsers_per_pod)
            )

    def starting(self, now: float) -> list[str]:
        """Pods not ready yet: a ReplicaSet removes these before any ready pod."""
        return [pod.name for pod in self.pods if not pod.draining and pod.ready_at > now]

    def drain(self, names: list[str], *, now: float) -> None:
        """SIGTERM: no new job; renders that end within the drain timeout finish, the rest are
        released (visible again at the deadline) and count as interrupted."""
        self._note_replicas(now, self.replicas - len(names))
        deadline = now + self.timings.drain_timeout_s
        for pod in self._named(names):
            pod.draining = True
            if pod.ready_at > now:  # never started: nothing to finish
                pod.slots = []
            for slot in pod.slots:
                if slot.job is not None and slot.free_at > deadline:
                    job, self.interrupted = slot.job, self.interrupted + 1
                    job.start, job.interruptions = None, job.interruptions + 1
                    job.visible_at = deadline
                    heapq.heappush(self.queue, (job.visible_at, next(self._seq), job))
                    slot.job, slot.free_at = None, deadline
        self._leave(now, end=now)

    def resize(self, browsers: int, *, now: float) -> None:
        """The Deployment's pool size, and ``PUT /pool`` on every ready pod that runs another
        size (as the operator does at each tick); each may fail (``resize_failure``): that pod
        keeps its size until the next call."""
        if browsers != self.browsers_per_pod:
            self.pool_changes.append((now, self.browsers_per_pod, browsers))
            self.browsers_per_pod = browsers
        for pod in self.pods:
            if pod.draining:
                continue
            if pod.ready_at > now:  # a starting pod reads the size when it starts
                pod.resize(browsers, at=pod.ready_at)
                continue
            asked = pod.pending[1] if pod.pending is not None else pod.browsers
            if asked == browsers:
                continue
            failing = self.timings.resize_failure > 0
            if failing and self.rng.random() < self.timings.resize_failure:
                self.resize_failures += 1
                continue
            pod.pending = (now + self.timings.resize_delay_s, browsers)

    # The clock.
    def step(self, now: float, *, arrivals: list[workload.Job], dt: float = 1.0) -> None:
        """Advance ``[now, now + dt)``: resizes, arrivals, renders; drained pods leave."""
        end = now + dt
        for job in arrivals:
            heapq.heappush(self.queue, (job.visible_at, next(self._seq), job))
        free: list[tuple[float, float, Slot]] = []
        for pod in self.pods:
            if pod.pending is not None and pod.pending[0] < end:
                pod.resize(pod.pending[1], at=pod.pending[0])
                pod.pending = None
            if pod.draining or pod.ready_at >= end:
                continue
            for slot in pod.slots[: pod.browsers]:
                if slot.free_at < end:
                    free.append((max(slot.free_at, now, pod.ready_at), self.rng.random(), slot))
        heapq.heapify(free)
        while free and self.queue and self.queue[0][0] < end:
            at, _, slot = heapq.heappop(free)
            visible_at, _, job = heapq.heappop(self.queue)
            job.start = max(at, visible_at)
            slot.job, slot.free_at = job, self.held_until(job, slot)
            self._renders.append((job.start, job.render_s))
            heapq.heappush(self._ends, (slot.free_at, next(self._seq), job.render_s, slot.pod))
            if slot.free_at < end:
                heapq.heappush(free, (slot.free_at, self.rng.random(), slot))
        self._leave(now, end=end)

    def held_until(self, job: workload.Job, slot: Slot) -> float:
        """When a job gives its browser back: after its render (finishing: see
        ``simulate.finishing``)."""
        assert job.start is not None
        return job.start + job.render_s

    def read_finish_cpu(self, now: float) -> float | None:
        """A job's finishing CPU as the operator reads it from the renderers' counters since the
        previous read (``simulate.finishing``); None: not modelled."""
        return None

    def read_signature_cpu(self, now: float) -> float | None:
        """The renderers' start-up signature's CPU seconds as the operator reads it
        (``simulate.finishing``); None: not modelled."""
        return None

    def busy_until(self, pod: Pod) -> float:
        """When the last of a pod's jobs ends (a draining pod exits then; -inf: none)."""
        return max((slot.free_at for slot in pod.slots), default=-math.inf)

    def close(self, now: float) -> None:
        """End of the run: account the pods still there."""
        for pod in self.pods:
            self.pod_seconds += now - pod.created_at
        self.pods = []

    def _leave(self, now: float, *, end: float) -> None:
        """Draining pods whose renders are all done by ``end`` exit (and stop costing)."""
        staying = []
        for pod in self.pods:
            if pod.draining and self.busy_until(pod) <= end:
                exit_at = max(now, self.busy_until(pod))
                self.pod_seconds += exit_at - pod.created_at
            else:
                staying.append(pod)
        self.pods = staying

    def _named(self, names: list[str]) -> list[Pod]:
        wanted = set(names)
        return [pod for pod in self.pods if pod.name in wanted]

    def _note_replicas(self, now: float, after: int) -> None:
        before = self.replicas
        if after != before:
            self.replica_changes.append((now, before, after))
