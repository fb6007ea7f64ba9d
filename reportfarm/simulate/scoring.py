"""
The issue's bar, checked: ours against KEDA + HPA tuned (60 s and 120 s scale-down windows), the
mean of several seeds per trace (``reportfarm simulate --check``).

- ``burst``, ``month-end``: p95 wait <= the better of the two, at <= 75 % of the cheaper one's
  pod-seconds.
- ``month-end-dense``: p95 wait no worse than tuned (60 s).
- ``steady``, ``diurnal``: no worse than tuned (60 s) on p95 wait nor on pod-seconds.
- everywhere: no interrupted job, fewer reversals than each baseline.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from reportfarm.simulate import metrics, running, traces

SIDES = ("reportfarm", "tuned", "tuned-120")
KEYS = ("p95_wait_s", "pod_seconds", "cpu_seconds", "reversals", "interrupted_jobs")
COST_BAR = 0.75
"""Our pod-seconds over the cheaper tuned baseline's, on burst and month-end."""


def summaries(
    name: str,
    *,
    seed: int,
    scenario: running.Scenario,
) -> dict[str, dict[str, Any]]:
    """One seed of one trace: ours, tuned and tuned-120 (the same jobs for all three)."""
    trace = traces.load(name, seed=seed)
    base = dataclasses.replace(scenario, seed=seed, keda=None)
    found: dict[str, dict[str, Any]] = {}
    for preset in SIDES[1:]:
        ours, keda = running.controllers(dataclasses.replace(base, baseline_preset=preset))
        if "reportfarm" not in found:
            found["reportfarm"] = metrics.summarize(running.run(trace, ours, scenario=base))
        found[preset] = metrics.summarize(running.run(trace, keda, scenario=base))
    return found


def mean(runs: Iterable[dict[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per side, the mean of each key over the seeds."""
    listed = list(runs)
    return {
        side: {key: statistics.fmean(run[side][key] for run in listed) for key in KEYS}
        for side in SIDES
    }


def verdict(name: str, means: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The bar for this trace: each condition with its figures."""
    ours, tuned, tuned120 = (means[side] for side in SIDES)
    checks: dict[str, bool] = {
        "no interrupted job": ours["interrupted_jobs"] == 0,
        "fewer reversals": ours["reversals"] < min(tuned["reversals"], tuned120["reversals"]),
    }
    if name in ("burst", "month-end"):
        best_p95 = min(tuned["p95_wait_s"], tuned120["p95_wait_s"])
        cheapest = min(tuned["pod_seconds"], tuned120["pod_seconds"])
        checks["p95 <= the better tuned"] = ours["p95_wait_s"] <= best_p95
        checks[f"pod-s <= {COST_BAR:.0%} of the cheaper"] = (
            ours["pod_seconds"] <= COST_BAR * cheapest
        )
    elif name == "month-end-dense":
        checks["p95 <= tuned (60 s)"] = ours["p95_wait_s"] <= tuned["p95_wait_s"]
    else:
        checks["p95 <= tuned (60 s)"] = ours["p95_wait_s"] <= tuned["p95_wait_s"]
        checks["pod-s <= tuned (60 s)"] = ours["pod_seconds"] <= tuned["pod_seconds"]
    return {"checks": checks, "met": all(checks.values())}


def check(
    names: Iterable[str],
    *,
    seeds: Iterable[int],
    scenario: running.Scenario,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The ``--check --json`` document: per trace, the means per side and the verdict."""
    document: dict[str, Any] = {}
    seed_list = list(seeds)
    for name in names:
        runs = []
        for seed in seed_list:
            progress(f"{name} seed {seed}")
            runs.append(summaries(name, seed=seed, scenario=scenario))
        means = mean(runs)
        document[name] = {"seeds": seed_list, "mean": means, **verdict(name, means)}
    return document
