"""
The shape suite (``reportfarm simulate --suite N``): N generated cases (``shapes.case``), each
replayed through ours, KEDA tuned (60 s) and KEDA tuned-120 with the controllers' loop phases
redrawn ``phases`` times (the same jobs each time); per case, the mean of the draws.

The bar per case (issue "Scaling on every shape"):

- p95 wait <= 1.1x the better tuned preset's, or both under 1 s;
- pod-seconds <= the cheaper preset's;
- no more interrupted jobs than tuned-120.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from reportfarm.simulate import metrics, running, shapes

SIDES = ("reportfarm", "tuned", "tuned-120")
KEYS = ("p95_wait_s", "pod_seconds", "reversals", "interrupted_jobs")
WAIT_BAR = 1.1
"""Our p95 wait over the better tuned preset's."""
FAST_S = 1.0
"""Both p95 waits under this: a tie."""


def run_case(
    case: shapes.Case,
    *,
    scenario: running.Scenario,
    phases: int,
    render_median_s: float | None = None,
) -> dict[str, dict[str, float]]:
    """Per side, the mean of each key over the phase draws. ``render_median_s`` replaces the
    case's median render time (its tail, if any, is kept)."""
    found: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    render = case.render
    if render_median_s is not None:
        render = dataclasses.replace(render, median_s=render_median_s)
    base = dataclasses.replace(scenario, seed=case.index, keda=None, render=render)
    for draw in range(phases):
        drawn = dataclasses.replace(base, phase_seed=case.index * 1000 + draw)
        for preset in SIDES[1:]:
            ours, keda = running.controllers(dataclasses.replace(drawn, baseline_preset=preset))
            if preset == SIDES[1]:
                found["reportfarm"].append(
                    metrics.summarize(running.run(case.trace, ours, scenario=drawn))
                )
            found[preset].append(metrics.summarize(running.run(case.trace, keda, scenario=drawn)))
    return {
        side: {key: statistics.fmean(run[key] for run in runs) for key in KEYS}
        for side, runs in found.items()
    }


def verdict(means: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The ratios against the better (wait) and the cheaper (cost) preset, and the bar's checks."""
    ours, tuned, tuned120 = (means[side] for side in SIDES)
    best_p95 = min(tuned["p95_wait_s"], tuned120["p95_wait_s"])
    cheapest = min(tuned["pod_seconds"], tuned120["pod_seconds"])
    fast = max(ours["p95_wait_s"], best_p95) < FAST_S
    checks = {
        "wait": fast or ours["p95_wait_s"] <= WAIT_BAR * best_p95,
        "cost": ours["pod_seconds"] <= cheapest,
        "interrupted": ours["interrupted_jobs"] <= tuned120["interrupted_jobs"],
    }
    return {
        "p95_ratio": ours["p95_wait_s"] / best_p95 if best_p95 > 0 else None,
        "cost_ratio": ours["pod_seconds"] / cheapest if cheapest > 0 else None,
        "both_fast": fast,
        "checks": checks,
        "met": all(checks.values()),
    }


def run(
    count: int,
    *,
    scenario: running.Scenario,
    phases: int = 3,
    start: int = 0,
    render_median_s: float | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[dict[str, Any]]:
    """Cases ``start .. start + count - 1``: one entry each (the ``--suite --json`` rows).
    ``render_median_s``: every case's median render time (default: the cases' own, 0.5 s)."""
    rows = []
    for index in range(start, start + count):
        case = shapes.case(index)
        progress(f"case {index} {case.shape}: {case.trace.description}")
        means = run_case(case, scenario=scenario, phases=phases, render_median_s=render_median_s)
        rows.append(
            {
                "index": index,
                "shape": case.shape,
                "description": case.trace.description,
                "jobs": case.trace.jobs,
                "duration_s": case.trace.duration_s,
                "mean": means,
                **verdict(means),
            }
        )
    return rows


def by_shape(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per shape: cases, cases met (and per check), the median and worst ratios."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["shape"], []).append(row)
    out = {}
    for shape, mine in grouped.items():
        waits = [row["p95_ratio"] for row in mine if row["p95_ratio"] is not None]
        costs = [row["cost_ratio"] for row in mine if row["cost_ratio"] is not None]
        out[shape] = {
            "cases": len(mine),
            "met": sum(row["met"] for row in mine),
            "wait_met": sum(row["checks"]["wait"] for row in mine),
            "cost_met": sum(row["checks"]["cost"] for row in mine),
            "interrupted_met": sum(row["checks"]["interrupted"] for row in mine),
            "p95_ratio_median": statistics.median(waits) if waits else None,
            "p95_ratio_worst": max(waits) if waits else None,
            "cost_ratio_median": statistics.median(costs) if costs else None,
            "cost_ratio_worst": max(costs) if costs else None,
            "reversals_ours": statistics.fmean(
                row["mean"]["reportfarm"]["reversals"] for row in mine
            ),
            "reversals_tuned": statistics.fmean(row["mean"]["tuned"]["reversals"] for row in mine),
        }
    return out
