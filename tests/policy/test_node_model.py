"""The simulator set up as the real node's side by side (``tests/node/sidebyside_model.py``):
a warm start, pod-seconds from Ready, the KEDA sides' names and the model's table (pure, fast)."""

from __future__ import annotations

import pytest

from reportfarm.simulate import farm, running, traces
from tests.node import sidebyside, sidebyside_model


def test_a_warm_start_serves_at_once_and_counts_from_ready() -> None:
    trace = traces.Trace(name="one", arrivals=(1,) + (0,) * 9)
    waits, costs = {}, {}
    for warm in (0, 1):
        chosen = running.Scenario(timings=farm.Timings(pod_start_s=20.0), max_tail_s=30)
        ours, _ = running.controllers(chosen)
        watched = sidebyside_model.AsOnTheNode(ours, warm=warm, pod_start_s=20.0)
        run = running.run(trace, watched, scenario=chosen)
        watched.observe(float(run.end_s), run.farm)
        (job,) = run.jobs
        assert job.start is not None
        waits[warm] = job.wait_s
        costs[warm] = (watched.ready_pod_seconds(float(run.end_s)), run.farm.pod_seconds)
    assert waits[1] < 1.0 < 20.0 <= waits[0]
    # From Ready: the pod start is not counted (the simulator's own count has it).
    for ready, created in costs.values():
        assert 0 < ready <= created - 19.0, costs


def test_keda_sides_parse_and_refuse_nonsense() -> None:
    assert sidebyside.KedaSetting.parse("keda-60") == sidebyside.KedaSetting(window=60)
    assert sidebyside.KedaSetting.parse("keda-120-q4-up1") == sidebyside.KedaSetting(
        window=120, queue_length=4, step=1
    )
    for wrong in ("keda", "keda-x", "keda-60-q", "ours-60"):
        with pytest.raises(ValueError, match="unknown side"):
            list(sidebyside.iter_sides(f"ours,{wrong}"))


def test_the_model_of_a_real_run_prices_the_longer_window_higher() -> None:
    measured = {"pod_start_s": [12.0, 14.0], "service_p50_s": 1.2, "service_p90_s": 2.0}
    stored = [
        {"trace": "burst", "side": side, "p95_s": 15.0, "p99_s": 16.0, "pod_seconds": 300.0}
        | measured
        for side in ("ours", "keda-60", "keda-120")
    ]
    rows = {row["side"]: row for row in sidebyside_model.compare(stored, phases=2)}
    model_cost = {side: row["pod_seconds"][1] for side, row in rows.items()}
    assert model_cost["keda-60"] < model_cost["keda-120"]
    assert rows["ours"]["pod_start_s"] == 13.0
    assert "| burst | keda-120 | 1 |" in sidebyside_model.table(list(rows.values()))
