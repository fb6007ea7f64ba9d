"""
The idle timer's frontier on trickles (``reportfarm simulate --idle-frontier``).

A trickle (a lone job every 10-120 s) is decided by one knob on each side: how long an idle pod
is kept before the pool goes to zero (our ``scaleToZero.idleSeconds``, KEDA's ``cooldownPeriod``).
Each job that arrives after the pool went to zero waits a pod start; each second kept waiting for
one is a pod-second paid. With Poisson arrivals at rate ``r`` and a share ``f`` of the jobs
arriving cold, a gap costs ``(1 - f) / r + f * pod_start`` pod-seconds whatever the rule that
chose ``f``: cost and cold starts trade along one line, and no idle rule beats another on both
axes by much. The sides differ in *where* a timer value puts them: our clock restarts on every
job (completions count as work), KEDA's only on a message its poll saw, so at the same value we
hold longer, wait less and pay more.

So the fair comparison of the two on trickles is at matched cost: sweep both timers over
``IDLES``, and for each KEDA value and case, read our mean wait and cold share off our curve at
KEDA's pod-seconds (linear between our two neighbouring points).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from reportfarm.simulate import running, shapes

IDLES = (20.0, 40.0, 60.0, 120.0, 180.0, 300.0, 600.0)
"""The timer values swept on both sides (seconds)."""
SIDES = ("reportfarm", "keda_hpa")


def cold_wait_s(scenario: running.Scenario) -> float:
    """A job that waited at least half a pod start met a cold pool."""
    return scenario.timings.pod_start_s / 2


def measure(run: running.Run, *, cold_s: float) -> dict[str, float]:
    waits = [job.wait_s for job in run.jobs if job.start is not None]
    return {
        "pod_seconds": run.farm.pod_seconds,
        "mean_wait_s": statistics.fmean(waits) if waits else 0.0,
        "cold_share": sum(wait >= cold_s for wait in waits) / len(waits) if waits else 0.0,
    }


def sweep(
    cases: Iterable[shapes.Case],
    *,
    scenario: running.Scenario,
    phases: int,
    idles: Sequence[float] = IDLES,
    render_median_s: float | None = None,
    progress: Callable[[str], object] = lambda _: None,
) -> list[dict[str, Any]]:
    """Per case, side and timer value: the mean over the loop-phase draws of pod-seconds, mean
    wait and cold share. KEDA is the ``tuned`` preset with only ``cooldownPeriod`` changed.
    ``render_median_s`` replaces each case's median render time (how long a message stays
    visible to KEDA's poll depends on it)."""
    rows: list[dict[str, Any]] = []
    cold_s = cold_wait_s(scenario)
    for case in cases:
        render = case.render
        if render_median_s is not None:
            render = dataclasses.replace(render, median_s=render_median_s)
        base = dataclasses.replace(scenario, seed=case.index, keda=None, render=render)
        for idle in idles:
            found: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
            for draw in range(phases):
                drawn = dataclasses.replace(
                    base,
                    phase_seed=case.index * 1000 + draw,
                    spec=dataclasses.replace(base.spec, scale_to_zero_idle_s=idle),
                )
                keda = dataclasses.replace(running.keda_settings(drawn), cooldown_s=idle)
                drawn = dataclasses.replace(drawn, keda=keda)
                for controller in running.controllers(drawn):
                    run = running.run(case.trace, controller, scenario=drawn)
                    found[controller.name].append(measure(run, cold_s=cold_s))
            for side, runs in found.items():
                means = {key: statistics.fmean(run[key] for run in runs) for key in runs[0]}
                rows.append({"case": case.index, "side": side, "idle_s": idle, **means})
        progress(f"case {case.index} {case.shape}: {len(idles)} timer values x {phases} draws")
    return rows


def _at_cost(curve: list[tuple[float, float, float]], cost: float) -> tuple[float, float] | None:
    """Our (mean wait, cold share) at ``cost`` pod-seconds on a curve of (cost, wait, cold)
    points, linear between neighbours; None outside the curve's range."""
    points = sorted(curve)
    if not points or cost < points[0][0] or cost > points[-1][0]:
        return None
    for (low, wait_low, cold_low), (high, wait_high, cold_high) in itertools.pairwise(points):
        if low <= cost <= high:
            share = (cost - low) / (high - low) if high > low else 0.0
            return (
                wait_low + share * (wait_high - wait_low),
                cold_low + share * (cold_high - cold_low),
            )
    return points[0][1], points[0][2]  # a one-point curve at exactly that cost


def matched(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per KEDA timer value: in how many cases KEDA's pod-seconds fall within our curve's range
    (below it: KEDA cheaper than any timer of ours), and there the median of our mean wait over
    KEDA's at the same cost, the cases where ours waits less, and both cold shares (medians)."""
    curves: dict[int, list[tuple[float, float, float]]] = {}
    keda: dict[float, list[dict[str, Any]]] = {}
    for row in rows:
        if row["side"] == "reportfarm":
            point = (row["pod_seconds"], row["mean_wait_s"], row["cold_share"])
            curves.setdefault(row["case"], []).append(point)
        else:
            keda.setdefault(row["idle_s"], []).append(row)
    table = []
    for idle, theirs in sorted(keda.items()):
        ratios, ours_cold, keda_cold, below, above = [], [], [], 0, 0
        for row in theirs:
            curve = curves.get(row["case"], [])
            found = _at_cost(curve, row["pod_seconds"])
            if found is None:
                cheapest = min((point[0] for point in curve), default=0.0)
                below += row["pod_seconds"] < cheapest
                above += row["pod_seconds"] >= cheapest
                continue
            wait, cold = found
            ratios.append(wait / row["mean_wait_s"] if row["mean_wait_s"] > 0 else 1.0)
            ours_cold.append(cold)
            keda_cold.append(row["cold_share"])
        table.append(
            {
                "keda_cooldown_s": idle,
                "cases": len(theirs),
                "matched": len(ratios),
                "keda_cheaper_than_any_of_ours": below,
                "keda_dearer_than_any_of_ours": above,
                "mean_wait_ratio_median": statistics.median(ratios) if ratios else None,
                "ours_waits_less": sum(ratio < 1 for ratio in ratios),
                "cold_share_median": {
                    "reportfarm": statistics.median(ours_cold) if ours_cold else None,
                    "keda_hpa": statistics.median(keda_cold) if keda_cold else None,
                },
            }
        )
    return table


def by_timer(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per side and timer value, medians over the cases: pod-seconds over KEDA's at its default
    ``cooldownPeriod`` (300 s) in the same case, mean wait, cold share."""
    reference = {
        row["case"]: row["pod_seconds"]
        for row in rows
        if row["side"] == "keda_hpa" and row["idle_s"] == 300.0
    }
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["side"], row["idle_s"]), []).append(row)
    out = []
    for (side, idle), picked in sorted(groups.items()):
        costs = [
            r["pod_seconds"] / reference[r["case"]] for r in picked if reference.get(r["case"])
        ]
        out.append(
            {
                "side": side,
                "idle_s": idle,
                "cases": len(picked),
                "pod_seconds_vs_keda_300": statistics.median(costs) if costs else None,
                "mean_wait_s": statistics.median(r["mean_wait_s"] for r in picked),
                "cold_share": statistics.median(r["cold_share"] for r in picked),
            }
        )
    return out


def trickles(count: int, *, start: int = 0) -> list[shapes.Case]:
    """The trickle cases among the suite's cases ``start .. start + count - 1``."""
    picked = (shapes.case(index) for index in range(start, start + count))
    return [case for case in picked if case.shape == "trickle"]
