"""The idle timer: its default on a trickle, and the frontier that compares it with KEDA's
cooldownPeriod at matched cost (``reportfarm simulate --idle-frontier``)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import pytest

from reportfarm import policy
from reportfarm.simulate import cli, idle, running, traces


def _lone_jobs(gap_s: int, count: int) -> traces.Trace:
    arrivals = [0] * (gap_s * count)
    for job in range(count):
        arrivals[job * gap_s] = 1
    return traces.Trace(name="lone", arrivals=tuple(arrivals))


def _ours(trace: traces.Trace, idle_s: float | None = None) -> running.Run:
    scenario = running.Scenario()
    if idle_s is not None:
        spec = dataclasses.replace(scenario.spec, scale_to_zero_idle_s=idle_s)
        scenario = dataclasses.replace(scenario, spec=spec)
    ours = running.controllers(scenario)[0]
    return running.run(trace, ours, scenario=scenario)


def test_the_default_timer_goes_to_zero_between_jobs_three_minutes_apart() -> None:
    """A job every 180 s: at the default (120 s) the pool goes to zero between jobs, and each job
    meets a cold pool; at 300 s one pod stays warm and no job waits a pod start."""
    assert policy.PoolSpec().scale_to_zero_idle_s == 120.0
    trace = _lone_jobs(180, 8)
    default, held = _ours(trace), _ours(trace, idle_s=300.0)
    zeros = [
        r
        for r, before in zip(default.replicas[1:], default.replicas, strict=False)
        if r == 0 < before
    ]
    assert len(zeros) >= 6  # down after each job but the first ones' overlap
    assert held.replicas[180 : 180 * 7].count(0) == 0
    cold = [job.wait_s for job in default.jobs if job.wait_s >= 10]
    assert len(cold) >= 6
    assert max(job.wait_s for job in held.jobs[1:]) < 5
    assert default.farm.pod_seconds < held.farm.pod_seconds


def test_at_cost_interpolates_between_our_neighbouring_timers() -> None:
    curve = [(300.0, 2.0, 0.1), (100.0, 10.0, 0.5), (200.0, 4.0, 0.2)]
    assert idle._at_cost(curve, 150.0) == pytest.approx((7.0, 0.35))
    assert idle._at_cost(curve, 300.0) == pytest.approx((2.0, 0.1))
    assert idle._at_cost(curve, 99.0) is None
    assert idle._at_cost(curve, 301.0) is None
    assert idle._at_cost([(50.0, 1.0, 0.0)], 50.0) == (1.0, 0.0)


def _row(
    case: int, side: str, idle_s: float, cost: float, wait: float, cold: float
) -> dict[str, Any]:
    return {
        "case": case,
        "side": side,
        "idle_s": idle_s,
        "pod_seconds": cost,
        "mean_wait_s": wait,
        "cold_share": cold,
    }


def test_matched_reads_ours_at_kedas_cost_and_counts_the_cases_outside() -> None:
    rows = [
        _row(1, "reportfarm", 60, 100, 10, 0.5),
        _row(1, "reportfarm", 300, 200, 2, 0.1),
        _row(2, "reportfarm", 60, 100, 8, 0.4),
        _row(2, "reportfarm", 300, 300, 4, 0.2),
        _row(1, "keda_hpa", 60, 90, 9, 0.6),  # cheaper than any timer of ours
        _row(2, "keda_hpa", 60, 150, 5, 0.3),  # ours at 150: wait 7, cold 0.35
        _row(1, "keda_hpa", 300, 150, 8, 0.4),  # ours at 150: wait 6 -> 0.75
        _row(2, "keda_hpa", 300, 400, 3, 0.1),  # dearer than any timer of ours
    ]
    table = {row["keda_cooldown_s"]: row for row in idle.matched(rows)}
    assert table[60]["matched"] == 1 and table[60]["keda_cheaper_than_any_of_ours"] == 1
    assert table[60]["mean_wait_ratio_median"] == pytest.approx(7 / 5)
    assert table[60]["ours_waits_less"] == 0
    assert table[60]["cold_share_median"]["reportfarm"] == pytest.approx(0.35)
    assert table[300]["matched"] == 1 and table[300]["keda_dearer_than_any_of_ours"] == 1
    assert table[300]["mean_wait_ratio_median"] == pytest.approx(0.75)
    assert table[300]["ours_waits_less"] == 1
    by_timer = {(row["side"], row["idle_s"]): row for row in idle.by_timer(rows)}
    assert by_timer[("keda_hpa", 300)]["pod_seconds_vs_keda_300"] == pytest.approx(1.0)
    assert by_timer[("reportfarm", 60)]["pod_seconds_vs_keda_300"] == pytest.approx(
        (100 / 150 + 100 / 400) / 2
    )


def test_the_sweep_sets_each_sides_timer() -> None:
    """On a real trickle case, a longer timer costs more and meets fewer cold pools, on both
    sides: the timer reached both controllers."""
    case = idle.trickles(20)[0]
    rows = idle.sweep([case], scenario=running.Scenario(), phases=1, idles=(20.0, 600.0))
    got = {(row["side"], row["idle_s"]): row for row in rows}
    for side in idle.SIDES:
        short, long = got[(side, 20.0)], got[(side, 600.0)]
        assert short["pod_seconds"] < long["pod_seconds"]
        assert short["cold_share"] > long["cold_share"]
        assert short["mean_wait_s"] > long["mean_wait_s"]


def test_cli_idle_frontier_prints_plots_and_rejects_no_trickle(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    plot = tmp_path / "idle.png"
    code = cli.main(
        ["--idle-frontier", "--suite", "10", "--phases", "1", "--json", "--plot", str(plot)]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["cases"] == len(idle.trickles(10)) >= 1
    assert [row["keda_cooldown_s"] for row in document["matched"]] == list(idle.IDLES)
    assert len(document["rows"]) == document["cases"] * len(idle.IDLES) * 2
    assert plot.stat().st_size > 0
    assert cli.main(["--idle-frontier", "--suite", "5"]) == 2  # cases 0-4: no trickle
    assert "no trickle case" in capsys.readouterr().err


def test_cli_sets_our_idle_timer() -> None:
    scenario = cli.scenario_from(cli.parser().parse_args(["--idle-s", "45"]))
    assert scenario.spec.scale_to_zero_idle_s == 45.0
    assert cli.scenario_from(cli.parser().parse_args([])).spec.scale_to_zero_idle_s == 120.0


def test_the_sweep_sets_every_cases_render_median() -> None:
    """At 2 s renders a trickle's message stays visible longer: KEDA's poll sees more of them,
    and its pods cost more at the same cooldownPeriod than at the case's own 0.5 s median."""
    case = idle.trickles(20)[0]

    def keda_cost(median: float | None) -> float:
        rows = idle.sweep(
            [case], scenario=running.Scenario(), phases=1, idles=(120.0,), render_median_s=median
        )
        return next(row["pod_seconds"] for row in rows if row["side"] == "keda_hpa")

    assert keda_cost(2.0) > keda_cost(None)
