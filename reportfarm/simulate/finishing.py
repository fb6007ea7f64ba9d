"""A farm that finishes what it prints (PDF/A, Factur-X, a signature on every job): the CPU its
finishing takes, in the simulated pods, and what our policy makes of it.

In the renderer a job's browser is free once it printed; its finishing stages run in one of the
pod's finishing processes (as many as the pod's CPUs), on the CPU the pod's printing leaves. The
worker takes one job ahead, so a pod whose finishing lags stops taking jobs: here a browser takes
its next job once its last job's finishing began. A finishing process runs at most one core,
less when the pod's busy browsers leave less (``print_cpu`` each).

The policy sees the farm as the operator reads the renderers: a job in a finishing process
(``reportfarm_finishing_busy``) keeps its pod busy, up to the pool's size, and is still in the
queue's count; with ``report`` on, a job's finishing CPU (``reportfarm_stage_cpu_seconds``) per
job ended (``Observation.finish_cpu_s``, ``reportfarm.capacity``), unknown until a job's
finishing has ended; off, the pods are sized by browsers alone.
``python -m reportfarm.simulate.finishing`` compares the two on the named traces, and shows the
real node's signing pool woken twice (``node_wakes``) and under the node test's shapes
(``node_farm``).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import json
import math
import random
import sys
from typing import Any

from reportfarm import capacity, policy
from reportfarm.simulate import farm as farming
from reportfarm.simulate import traces, workload

SIGNED_EINVOICE_CPU_S = 0.13
"""The finishing stages' CPU per signed PDF/A-3 Factur-X invoice with a visible stamp, in the
renderer's finishing processes (``reportfarm bench einvoice``: metadata, Factur-X with EN 16931's
rules, PDF/A, signature)."""
PRINT_CPU = 0.35
"""Cores a busy browser uses while it prints (the invoice: ~85 ms of CPU in a ~250 ms print)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobCpu:
    finish_cpu_s: float = SIGNED_EINVOICE_CPU_S
    """CPU seconds of a job's finishing stages."""
    print_cpu: float = PRINT_CPU
    """Cores a busy browser uses."""
    report: bool = True
    """The renderers report their finishing CPU (the policy counts it); False: browsers only."""
    signature_cpu_s: float | None = None
    """CPU seconds of the renderers' start-up signature (``reportfarm_finishing_signature_cpu_
    seconds``), read while jobs are in finishing and none has ended; None: not reported (a
    renderer from before it). Measured: a blank page's 0.31 s against a signing job's 0.31 s
    (``tests/finishing/test_processes.py``, one run here), so :func:`node_wakes` takes it equal
    to the finishing CPU of a job that signs; :func:`compare`'s scenarios leave it unreported
    (with it their rows read the same: a job's finishing ends within a tick here)."""


class FinishingFarm(farming.Farm):
    """Pods whose jobs are finished after their print (see the module's docstring)."""

    def __init__(self, *, cpu: JobCpu, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cpu = cpu
        self._finishers: dict[str, list[float]] = {}
        """Per pod, when each finishing process is free."""
        self._finishing: dict[str, list[tuple[float, float]]] = {}
        """Per pod, (begins, ends) of each job's finishing not yet over."""
        self._finish_ends: list[tuple[float, int, float, str]] = []
        """(ends, seq, CPU seconds, pod) of each finishing not yet read, a heap."""
        self._ended: dict[str, tuple[float, int]] = {}
        """Per pod, (finishing CPU seconds, jobs ended) read so far: its renderer's counters."""
        self._finish_seq = itertools.count()

    def held_until(self, job: workload.Job, slot: farming.Slot) -> float:
        assert job.start is not None
        pod = slot.pod
        processes = max(1, math.ceil(self.pod_cpu_request - 1e-9))
        free = self._finishers.setdefault(pod.name, [0.0] * processes)
        left = max(0.1, self.pod_cpu_request - pod.browsers * self.cpu.print_cpu)
        wall = self.cpu.finish_cpu_s / min(1.0, left / processes)
        index = min(range(processes), key=free.__getitem__)
        begins = max(job.start + job.render_s, free[index])
        free[index] = begins + wall
        self._finishing.setdefault(pod.name, []).append((begins, begins + wall))
        ended = (begins + wall, next(self._finish_seq), self.cpu.finish_cpu_s, pod.name)
        heapq.heappush(self._finish_ends, ended)
        return begins

    def in_finishing(self, pod: farming.Pod, now: float) -> int:
        """The pod's jobs in a finishing process now (``reportfarm_finishing_busy``)."""
        spans = [span for span in self._finishing.get(pod.name, []) if span[1] > now]
        self._finishing[pod.name] = spans  # the clock only moves on
        return sum(1 for begins, _ in spans if begins <= now)

    def busy_of(self, pod: farming.Pod, now: float) -> int:
        """As the operator reads a pod (``capacity.busy_browsers``): a job in finishing keeps
        its pod busy, up to the pool's size."""
        return capacity.busy_browsers(
            size=pod.browsers, busy=pod.busy(now), finishing=self.in_finishing(pod, now)
        )

    def approximate_count(self, now: float) -> int:
        """A job in finishing is still in flight: its message is deleted once it is stored."""
        finishing = sum(self.in_finishing(pod, now) for pod in self.pods)
        return super().approximate_count(now) + finishing

    def busy_until(self, pod: farming.Pod) -> float:
        """A draining pod exits once its jobs' finishing is over, not when its browsers are."""
        return max(super().busy_until(pod), *self._finishers.get(pod.name, [-math.inf]))

    def read_signature_cpu(self, now: float) -> float | None:
        """The start-up signature's CPU, from a ready pod not draining (the model's finishing
        processes are up with the pod); None when the renderers do not report it."""
        if not self.cpu.report or not self.cpu.signature_cpu_s:
            return None
        ready = any(not pod.draining and pod.ready_at <= now for pod in self.pods)
        return self.cpu.signature_cpu_s if ready else None

    def read_finish_cpu(self, now: float) -> float | None:
        """A job's finishing CPU as the operator reads it (``capacity.finish_cpu_s``): from the
        jobs whose finishing ended, in the pods not draining, since the previous read when
        enough ended, else over those pods' lifetimes; None before any ended, or when the
        renderers do not report it."""
        read = [pod.name for pod in self.pods if not pod.draining]  # in order: sums replay
        recent_cpu, recent_jobs = 0.0, 0
        while self._finish_ends and self._finish_ends[0][0] <= now:
            _, _, cpu, name = heapq.heappop(self._finish_ends)
            total, jobs = self._ended.get(name, (0.0, 0))
            self._ended[name] = (total + cpu, jobs + 1)
            if name in read:
                recent_cpu, recent_jobs = recent_cpu + cpu, recent_jobs + 1
        if not self.cpu.report:
            return None
        lifetime = [self._ended[name] for name in read if name in self._ended]
        return capacity.finish_cpu_s(
            recent=(recent_cpu, recent_jobs),
            lifetime=(sum(cpu for cpu, _ in lifetime), sum(jobs for _, jobs in lifetime)),
            finishing=sum(self.in_finishing(pod, now) for pod in self.pods if not pod.draining),
            signature_cpu_s=self.cpu.signature_cpu_s,
        )


def farm(cpu: JobCpu) -> functools.partial[FinishingFarm]:
    """The farm factory of a scenario with ``cpu`` (``running.Scenario.finishing``)."""
    return functools.partial(FinishingFarm, cpu=cpu)


def wakes() -> traces.Trace:
    """Batches that each wake the pool from zero: 1500 jobs in 10 s every 15 minutes, nothing
    between (the pool scales to zero after 5 idle minutes), for an hour."""
    counts = [0] * 3600
    for at in (60, 960, 1860, 2760):
        traces.spread(counts, at=at, jobs=1500, over_s=10)
    return traces.Trace(
        name="wakes", arrivals=tuple(counts), description="1 h, 4 batches of 1500 jobs in 10 s"
    )


def compare(
    names: tuple[str, ...] = ("steady", "burst", "month-end", "wakes"),
    *,
    finish_cpu_s: float = SIGNED_EINVOICE_CPU_S,
    seed: int = 0,
    max_replicas: int = 60,
) -> dict[str, Any]:
    """Our policy on each trace: every job finished, the CPU reported vs browsers only, and
    the same trace printed only; the queue wait against the target and the pod-seconds."""
    from reportfarm.simulate import metrics, ours, running

    results: dict[str, Any] = {}
    for name in names:
        trace = wakes() if name == "wakes" else traces.load(name, seed=seed)
        variants = {
            "cpu counted": JobCpu(finish_cpu_s=finish_cpu_s),
            "browsers only": JobCpu(finish_cpu_s=finish_cpu_s, report=False),
            "prints only": None,
        }
        for variant, cpu in variants.items():
            scenario = running.Scenario(finishing=cpu, seed=seed)
            # room for the pods a signing farm needs (the default 20 caps even the prints)
            spec = dataclasses.replace(scenario.spec, max_replicas=max_replicas)
            scenario = dataclasses.replace(scenario, spec=spec)
            controller = ours.PolicyController(
                spec=scenario.spec, interval_s=scenario.policy_interval_s
            )
            summary = metrics.summarize(running.run(trace, controller, scenario=scenario))
            results[f"{name}/{variant}"] = {
                "target_wait_s": scenario.spec.target_wait_s,
                **{key: summary[key] for key in ("p50_wait_s", "p95_wait_s", "p99_wait_s")},
                **{key: summary[key] for key in ("pod_seconds", "peak_replicas")},
                "jobs_completed": summary["jobs_completed"],
                "jobs_total": summary["jobs_total"],
            }
    return results


NODE_FINISH_CPU_S = 0.07
"""A signed e-invoice's finishing CPU in the real node's 1-CPU pods, read from their jobs'
``stages_ms`` and the operator's ``finishCpuSeconds`` since the stamp's CJK face is parsed once
(0.06-0.07 s; docs/benchmarks/einvoice.md)."""


NODE_SIGNATURE_CPU_S = 0.05
"""The start-up signature's CPU in the real node's 1-CPU pods (the operator's
``lastDecision.finishCpuSeconds`` before a job's finishing ended: 0.049-0.051 s)."""


NODE_SHAPES = ((20, 1.0, 30), (30, 1.0, 30), (40, 2.0, 30))
"""The node test's shapes (``REPORTFARM_SIGNING_FARM_SHAPE``): burst, jobs a second, seconds."""


def node_spec(**changes: Any) -> policy.PoolSpec:
    """The real node's signing pool (``tests/node/signing.py``): 1-3 pods of at most 1 CPU,
    browsers of 0.25 CPU (the print's share), a 10 s target; ``changes`` on top."""
    spec = policy.PoolSpec(
        max_replicas=3, max_browsers_per_pod=4, pod_cpu=1.0, browser_cpu=0.25, target_wait_s=10.0
    )
    return dataclasses.replace(spec, **changes)


def node_farm(
    *,
    seed: int = 0,
    burst: int = 20,
    rate_per_s: float = 1.0,
    seconds: int = 30,
    finish_cpu_s: float = NODE_FINISH_CPU_S,
    signature_cpu_s: float | None = NODE_SIGNATURE_CPU_S,
    spec: policy.PoolSpec | None = None,
) -> dict[str, Any]:
    """The real node's signing farm test (``tests/node/test_signing_farm.py``'s shape ``burst,
    rate, seconds``): a pool of at least one pod, ready, then ``burst`` signed invoices at once
    and ``rate_per_s`` a second for ``seconds``; the queue wait against the 10 s target, the
    most pods and the pod-seconds during the shape's ``seconds`` (as the node test counts them).
    The pool is the operator's for a signing key (``PoolSpec.expected_finish_cpu_s``: the 0.35 s
    prior, and the pods' start-up signature, ``signature_cpu_s``, standing in for it). The
    model's finishing processes are up with their pod, as a signing pod is ready only then."""
    from reportfarm.simulate import ours, running

    lead_s = 60  # the pool's first pod ready before the burst, as the node test waits for it
    rng = random.Random(f"node-farm:{seed}")
    counts = [0] * (lead_s + seconds + 240)
    counts[lead_s] += burst
    for t in range(lead_s, lead_s + seconds):
        counts[t] += traces.poisson(rng, rate_per_s)
    if spec is None:
        spec = node_spec(min_replicas=1, expected_finish_cpu_s=capacity.SIGNING_FINISH_CPU_S)
    scenario = running.Scenario(
        spec=spec,
        finishing=JobCpu(
            finish_cpu_s=finish_cpu_s, print_cpu=0.25, signature_cpu_s=signature_cpu_s
        ),
        render=workload.RenderTimes(median_s=0.035, sigma=0.2),
        seed=seed,
    )
    trace = traces.Trace(name="node-farm", arrivals=tuple(counts))
    run = running.run(trace, ours.PolicyController(spec=spec), scenario=scenario)
    waits = sorted(job.start - job.arrival for job in run.jobs if job.start is not None)
    during = [  # as the node test counts them: the shape's seconds
        replicas
        for t, replicas in zip(run.times, run.replicas, strict=True)
        if lead_s <= t < lead_s + seconds
    ]
    return {
        "target_wait_s": spec.target_wait_s,
        "p50_wait_s": round(waits[len(waits) // 2], 3),
        "p95_wait_s": round(waits[int(0.95 * len(waits))], 3),
        "within_target": round(sum(w <= spec.target_wait_s for w in waits) / len(waits), 3),
        "peak_pods": max(during),
        "pod_seconds": round(sum(during) * _sample_s(run.times), 1),
        "jobs": len(waits),
    }


def _sample_s(times: list[int]) -> float:
    return float(times[1] - times[0]) if len(times) > 1 else 1.0


def node_wakes(
    *,
    seed: int = 0,
    quiet_s: int = 420,
    signature_cpu_s: float | None = 0.35,
    expected_finish_cpu_s: float | None = None,
) -> dict[str, Any]:
    """The real node's signing pool (1-3 pods of 1 CPU, browsers of 0.25 CPU, a 10 s target)
    and its invoices (a 35 ms print, 0.35 s of signing) in two bursts of 40 jobs and 2 a second
    for 30 s, ``quiet_s`` apart: the pool is at zero when the second one wakes it. Per burst:
    the queue wait, and the first size decided for it (pods x browsers).
    ``expected_finish_cpu_s``: the spec's (``PoolSpec.expected_finish_cpu_s``; the operator
    gives a pool with a signing key ``capacity.SIGNING_FINISH_CPU_S``), None: not set."""
    from reportfarm.simulate import ours, running

    rng = random.Random(f"node-wakes:{seed}")
    counts = [0] * (2 * quiet_s)
    for at in (0, quiet_s):
        counts[at] += 40
        for t in range(at, at + 30):
            counts[t] += traces.poisson(rng, 2.0)
    spec = node_spec(expected_finish_cpu_s=expected_finish_cpu_s)
    scenario = running.Scenario(
        spec=spec,
        finishing=JobCpu(finish_cpu_s=0.35, print_cpu=0.25, signature_cpu_s=signature_cpu_s),
        render=workload.RenderTimes(median_s=0.035, sigma=0.2),
        seed=seed,
    )
    trace = traces.Trace(name="node-wakes", arrivals=tuple(counts))
    run = running.run(trace, ours.PolicyController(spec=spec), scenario=scenario)
    results: dict[str, Any] = {}
    for burst, start in (("first", 0), ("second", quiet_s)):
        waits = sorted(
            job.start - job.arrival
            for job in run.jobs
            if job.start is not None and start <= job.arrival < start + quiet_s
        )
        woken = next(t for t, before, _ in run.farm.replica_changes if t >= start and before == 0)
        pools = [after for t, _, after in run.farm.pool_changes if t <= woken]
        replicas = [after for t, _, after in run.farm.replica_changes if t == woken]
        results[f"node-wakes/{burst} burst"] = {
            "target_wait_s": spec.target_wait_s,
            "p50_wait_s": round(waits[len(waits) // 2], 3),
            "p95_wait_s": round(waits[int(0.95 * len(waits))], 3),
            "woken_to": f"{replicas[-1]}x{pools[-1] if pools else spec.fewest_browsers}",
            "jobs": len(waits),
        }
    results["node-wakes/pod_seconds"] = round(run.farm.pod_seconds, 1)
    return results


def main(argv: list[str]) -> int:
    finish_cpu_s = float(argv[0]) if argv else SIGNED_EINVOICE_CPU_S
    expecting = node_wakes(expected_finish_cpu_s=capacity.SIGNING_FINISH_CPU_S)
    expected = {
        f"expected {name}": expecting[name]
        for name in ("node-wakes/first burst", "node-wakes/pod_seconds")
    }
    farms = {
        f"node-farm/{burst},{rate},{seconds}": node_farm(
            burst=burst, rate_per_s=rate, seconds=seconds
        )
        for burst, rate, seconds in NODE_SHAPES
    }
    print(
        json.dumps(
            {**compare(finish_cpu_s=finish_cpu_s), **node_wakes(), **expected, **farms}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
