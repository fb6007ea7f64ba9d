"""A farm that finishes what it prints (PDF/A, Factur-X, a signature on every job): the CPU its
finishing takes, in the simulated pods, and what our policy makes of it.

In the renderer a job's browser is free once it printed; its finishing stages run in one of the
pod's finishing processes (as many as the pod's CPUs), on the CPU the pod's printing leaves. The
worker takes one job ahead, so a pod whose finishing lags stops taking jobs: here a browser takes
its next job once its last job's finishing began. A finishing process runs at most one core,
less when the pod's busy browsers leave less (``print_cpu`` each).

The renderers report the CPU a job needs (``reportfarm_stage_cpu_seconds`` with the print's):
with ``report`` on, the policy sees it (``Observation.job_cpu_s``, ``reportfarm.capacity``);
off, it sizes by browsers alone, as before. ``python -m reportfarm.simulate.finishing`` compares
the two on the named traces.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
from typing import Any

from reportfarm.simulate import farm as farming
from reportfarm.simulate import workload

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
    """The renderers report the CPU a job needs (the policy counts it); False: browsers only."""

    def job_cpu_s(self, render_s: float) -> float:
        """CPU seconds a job needs in its pod end to end."""
        return self.print_cpu * render_s + self.finish_cpu_s


class FinishingFarm(farming.Farm):
    """Pods whose jobs are finished after their print (see the module's docstring)."""

    def __init__(self, *, cpu: JobCpu, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cpu = cpu
        self._finishers: dict[str, list[float]] = {}
        """Per pod, when each finishing process is free."""

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
        return begins

    def job_cpu_s(self, render_s: float | None) -> float | None:
        if not self.cpu.report or render_s is None:
            return None
        return self.cpu.job_cpu_s(render_s)


def farm(cpu: JobCpu) -> functools.partial[FinishingFarm]:
    """The farm factory of a scenario with ``cpu`` (``running.Scenario.finishing``)."""
    return functools.partial(FinishingFarm, cpu=cpu)


def compare(
    names: tuple[str, ...] = ("steady", "burst", "month-end"),
    *,
    finish_cpu_s: float = SIGNED_EINVOICE_CPU_S,
    seed: int = 0,
    max_replicas: int = 60,
) -> dict[str, Any]:
    """Our policy on each trace: every job finished, the CPU reported vs browsers only, and
    the same trace printed only; the queue wait against the target and the pod-seconds."""
    from reportfarm.simulate import metrics, ours, running, traces

    results: dict[str, Any] = {}
    for name in names:
        trace = traces.load(name, seed=seed)
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


def main(argv: list[str]) -> int:
    finish_cpu_s = float(argv[0]) if argv else SIGNED_EINVOICE_CPU_S
    print(json.dumps(compare(finish_cpu_s=finish_cpu_s), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
