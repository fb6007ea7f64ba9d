"""The load shapes a reviewer found us slower on, and the suite that generates shapes like them."""

from __future__ import annotations

import dataclasses
import random
import statistics

import pytest

from reportfarm import policy
from reportfarm.simulate import metrics, running, shapes, suite, traces

R = policy.Reason
NOW = 10_000.0


def p95_and_cost(trace: traces.Trace, *, phases: int = 3) -> dict[str, tuple[float, float]]:
    """Per side (ours, tuned), the mean over loop-phase draws of (p95 wait, pod-seconds)."""
    found: dict[str, list[dict[str, float]]] = {"reportfarm": [], "keda_hpa": []}
    for draw in range(phases):
        scenario = running.Scenario(seed=1, phase_seed=draw)
        for controller in running.controllers(scenario):
            found[controller.name].append(
                metrics.summarize(running.run(trace, controller, scenario=scenario))
            )
    return {
        side: (
            statistics.fmean(run["p95_wait_s"] for run in runs),
            statistics.fmean(run["pod_seconds"] for run in runs),
        )
        for side, runs in found.items()
    }


def stream(rates: list[float], *, name: str) -> traces.Trace:
    rng = random.Random(name)
    return traces.Trace(name=name, arrivals=tuple(traces.poisson(rng, rate) for rate in rates))


def test_a_sustained_jump_is_met_as_fast_as_keda_tuned() -> None:
    """5 jobs/s that becomes 50 jobs/s for five minutes: the old policy froze its steady
    estimate at the pre-jump value while the queue grew (p95 ~2x tuned KEDA's)."""
    rates = [5.0] * 600 + [50.0] * 300 + [5.0] * 600
    sides = p95_and_cost(stream(rates, name="jump"))
    (ours_p95, ours_cost), (keda_p95, keda_cost) = sides["reportfarm"], sides["keda_hpa"]
    assert ours_p95 <= 1.1 * keda_p95
    assert ours_cost <= keda_cost


def test_small_bursts_use_the_browsers_a_running_pod_has() -> None:
    """5-15 jobs every 30-90 s: one pod's browsers that fit take them at once."""
    rng = random.Random("small")
    counts = [0] * 1800
    t = 10.0
    while t < 1800:
        traces.spread(counts, at=int(t), jobs=rng.randint(5, 15), over_s=2)
        t += rng.uniform(30, 90)
    sides = p95_and_cost(traces.Trace(name="small", arrivals=tuple(counts)))
    (ours_p95, ours_cost), (keda_p95, keda_cost) = sides["reportfarm"], sides["keda_hpa"]
    assert ours_p95 <= max(1.0, 1.1 * keda_p95)
    assert ours_cost <= keda_cost


def test_a_running_pod_runs_every_browser_that_fits() -> None:
    pool = policy.PoolSpec(max_replicas=5, pod_start_s=0.0)
    seen = policy.Observation(now=NOW, queue_depth=2, ready_replicas=1, browsers_per_pod=1)
    memory = policy.State(replicas=1, browsers_per_pod=1, last_work_at=NOW)
    decision = policy.decide(dataclasses.replace(seen, busy_browsers=1), pool, memory)
    assert (decision.replicas, decision.browsers_per_pod) == (1, pool.browsers_that_fit)


def test_starting_pods_stay_while_their_backlog_waits() -> None:
    """10 pods asked for, 4 ready and busy, 196 jobs still waiting: the old policy saw the ready
    pods' spare browsers as enough and cancelled 6 starting pods (10 -> 4)."""
    pool = policy.PoolSpec(  # the depth floor off: it would ask for more than the 10
        max_replicas=20,
        target_utilization=1.0,
        default_render_s=1.0,
        pod_start_s=20.0,
        jobs_per_browser=None,
    )
    memory = policy.State(
        replicas=10, browsers_per_pod=4, last_work_at=NOW, busy_average=4.0, decided_at=NOW - 5
    )
    seen = policy.Observation(
        now=NOW, queue_depth=212, ready_replicas=4, browsers_per_pod=4, busy_browsers=16
    )
    decision = policy.decide(seen, pool, dataclasses.replace(memory, depth=212))
    assert decision.replicas == 10


def test_a_growing_backlog_raises_the_steady_estimate() -> None:
    """All browsers busy and the depth growing at every tick: the arrival rate is the
    completions plus the growth, more than the busy browsers show."""
    pool = policy.PoolSpec(max_replicas=20, busy_smoothing_s=20.0, pod_start_s=20.0)
    memory = policy.State(
        replicas=4,
        browsers_per_pod=4,
        last_work_at=NOW,
        busy_average=3.0,
        render_s=0.6,
        depth=113,
        decided_at=NOW - 5,
    )
    depth = 113
    for tick in range(16):  # 80 s: longer than ``sustained_s`` (60 s)
        depth += 40  # 8 jobs/s more than 16 browsers clear
        now = NOW + 5 * tick
        seen = policy.Observation(
            now=now,
            queue_depth=depth,
            ready_replicas=4,
            browsers_per_pod=4,
            busy_browsers=16,
            mean_render_s=0.6,
        )
        decision = policy.decide(seen, pool, memory)
        memory = decision.state
    assert memory.busy_average is not None and memory.busy_average > 16
    assert decision.replicas > 6


def test_a_batch_is_a_backlog_not_a_rate() -> None:
    """One tick of growth (a batch landing) does not move the steady estimate."""
    pool = policy.PoolSpec(max_replicas=20)
    memory = policy.State(
        replicas=4,
        browsers_per_pod=4,
        last_work_at=NOW,
        busy_average=3.0,
        render_s=0.6,
        depth=3,
        decided_at=NOW - 5,
        trend=((NOW - 15, 0.0), (NOW - 10, 0.0), (NOW - 5, 0.0)),
    )
    seen = policy.Observation(
        now=NOW, queue_depth=1500, ready_replicas=4, browsers_per_pod=4, busy_browsers=16
    )
    decision = policy.decide(seen, pool, memory)
    assert decision.state.busy_average is not None and decision.state.busy_average <= 16


def test_after_a_drain_the_stream_is_at_least_the_completions() -> None:
    """A jump's first backlog drained: 20 pods, the depth up by 5 since the last tick (not yet a
    sustained growth) while the renderers completed 250 renders in 5 s (50 jobs/s, 0.6 s each:
    30 busy). The old policy took the stream as unknown and fell back to the pre-jump average
    (20 -> 7 pods, 28 browsers at 100 %)."""
    pool = policy.PoolSpec(max_replicas=20)
    memory = policy.State(
        replicas=20,
        browsers_per_pod=4,
        last_work_at=NOW,
        busy_average=9.0,
        render_s=0.6,
        depth=24,
        decided_at=NOW - 5,
        trend=((NOW - 10, -70.0), (NOW - 5, -3.0)),
    )
    seen = policy.Observation(
        now=NOW,
        queue_depth=29,
        ready_replicas=20,
        browsers_per_pod=4,
        busy_browsers=29,
        mean_render_s=0.6,
        completed=250,
    )
    decision = policy.decide(seen, pool, memory)
    assert decision.replicas * decision.browsers_per_pod >= 30 / pool.target_utilization


def test_renders_completed_between_ticks_are_work() -> None:
    """A trickle: each job renders between two ticks, so none is seen queued or running; the
    renderers' counters show it. 400 s after the last work seen at a tick, the pool stays."""
    pool = policy.PoolSpec(min_replicas=0, scale_to_zero_idle_s=300.0)
    memory = policy.State(replicas=1, browsers_per_pod=4, last_work_at=NOW - 400, decided_at=NOW)
    quiet = policy.Observation(
        now=NOW + 5, queue_depth=0, ready_replicas=1, browsers_per_pod=4, busy_browsers=0
    )
    assert policy.decide(dataclasses.replace(quiet, completed=0), pool, memory).replicas == 0
    kept = policy.decide(dataclasses.replace(quiet, completed=1), pool, memory)
    assert kept.replicas == 1 and kept.state.last_work_at == NOW + 5


def test_one_long_render_among_few_does_not_flap_the_pool() -> None:
    """Heavy tails: one 50 s render among five that ended since the last tick makes a 10 s mean;
    sized on it, 5 queued jobs asked for 7 pods, and the next tick for 1 again."""
    pool = policy.PoolSpec(max_replicas=20)
    memory = policy.State(
        replicas=1,
        browsers_per_pod=4,
        last_work_at=NOW,
        busy_average=1.0,
        render_s=0.6,
        depth=4,
        decided_at=NOW - 5,
    )
    seen = policy.Observation(
        now=NOW,
        queue_depth=5,
        ready_replicas=1,
        browsers_per_pod=4,
        busy_browsers=1,
        mean_render_s=(50.0 + 4 * 0.5) / 5,
        completed=5,
    )
    decision = policy.decide(seen, pool, memory)
    assert decision.replicas == 1
    assert decision.state.render_s is not None and decision.state.render_s < 3.0


@pytest.mark.parametrize("index", range(18))
def test_generated_cases_are_reproducible_and_sane(index: int) -> None:
    case = shapes.case(index)
    assert case == shapes.case(index)
    assert case.trace.jobs > 0 and case.trace.duration_s >= 600
    assert case.shape == list(shapes.SHAPES)[index % len(shapes.SHAPES)]


def test_a_small_suite_runs_and_reads_the_bar() -> None:
    rows = suite.run(len(shapes.SHAPES), scenario=running.Scenario(), phases=1)
    assert {row["shape"] for row in rows} == set(shapes.SHAPES)
    for row in rows:
        ours, tuned, tuned120 = (row["mean"][side] for side in suite.SIDES)
        best = min(tuned["p95_wait_s"], tuned120["p95_wait_s"])
        assert row["checks"]["cost"] == (
            ours["pod_seconds"] <= min(tuned["pod_seconds"], tuned120["pod_seconds"])
        )
        if best >= 1.0:
            assert row["checks"]["wait"] == (ours["p95_wait_s"] <= 1.1 * best)
    summary = suite.by_shape(rows)
    assert sum(entry["cases"] for entry in summary.values()) == len(rows)


@pytest.mark.parametrize("index", [20, 47])
def test_the_depth_floor_meets_a_sustained_jump_sooner(index: int) -> None:
    """Two of the suite's sustained jumps lost at their onset (docs/comparison/keda.md): with
    the default floor on the depth the pods start at the first sight of the jump, and the p95
    wait falls (one phase draw: 3.86 -> 2.66 s and 1.75 -> 0.86 s when it came; with the
    noise band, 2.87 -> 2.24 s and 0.86 -> 0.72 s) for a few % more pod-seconds."""
    case = shapes.case(index)
    assert case.shape == "sustained-jump"
    found = {}
    for floor in (2.0, None):
        scenario = running.Scenario(seed=index, render=case.render, phase_seed=index * 1000)
        spec = dataclasses.replace(scenario.spec, jobs_per_browser=floor)
        scenario = dataclasses.replace(scenario, spec=spec)
        ours, _ = running.controllers(scenario)
        found[floor] = metrics.summarize(running.run(case.trace, ours, scenario=scenario))
    assert found[2.0]["p95_wait_s"] < 0.9 * found[None]["p95_wait_s"]
    assert found[2.0]["pod_seconds"] < 1.1 * found[None]["pod_seconds"]
    assert found[2.0]["jobs_completed"] == found[None]["jobs_completed"]
