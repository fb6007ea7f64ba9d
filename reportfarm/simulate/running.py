"""The clock: replay one trace through one strategy, one second at a time."""

from __future__ import annotations

import dataclasses
import random
from typing import Protocol

from reportfarm import policy
from reportfarm.simulate import baseline, farm, ours, traces, workload


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scenario:
    """Everything both strategies share: the pool, the cluster's timings, the render times."""

    spec: policy.PoolSpec = dataclasses.field(
        default_factory=lambda: policy.PoolSpec(
            min_replicas=0,
            max_replicas=20,
            min_browsers_per_pod=1,
            max_browsers_per_pod=8,
            pod_cpu=2.0,
            pod_memory_mib=4096,
            browser_cpu=0.5,
            browser_memory_mib=512,
        )
    )
    """Our ReportPool. The baseline gets the same replica bounds and pods, and runs the most
    browsers that fit in a pod."""
    baseline_preset: str = "tuned"
    """The KEDA + HPA configuration (``baseline.PRESETS``) when ``keda`` is not given."""
    keda: baseline.KedaHpaSettings | None = None
    """An explicit baseline configuration (the frontier sweeps it)."""
    blind: tuple[tuple[float, float], ...] = ()
    """(from, to) seconds during which the renderers' metrics cannot be read by our operator
    (busy browsers and render time unknown: a NetworkPolicy, a wrong port, kwok pods)."""
    timings: farm.Timings = dataclasses.field(default_factory=farm.Timings)
    render: workload.RenderTimes = dataclasses.field(default_factory=workload.RenderTimes)
    policy_interval_s: float = 5.0
    """How often the operator's timer decides."""
    max_tail_s: int = 3600
    """After the trace: run until the queue is empty and no pod is left, at most this long."""
    seed: int = 0
    phase_seed: int | None = None
    """Seeds the controllers' loop phases (and the ReplicaSet's random ties) apart from the jobs:
    the same jobs replayed with the loops redrawn. None: ``seed``."""


class Controller(Protocol):
    name: str

    def initial_browsers_per_pod(self) -> int: ...

    def tick(self, now: float, farm: farm.Farm) -> None: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class Run:
    """What happened to one strategy: the jobs, the farm's counters and per-second series."""

    strategy: str
    jobs: list[workload.Job]
    farm: farm.Farm
    times: list[int]
    depth: list[int]
    replicas: list[int]
    browsers: list[int]
    end_s: int


def keda_settings(scenario: Scenario) -> baseline.KedaHpaSettings:
    """The baseline's configuration: explicit, else the preset on the same pods as ours."""
    if scenario.keda is not None:
        return scenario.keda
    spec = scenario.spec
    return baseline.preset(
        scenario.baseline_preset,
        capacity=spec.browsers_that_fit,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
    )


def controllers(scenario: Scenario) -> list[Controller]:
    """Ours and the baseline, each loop's phase drawn from the seed."""
    phases = scenario.seed if scenario.phase_seed is None else scenario.phase_seed
    rng = random.Random(f"phase:{phases}")
    settings = keda_settings(scenario)
    return [
        ours.PolicyController(
            spec=scenario.spec,
            interval_s=scenario.policy_interval_s,
            phase_s=rng.uniform(0, scenario.policy_interval_s),
            blind=scenario.blind,
        ),
        baseline.KedaHpaController(
            settings=settings,
            rng=random.Random(f"victims:{phases}"),
            poll_phase_s=rng.uniform(0, settings.polling_s),
            sync_phase_s=rng.uniform(0, settings.sync_s),
        ),
    ]


def run(trace: traces.Trace, controller: Controller, *, scenario: Scenario) -> Run:
    per_second = workload.make_jobs(trace, render=scenario.render, seed=scenario.seed)
    cluster = farm.Farm(
        timings=scenario.timings,
        browsers_per_pod=controller.initial_browsers_per_pod(),
        rng=random.Random(f"farm:{scenario.seed}"),
        pod_cpu_request=scenario.spec.pod_cpu,
    )
    times: list[int] = []
    depth: list[int] = []
    replicas: list[int] = []
    browsers: list[int] = []
    t = 0
    while t < trace.duration_s + scenario.max_tail_s:
        settled = not cluster.queue and not cluster.pods
        if t >= trace.duration_s and settled:
            break
        controller.tick(float(t), cluster)
        times.append(t)
        depth.append(cluster.approximate_count(t))
        replicas.append(cluster.replicas)
        browsers.append(cluster.browsers(t))
        cluster.step(float(t), arrivals=per_second[t] if t < trace.duration_s else [])
        t += 1
    cluster.close(float(t))
    return Run(
        strategy=controller.name,
        jobs=[job for second in per_second for job in second],
        farm=cluster,
        times=times,
        depth=depth,
        replicas=replicas,
        browsers=browsers,
        end_s=t,
    )


def compare(trace: traces.Trace, *, scenario: Scenario) -> list[Run]:
    """Ours first, then the baseline."""
    return [run(trace, controller, scenario=scenario) for controller in controllers(scenario)]
