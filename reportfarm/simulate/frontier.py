"""
Pareto frontiers: p95 wait against pod-seconds, each side's knobs swept on a coarse grid
(``reportfarm simulate --frontier``). A claim names a point on our frontier and the baseline
configuration it beats; a single point proves little.

- Ours: target queue wait x scale-down window x tolerance.
- KEDA + HPA: queueLength x scale-down window x pollingInterval, scale-up +20 pods per 15 s (the
  tuned limit) and the out-of-the-box preset.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable
from typing import Any

from reportfarm.simulate import baseline, metrics, running, traces

OUR_GRID = {
    "target_wait_s": (1.0, 2.0, 5.0, 10.0, 20.0),
    "scale_down_stabilization_s": (15.0, 60.0, 300.0),
    "tolerance": (0.1, 0.3),
}
KEDA_GRID = {
    "queue_length": (2, 4, 8, 16),
    "scale_down_window_s": (60.0, 120.0, 300.0),
    "polling_s": (5.0, 30.0),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Point:
    side: str
    """``reportfarm`` or ``keda_hpa``."""
    knobs: dict[str, Any]
    p95_wait_s: float
    pod_seconds: float
    cpu_seconds: float


def _grid(grid: dict[str, tuple[Any, ...]]) -> Iterable[dict[str, Any]]:
    for values in itertools.product(*grid.values()):
        yield dict(zip(grid, values, strict=True))


def _point(side: str, knobs: dict[str, Any], run: running.Run) -> Point:
    summary = metrics.summarize(run)
    return Point(
        side=side,
        knobs=knobs,
        p95_wait_s=summary["p95_wait_s"],
        pod_seconds=summary["pod_seconds"],
        cpu_seconds=summary["cpu_seconds"],
    )


def sweep(
    trace: traces.Trace,
    *,
    scenario: running.Scenario,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Point]:
    """Every grid point of both sides on one trace (one seed: the scenario's)."""
    points = []
    for knobs in _grid(OUR_GRID):
        progress(f"{trace.name} reportfarm {knobs}")
        spec = dataclasses.replace(scenario.spec, **knobs)
        ours, _ = running.controllers(dataclasses.replace(scenario, spec=spec))
        points.append(_point("reportfarm", knobs, running.run(trace, ours, scenario=scenario)))
    spec = scenario.spec
    tuned = baseline.preset(
        "tuned",
        capacity=spec.browsers_that_fit,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
    )
    configs = [dataclasses.replace(tuned, **knobs) for knobs in _grid(KEDA_GRID)]
    configs.append(dataclasses.replace(tuned, **_default_knobs()))
    for keda in configs:
        knobs = {key: getattr(keda, key) for key in (*KEDA_GRID, "scale_up_pods")}
        progress(f"{trace.name} keda_hpa {knobs}")
        _, controller = running.controllers(dataclasses.replace(scenario, keda=keda))
        points.append(_point("keda_hpa", knobs, running.run(trace, controller, scenario=scenario)))
    return points


def _default_knobs() -> dict[str, Any]:
    default = baseline.preset("default", capacity=1)
    return {
        key: getattr(default, key)
        for key in ("queue_length", "scale_down_window_s", "polling_s", "scale_up_pods")
    }


def pareto(points: Iterable[Point]) -> list[Point]:
    """The points no other point beats on both axes, by pod-seconds."""
    ordered = sorted(points, key=lambda p: (p.pod_seconds, p.p95_wait_s))
    front: list[Point] = []
    for point in ordered:
        if not front or point.p95_wait_s < front[-1].p95_wait_s:
            front.append(point)
    return front


def document(points_by_trace: dict[str, list[Point]]) -> dict[str, Any]:
    """The ``--frontier --json`` document: every point, and each side's frontier."""
    out: dict[str, Any] = {}
    for name, points in points_by_trace.items():
        sides = {}
        for side in ("reportfarm", "keda_hpa"):
            mine = [p for p in points if p.side == side]
            sides[side] = {
                "points": [dataclasses.asdict(p) for p in mine],
                "frontier": [dataclasses.asdict(p) for p in pareto(mine)],
            }
        out[name] = sides
    return out
