"""The scaling policy as a table: (spec, state, observation) -> (replicas, browsers/pod, reason)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reportfarm import policy
from tests.policy import pools

R = policy.Reason
NOW = 10_000.0

EXACT = pools.EXACT


def spec(**changes: Any) -> policy.PoolSpec:
    return policy.PoolSpec(**{**EXACT, **changes})


def state(replicas: int, bpp: int, **changes: Any) -> policy.State:
    return policy.State(
        **{"replicas": replicas, "browsers_per_pod": bpp, "last_work_at": NOW, **changes}
    )


def observe(depth: int | None, busy: int | None, ready: int, bpp: int) -> policy.Observation:
    return policy.Observation(
        now=NOW, queue_depth=depth, ready_replicas=ready, browsers_per_pod=bpp, busy_browsers=busy
    )


CASES = [
    pytest.param(
        spec(min_replicas=1),
        state(1, 1),
        observe(20, 1, 1, 1),
        (1, 3, R.POOL_GROW),
        id="grows-the-pool-inside-the-running-pod-first",
    ),
    pytest.param(
        spec(),
        state(1, 4),
        observe(30, 4, 1, 4),
        (2, 4, R.SCALE_UP),
        id="adds-pods-when-the-pods-are-full",
    ),
    pytest.param(
        spec(min_replicas=2),
        state(2, 2),
        observe(40, 4, 2, 2),
        (2, 4, R.POOL_GROW),
        id="grows-pools-in-min-replicas-pods-before-adding",
    ),
    pytest.param(
        spec(),
        state(2, 4),
        observe(10_000, 8, 2, 4),
        (10, 4, R.SCALE_UP),
        id="never-above-max-replicas",
    ),
    pytest.param(
        spec(max_browsers_per_pod=8, pod_memory_mib=1024, browser_memory_mib=512),
        state(1, 1),
        observe(3, 1, 1, 1),
        (1, 2, R.POOL_GROW),
        id="browsers-per-pod-limited-by-pod-memory",
    ),
    pytest.param(
        spec(min_replicas=3),
        state(3, 1),
        observe(0, 0, 3, 1),
        (3, 1, R.STEADY),
        id="never-below-min-replicas",
    ),
    pytest.param(
        spec(),
        state(5, 4, window=((NOW - 30, 20),)),
        observe(2, 2, 5, 4),
        (5, 4, R.STABILIZING),
        id="scale-down-waits-for-the-stabilization-window",
    ),
    pytest.param(
        spec(),
        state(5, 4, window=((NOW - 61, 20),)),
        observe(2, 2, 5, 4),
        (1, 3, R.SCALE_DOWN),
        id="scale-down-after-the-stabilization-window",
    ),
    pytest.param(
        spec(),
        state(5, 4, window=((NOW - 90, 20), (NOW - 30, 12))),
        observe(2, 2, 5, 4),
        (4, 4, R.SCALE_DOWN),
        id="scale-down-to-the-highest-need-left-in-the-window",
    ),
    pytest.param(
        spec(),
        state(2, 4),
        observe(80, 1, 2, 4),
        (3, 4, R.SCALE_UP),
        id="scale-up-is-immediate",
    ),
    pytest.param(
        spec(),
        state(10, 4),
        observe(35, 35, 10, 4),
        (10, 4, R.WITHIN_TOLERANCE),
        id="no-scale-down-inside-the-tolerance-band",
    ),
    pytest.param(
        spec(),
        state(10, 4),
        observe(32, 32, 10, 4),
        (9, 4, R.SCALE_DOWN),
        id="scale-down-beyond-the-tolerance-band-keeps-the-margin",
    ),
    pytest.param(
        spec(min_replicas=1),
        state(1, 3),
        observe(2, 2, 1, 3),
        (1, 3, R.WITHIN_TOLERANCE),
        id="one-spare-browser-is-not-worth-a-resize",
    ),
    pytest.param(
        spec(),
        state(1, 1, last_work_at=NOW - 299),
        observe(0, 0, 1, 1),
        (1, 1, R.WAITING_FOR_IDLE),
        id="no-scale-to-zero-before-the-idle-time",
    ),
    pytest.param(
        spec(),
        state(1, 1, last_work_at=NOW - 300),
        observe(0, 0, 1, 1),
        (0, 1, R.SCALE_TO_ZERO),
        id="scale-to-zero-after-the-idle-time",
    ),
    pytest.param(
        spec(),
        state(3, 4, last_work_at=NOW - 600),
        observe(0, 1, 3, 4),
        (1, 2, R.SCALE_DOWN),
        id="no-scale-to-zero-while-a-browser-is-busy",
    ),
    pytest.param(
        spec(),
        state(0, 1, last_work_at=NOW - 900),
        observe(0, None, 0, 1),
        (0, 1, R.STEADY),
        id="stays-at-zero-while-idle",
    ),
    pytest.param(
        spec(),
        state(0, 1, last_work_at=NOW - 900),
        observe(1, None, 0, 1),
        (1, 1, R.WAKE_FROM_ZERO),
        id="wakes-from-zero-on-the-first-message",
    ),
    pytest.param(
        spec(),
        state(0, 1, last_work_at=NOW - 900),
        observe(200, None, 0, 1),
        (5, 4, R.WAKE_FROM_ZERO),
        id="wakes-from-zero-to-the-size-the-backlog-needs",
    ),
    pytest.param(
        spec(),
        state(5, 4, last_work_at=NOW - 900),
        observe(None, None, 5, 4),
        (5, 4, R.QUEUE_UNREADABLE),
        id="queue-unreadable-keeps-the-size-never-zero",
    ),
    pytest.param(
        spec(),
        policy.State(),
        observe(None, None, 3, 2),
        (3, 2, R.QUEUE_UNREADABLE),
        id="queue-unreadable-without-memory-keeps-what-runs",
    ),
    pytest.param(
        spec(min_replicas=1),
        policy.State(),
        observe(None, None, 0, 1),
        (1, 1, R.QUEUE_UNREADABLE),
        id="queue-unreadable-without-memory-never-under-the-floor",
    ),
    pytest.param(
        spec(min_replicas=2, max_replicas=3),
        policy.State(),
        observe(None, None, 5, 4),
        (3, 4, R.QUEUE_UNREADABLE),
        id="queue-unreadable-without-memory-within-the-bounds",
    ),
    pytest.param(
        spec(),
        state(2, 4),
        observe(8, None, 2, 4),
        (1, 3, R.SCALE_DOWN),
        # need 8 x 1 / (10 + 1) -> 1 browser; blind, a shrink keeps (1 + 2) x the need
        id="busy-unknown-sizes-from-the-depth-not-from-the-running-browsers",
    ),
    pytest.param(
        spec(pod_start_s=20.0),
        state(2, 4),
        observe(80, 1, 2, 4),
        (2, 4, R.STEADY),
        id="no-pod-that-would-start-after-the-backlog-is-gone",  # 7 spare clear 79 in 11 s < 20
    ),
    pytest.param(
        spec(pod_start_s=20.0),
        state(2, 4),
        observe(400, 1, 2, 4),
        (7, 4, R.SCALE_UP),
        id="pods-for-the-backlog-left-when-they-are-ready",  # 40 - 7 x 20 / 10 = 26 left: 1 + 26
    ),
    pytest.param(
        spec(pod_start_s=20.0, min_replicas=1),
        state(1, 1),
        observe(40, 1, 1, 1),
        (1, 4, R.POOL_GROW),
        id="grows-the-running-pods-pools-instead-of-starting-a-pod",
    ),
    pytest.param(
        spec(jobs_per_browser=2.0),
        state(1, 4),
        observe(40, 4, 1, 4),
        (5, 4, R.SCALE_UP),
        id="jobs-per-browser-target",
    ),
    pytest.param(
        spec(max_browsers_per_pod=2),
        state(2, 4),
        observe(8, 8, 2, 4),
        (4, 2, R.SCALE_UP),
        id="a-lowered-limit-is-applied",
    ),
]


@pytest.mark.parametrize(("pool", "memory", "seen", "expected"), CASES)
def test_decision_table(
    pool: policy.PoolSpec,
    memory: policy.State,
    seen: policy.Observation,
    expected: tuple[int, int, policy.Reason],
) -> None:
    decision = policy.decide(seen, spec=pool, state=memory)
    assert (decision.replicas, decision.browsers_per_pod, decision.reason) == expected
    assert decision.message
    assert decision.state.replicas == decision.replicas
    assert decision.state.browsers_per_pod == decision.browsers_per_pod
    assert decision.state.reason == decision.reason.value


@pytest.mark.parametrize(
    ("pool", "fit"),
    [
        pytest.param(spec(max_browsers_per_pod=8), 4, id="cpu-bound"),
        pytest.param(spec(pod_memory_mib=1536, browser_memory_mib=512), 3, id="memory-bound"),
        pytest.param(spec(max_browsers_per_pod=2), 2, id="max-bound"),
        pytest.param(spec(pod_cpu=0.25, browser_cpu=0.5), 1, id="at-least-one"),
    ],
)
def test_browsers_that_fit(pool: policy.PoolSpec, fit: int) -> None:
    assert pool.browsers_that_fit == fit


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(dict(min_replicas=3, max_replicas=2), id="min-above-max"),
        pytest.param(dict(min_browsers_per_pod=0), id="zero-browsers"),
        pytest.param(dict(browser_cpu=0), id="zero-cpu"),
        pytest.param(dict(target_utilization=1.5), id="utilization-above-1"),
        pytest.param(dict(jobs_per_browser=0), id="zero-jobs-per-browser"),
    ],
)
def test_spec_rejects_nonsense(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        spec(**changes)


def test_saturated_when_the_need_exceeds_the_ceiling() -> None:
    decision = policy.decide(observe(10_000, 40, 10, 4), spec=spec(), state=state(10, 4))
    assert decision.saturated
    assert (decision.replicas, decision.browsers_per_pod) == (10, 4)


def test_state_round_trips_through_a_plain_dict() -> None:
    pool = spec()
    first = policy.decide(observe(50, 4, 1, 4), spec=pool, state=state(1, 4))
    plain = json.loads(json.dumps(first.state.to_dict()))  # as stored in the ReportPool status
    restored = policy.State.from_dict(plain)
    assert restored == first.state
    later = dataclasses.replace(observe(50, 4, 1, 4), now=NOW + 5)
    assert policy.decide(later, spec=pool, state=restored) == policy.decide(
        later, spec=pool, state=first.state
    )


@pytest.mark.parametrize("status", [None, {}], ids=["none", "empty"])
def test_an_empty_status_is_a_fresh_state(status: dict[str, Any] | None) -> None:
    assert policy.State.from_dict(status) == policy.State()


def test_first_decision_does_not_scale_to_zero() -> None:
    decision = policy.decide(observe(0, 0, 2, 4), spec=spec(), state=policy.State())
    assert decision.replicas == 1
    assert decision.state.last_work_at == NOW


def test_the_window_keeps_only_possible_maxima() -> None:
    memory = state(5, 4, window=((NOW - 50, 30), (NOW - 40, 20), (NOW - 10, 10)))
    decision = policy.decide(observe(15, 15, 5, 4), spec=spec(), state=memory)
    assert decision.state.window == ((NOW - 50, 30), (NOW - 40, 20), (NOW, 15))
    assert decision.required_browsers == 30


def test_smoothing_ignores_a_one_tick_spike() -> None:
    pool = spec(busy_smoothing_s=20.0, min_replicas=1)
    memory = state(1, 2, busy_average=1.0, decided_at=NOW - 5)
    decision = policy.decide(
        observe(4, 4, 1, 2), spec=pool, state=memory
    )  # a spike of 4 busy, no queue
    assert decision.replicas == 1
    assert decision.browsers_per_pod == 2


@pytest.mark.parametrize(
    ("busy", "expected"),
    [
        pytest.param({"a": 3, "b": 0, "c": 1}, {"b": 0, "c": 1, "a": 2}, id="idlest-lowest"),
        pytest.param({"b": 1, "a": 1}, {"a": 0, "b": 1}, id="ties-by-name"),
        pytest.param({"a": None, "b": 4}, {"b": 0, "a": 1}, id="unknown-is-spared"),
        pytest.param({}, {}, id="no-pods"),
    ],
)
def test_deletion_costs(busy: dict[str, int | None], expected: dict[str, int]) -> None:
    assert policy.deletion_costs(busy) == expected


@pytest.mark.parametrize(
    ("busy", "oldest", "expected"),
    [
        # a's job has run 100 s (past a 2 s mean: as long again) > the 25 s drain: b goes first
        pytest.param(
            {"a": 1, "b": 2}, {"a": 100.0, "b": 1.0}, {"b": 0, "a": 1}, id="outliving-spared"
        ),
        # both within the drain: the idlest first, as before
        pytest.param({"a": 1, "b": 2}, {"a": 10.0, "b": 1.0}, {"a": 0, "b": 1}, id="idlest-first"),
        # equal load: the job closest to its end goes first (b: 2 - 1.5 = 0.5 s left; a: 1.8)
        pytest.param({"a": 1, "b": 1}, {"a": 0.2, "b": 1.5}, {"b": 0, "a": 1}, id="nearest-end"),
        # an idle pod has nothing to lose, whatever its gauge said a moment ago
        pytest.param({"a": 0, "b": 1}, {"a": 90.0, "b": 0.5}, {"a": 0, "b": 1}, id="idle-first"),
        # a renderer too old to say (None) is ranked by its load alone
        pytest.param({"a": 1, "b": 2}, {"a": None, "b": 1.0}, {"a": 0, "b": 1}, id="not-said"),
    ],
)
def test_deletion_costs_spare_a_pod_whose_job_would_outlive_its_drain(
    busy: dict[str, int | None], oldest: dict[str, float | None], expected: dict[str, int]
) -> None:
    costs = policy.deletion_costs(busy, oldest_s_by_pod=oldest, render_s=2.0, drain_s=25.0)
    assert costs == expected


@given(
    pods=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3),
        st.tuples(
            st.one_of(st.none(), st.integers(0, 8)),
            st.one_of(st.none(), st.floats(0, 600, allow_nan=False)),
        ),
        max_size=12,
    ),
    render_s=st.one_of(st.none(), st.floats(0.05, 120, allow_nan=False)),
    drain_s=st.floats(1, 300, allow_nan=False),
)
def test_no_pod_whose_job_would_outlive_its_drain_goes_before_one_whose_would_not(
    pods: dict[str, tuple[int | None, float | None]], render_s: float | None, drain_s: float
) -> None:
    busy = {name: load for name, (load, _) in pods.items()}
    oldest = {name: age for name, (_, age) in pods.items()}
    costs = policy.deletion_costs(busy, oldest_s_by_pod=oldest, render_s=render_s, drain_s=drain_s)
    assert sorted(costs.values()) == list(range(len(pods)))  # ranks, no ties

    def outlives(name: str) -> bool:
        age = oldest[name] or 0.0
        return bool(busy[name]) and age > 0 and max((render_s or 0.0) - age, age) > drain_s

    for a in pods:
        for b in pods:
            load_a, load_b = busy[a], busy[b]
            if load_a is None or load_b is None:
                continue
            if outlives(a) and not outlives(b):
                assert costs[a] > costs[b], (a, b, costs)
            if outlives(a) == outlives(b) and load_a > load_b:
                assert costs[a] > costs[b], (a, b, costs)
    for name, load in busy.items():  # unknown load: spared before every known one
        if load is None:
            assert all(costs[name] > costs[o] for o in pods if busy[o] is not None)


@given(
    depth=st.one_of(st.none(), st.integers(0, 5000)),
    busy=st.one_of(st.none(), st.integers(0, 100)),
    ready=st.integers(0, 30),
    bpp=st.integers(1, 8),
    last=st.tuples(st.integers(0, 30), st.integers(1, 8)),
    min_replicas=st.integers(0, 3),
    idle=st.floats(0, 1000),
    steady=st.one_of(st.none(), st.floats(0, 100)),
    trend=st.one_of(st.none(), st.floats(-50, 50)),
)
def test_decisions_stay_within_the_limits(
    depth: int | None,
    busy: int | None,
    ready: int,
    bpp: int,
    last: tuple[int, int],
    min_replicas: int,
    idle: float,
    steady: float | None,
    trend: float | None,
) -> None:
    """Generated: any depth, busy browsers, pool and memory, a remembered steady average and
    stream's trend among it (a trend of any sign and size moves the need, never the bounds)."""
    pool = policy.PoolSpec(min_replicas=min_replicas, max_replicas=12)
    memory = state(
        *last,
        last_work_at=NOW - idle,
        busy_average=steady,
        stream_average=steady,
        stream_trend=trend,
        decided_at=NOW - 5,
    )
    decision = policy.decide(observe(depth, busy, ready, bpp), spec=pool, state=memory)
    if depth is None:  # the last size, within the bounds (never under the floor)
        kept = min(12, max(min_replicas, last[0]))
        kept_bpp = min(pool.browsers_that_fit, max(pool.fewest_browsers, last[1]))
        assert (decision.replicas, decision.browsers_per_pod) == (kept, kept_bpp)
        return
    assert min_replicas <= decision.replicas <= 12 or decision.replicas == 0 == min_replicas
    assert pool.fewest_browsers <= decision.browsers_per_pod <= pool.browsers_that_fit
    if depth > 0:
        assert decision.replicas >= 1


@pytest.mark.parametrize(
    ("interactive", "target", "need"),
    [
        # 40 waiting, 1 s renders, bulk target 10 s: 4 browsers; interactive jobs drain in 2 s.
        pytest.param(0, 2.0, 4, id="all-bulk"),
        pytest.param(20, 2.0, 12, id="half-interactive"),  # 20/2 + 20/10
        pytest.param(40, 2.0, 20, id="all-interactive"),  # 40/2
        pytest.param(40, None, 4, id="no-interactive-target"),  # one target for both lanes
        pytest.param(80, 2.0, 20, id="lane-count-capped-by-depth"),
    ],
)
def test_each_lane_drains_within_its_own_target(
    interactive: int, target: float | None, need: int
) -> None:
    observation = dataclasses.replace(observe(40, 0, 1, 1), interactive_depth=interactive)
    pool = spec(interactive_target_wait_s=target)
    assert policy.required_browsers(observation, pool) == need


@pytest.mark.parametrize(("ready", "bpp"), [(1, 1), (3, 4), (10, 4)])
def test_blind_need_does_not_depend_on_what_runs(ready: int, bpp: int) -> None:
    """Busy unknown: the need comes from the depth, not from the browsers the policy started."""
    seen = policy.Observation(
        now=NOW, queue_depth=20, ready_replicas=ready, browsers_per_pod=bpp, busy_browsers=None
    )
    assert policy.required_browsers(seen, spec()) == 2  # 20 x 1 s / (10 s + 1 s)


@pytest.mark.parametrize(
    ("jobs_per_browser", "bound"),
    [
        pytest.param(None, 4, id="no-floor"),  # 20 x 1 s / (5 s + 1 s) / 0.85 utilization
        pytest.param(2.0, 12, id="default-floor"),  # 20 / 2 browsers: 3 pods of 4
    ],
)
def test_blind_with_a_constant_depth_stays_bounded(
    jobs_per_browser: float | None, bound: int
) -> None:
    """Renderers' /metrics unreadable (kwok pods, a NetworkPolicy), 20 jobs that never finish:
    feeding each decision back must not climb (it went to 24 browsers, 200 jobs to the maximum)."""
    pool = policy.PoolSpec(
        max_replicas=10, target_wait_s=5.0, default_render_s=1.0, jobs_per_browser=jobs_per_browser
    )
    memory, ready, bpp = policy.State(), 0, 1
    sizes = []
    for tick in range(60):
        seen = policy.Observation(
            now=NOW + 5 * tick,
            queue_depth=20,
            ready_replicas=ready,
            browsers_per_pod=bpp,
            busy_browsers=None,
        )
        decision = policy.decide(seen, pool, memory)
        memory, ready, bpp = decision.state, decision.replicas, decision.browsers_per_pod
        sizes.append(ready * bpp)
        assert decision.blind
    assert max(sizes) <= bound
    assert sizes[-1] == sizes[1]  # no drift once it has seen the depth


def test_blind_uses_the_last_reported_render_time() -> None:
    pool = spec(default_render_s=1.0)
    seen = policy.Observation(
        now=NOW,
        queue_depth=20,
        ready_replicas=1,
        browsers_per_pod=1,
        busy_browsers=1,
        mean_render_s=10.0,
    )
    memory = policy.decide(seen, pool, policy.State()).state
    blind = dataclasses.replace(seen, now=NOW + 5, busy_browsers=None, mean_render_s=None)
    assert policy.decide(blind, pool, memory).required_browsers == 10  # 20 x 10 / (10 + 10)


def test_blind_adds_the_depth_growth() -> None:
    pool = spec()
    seen = policy.Observation(
        now=NOW, queue_depth=20, ready_replicas=1, browsers_per_pod=1, busy_browsers=None
    )
    memory = policy.decide(seen, pool, policy.State()).state
    later = dataclasses.replace(seen, now=NOW + 10, queue_depth=41)  # + 2.1 jobs/s
    # 41 x 1 / 11 = 3.7, + 2.1 x 1 s = 5.8 browsers: growth is a physical rate, not a guess
    assert policy.decide(later, pool, memory).required_browsers == 6


def _scale_down_to(replicas: int) -> policy.Decision:
    return policy.Decision(
        replicas=replicas,
        browsers_per_pod=2,
        reason=policy.Reason.SCALE_DOWN,
        message="scale down",
        required_browsers=2 * replicas,
        saturated=False,
        state=policy.State(replicas=replicas),
    )


@pytest.mark.parametrize(
    ("wanted", "current", "outliving", "kept"),
    [
        pytest.param(1, 4, 2, 2, id="two-long-jobs-keep-two-pods"),
        pytest.param(3, 4, 2, 3, id="the-scale-down-spares-them-already"),
        pytest.param(0, 4, 0, 0, id="nothing-would-be-interrupted"),
        pytest.param(0, 2, 5, 2, id="never-more-than-there-are"),
        pytest.param(5, 4, 3, 5, id="a-scale-up-is-as-is"),
    ],
)
def test_a_scale_down_stops_short_of_the_pods_whose_jobs_a_drain_would_interrupt(
    wanted: int, current: int, outliving: int, kept: int
) -> None:
    held = policy.held_for_jobs(_scale_down_to(wanted), current=current, outliving=outliving)
    assert held.replicas == kept and held.state.replicas == kept
    assert ("kept until their running jobs end" in held.message) == (kept != wanted)


def test_outliving_counts_busy_pods_whose_oldest_job_is_expected_past_the_drain() -> None:
    busy = {"idle": 0, "young": 1, "old": 2, "unknown": None, "silent": 1}
    oldest = {"idle": 500.0, "young": 1.0, "old": 40.0, "unknown": 900.0, "silent": None}
    # young: 2 s mean - 1 s = 1 s left; old: past the mean, 40 s more > 25 s; idle and unknown
    # load and a renderer that does not say its oldest job: nothing known to be lost
    assert policy.outliving(busy, oldest_s_by_pod=oldest, render_s=2.0, drain_s=25.0) == 1
    assert policy.outliving(busy, oldest_s_by_pod=oldest, render_s=2.0, drain_s=60.0) == 0
    # a job younger than a long mean is expected to need the rest of it
    assert policy.outliving({"a": 1}, oldest_s_by_pod={"a": 5.0}, render_s=90.0, drain_s=25) == 1


def _jump_seen(
    depth: int,
    *,
    before: int,
    ready: int,
    busy: int,
    steady: float | None = None,
    render_s: float = 0.5,
    completed: int | None = None,
) -> tuple[policy.Observation, policy.State]:
    """A pool of ``ready`` pods of 4 browsers, ``render_s`` renders, that saw ``before`` queued
    5 s ago; its steady estimate is ``steady`` busy browsers (default: ``busy``)."""
    memory = policy.State(
        replicas=ready,
        browsers_per_pod=4,
        last_work_at=NOW - 5,
        busy_average=float(busy) if steady is None else steady,
        render_s=render_s,
        depth=before,
        decided_at=NOW - 5,
    )
    seen = policy.Observation(
        now=NOW,
        queue_depth=depth,
        ready_replicas=ready,
        browsers_per_pod=4,
        busy_browsers=busy,
        mean_render_s=render_s,
        completed=completed,
    )
    return seen, memory


def test_the_depth_floor_sizes_the_first_sight_of_a_jump_for_the_depth() -> None:
    """5 queued, then 150: a batch or a jump in the stream, which one decision cannot tell. The
    wait target alone asks for the backlog's 5 s drain (14 pods); the default floor asks for a
    browser per 2 queued jobs (75 browsers: all 20 pods) before the stream is measured."""
    assert policy.PoolSpec().jobs_per_browser == 2.0
    seen, memory = _jump_seen(150, before=5, ready=1, busy=4)
    floored = policy.decide(seen, policy.PoolSpec(max_replicas=20), memory)
    unfloored = policy.decide(seen, policy.PoolSpec(max_replicas=20, jobs_per_browser=None), memory)
    assert floored.replicas * floored.browsers_per_pod >= 75, floored.message
    assert floored.replicas > unfloored.replicas, (floored.message, unfloored.message)


def test_the_depth_floor_starts_no_pod_the_ready_ones_drain() -> None:
    """12 queued on one idle pod of 4 browsers: 6 by the floor, but the pod drains them in
    1.5 s, long before a new pod would be ready: no pod is started."""
    seen, memory = _jump_seen(12, before=0, ready=1, busy=0)
    decision = policy.decide(seen, policy.PoolSpec(max_replicas=20), memory)
    assert (decision.replicas, decision.browsers_per_pod) == (1, 4), decision.message


@given(
    depth=st.integers(0, 5000),
    before=st.one_of(st.none(), st.integers(0, 5000)),
    busy=st.one_of(st.none(), st.integers(0, 64)),
    ready=st.integers(0, 20),
    bpp=st.integers(1, 4),
    render_s=st.one_of(st.none(), st.floats(0.02, 60, allow_nan=False)),
    jobs_per_browser=st.floats(0.5, 50, allow_nan=False),
)
def test_the_depth_floor_never_shrinks_a_decision_nor_passes_the_limits(
    depth: int,
    before: int | None,
    busy: int | None,
    ready: int,
    bpp: int,
    render_s: float | None,
    jobs_per_browser: float,
) -> None:
    """Generated observations, blind or not, any render time: the floor only adds (never fewer
    pods than the same decision without it), within the pool's limits."""
    pool = policy.PoolSpec(max_replicas=20, max_browsers_per_pod=4)
    memory = policy.State(
        replicas=ready,
        browsers_per_pod=bpp,
        last_work_at=NOW - 5,
        render_s=render_s,
        depth=before,
        decided_at=None if before is None else NOW - 5,
    )
    seen = policy.Observation(
        now=NOW,
        queue_depth=depth,
        ready_replicas=ready,
        browsers_per_pod=bpp,
        busy_browsers=None if busy is None else min(busy, ready * bpp),
        mean_render_s=render_s,
    )
    floored = policy.decide(
        seen, dataclasses.replace(pool, jobs_per_browser=jobs_per_browser), memory
    )
    plain = policy.decide(seen, dataclasses.replace(pool, jobs_per_browser=None), memory)
    # Pods, not browsers: a shrink to fewer, full pods may run more browsers than it keeps.
    assert floored.replicas >= plain.replicas, (floored.message, plain.message)
    assert floored.replicas <= pool.max_replicas
    assert pool.fewest_browsers <= floored.browsers_per_pod <= pool.browsers_that_fit


@pytest.mark.parametrize(
    ("tolerance", "noise", "expected"),
    [
        pytest.param(None, None, 10, id="default: the need's noise, 6 %"),
        pytest.param(None, 0.0, 11, id="the fixed band, 15 %"),
        pytest.param(0.3, 0.0, 12, id="the band before it, 30 %"),
    ],
)
def test_a_steady_pool_shrinks_to_its_need_plus_its_noise(
    tolerance: float | None, noise: float | None, expected: int
) -> None:
    """12 pods of 4 for a steady 30 busy browsers (36 at the 0.85 utilization): 20 % over the
    need. A stream of 36 browsers varies by about 6 (its square root), so the default band is
    0.35 / 6, 6 %: 10 pods (40 browsers for 36 + 3). The fixed band (0.15) lets it go to 11 pods
    (44 browsers for 36 + 6); the band before that (0.3) kept all 12 (36 + 11 = 47). At 2 s
    renders the band was most of what a ramp or a cliff cost us over KEDA
    (docs/comparison/keda.md, "The render time" and "The band and the noise")."""
    pool = policy.PoolSpec()
    if tolerance is not None:
        pool = dataclasses.replace(pool, tolerance=tolerance)
    if noise is not None:
        pool = dataclasses.replace(pool, tolerance_noise=noise)
    seen = policy.Observation(
        now=NOW, queue_depth=30, ready_replicas=12, browsers_per_pod=4, busy_browsers=30
    )
    decision = policy.decide(seen, spec=pool, state=state(12, 4))
    assert (decision.replicas, decision.browsers_per_pod) == (expected, 4)


def test_the_band_is_the_fixed_one_while_a_backlog_waits_and_for_small_pools() -> None:
    """The noise band narrows only a steady stream's margin: while a backlog waits (here 20
    jobs of 1 s beyond the busy browsers, more than the 5 s accepted wait) the band is the
    fixed 15 % and keeps pods the noise band would let go; a small pool's noise is over 15 %,
    so it keeps the fixed band too."""
    pool = policy.PoolSpec()
    for need, backlog, band in ((36, False, 0.35 / 6), (36, True, 0.15), (4, False, 0.15)):
        assert policy.noise_band(pool, need=need, backlog=backlog) == pytest.approx(band)
    assert policy.noise_band(pool, need=10_000, backlog=False) == policy.TOLERANCE_FLOOR
    seen = policy.Observation(
        now=NOW,
        queue_depth=50,
        ready_replicas=12,
        browsers_per_pod=4,
        busy_browsers=30,
        mean_render_s=1.0,
    )
    quiet = dataclasses.replace(seen, queue_depth=30)
    waiting = policy.decide(seen, spec=pool, state=state(12, 4))
    steady = policy.decide(quiet, spec=pool, state=state(12, 4))
    assert waiting.replicas > steady.replicas, (waiting.message, steady.message)


def _overrun(busy: int) -> policy.Decision:
    """Case 107 of the shape suite at t = 782 s: a batch landing at ~40 jobs a second with 3 %
    of its renders taking 20-60 s. 9 ready pods of 4, ``busy`` of their 36 browsers busy, the
    depth 37 -> 72 in 5 s, and a steady estimate of 21 browsers from renders of 0.56 s, the mean
    of the renders that ended (the long ones still run)."""
    seen, memory = _jump_seen(
        72, before=37, ready=9, busy=busy, steady=21.0, render_s=0.56, completed=168
    )
    return policy.decide(seen, policy.PoolSpec(max_replicas=20), memory)


def test_ready_pods_all_busy_while_the_backlog_grows_have_no_spare_to_drain_it() -> None:
    """By the steady estimate the 9 ready pods have 15 browsers to spare for the backlog, so no
    pod would be started; but every browser is busy and the depth grew: the stream takes them
    all, and pods are started for the backlog. With one browser idle the spare is counted."""
    overrun = _overrun(36)
    assert overrun.replicas > 9, overrun.message
    assert overrun.reason is policy.Reason.SCALE_UP
    spare = _overrun(35)
    assert (spare.replicas, spare.browsers_per_pod) == (9, 4), spare.message


# month-end-dense (seed 2, loop phases 2000) between two batch runs: what the operator read every
# 5 s from 2 ready pods of 4 browsers, a stream of ~5.6 jobs/s of ~0.57 s renders (3.2 browsers
# busy on average): (depth, busy browsers, renders completed since the last read, their mean).
_BETWEEN_BATCHES = [
    (1, 1, 27, 0.60),
    (3, 3, 29, 0.70),
    (1, 1, 31, 0.53),
    (3, 3, 18, 0.56),
    (5, 5, 28, 0.52),
    (2, 2, 33, 0.55),
    (5, 5, 27, 0.58),
    (3, 3, 33, 0.65),
    (3, 3, 19, 0.53),
]


def test_a_steady_stream_read_low_by_its_busy_browsers_keeps_the_pods_it_needs() -> None:
    """The steady estimate takes the lesser of two noisy readings (busy browsers, completions)
    and reads ~2.4 browsers for this stream of ~3.2: it let one of the two pods go (4 browsers
    for 3.2 busy and no band), and asked for it again 5 s later, a pod start of waiting when the
    next batch run came. The stream counted both ways (completions plus the depth's change)
    holds the second pod: a shrink keeps that need plus the band (3.2 / 0.85 x 1.15 > 4)."""
    pool = policy.PoolSpec()
    memory = policy.State(replicas=2, browsers_per_pod=4, decided_at=NOW - 5, depth=3)
    sizes = []
    for tick in range(36):
        depth, busy, completed, render_s = _BETWEEN_BATCHES[tick % len(_BETWEEN_BATCHES)]
        seen = policy.Observation(
            now=NOW + 5 * tick,
            queue_depth=depth,
            ready_replicas=2,
            browsers_per_pod=4,
            busy_browsers=busy,
            mean_render_s=render_s,
            completed=completed,
        )
        decision = policy.decide(seen, pool, memory)
        memory = decision.state
        sizes.append((decision.replicas, decision.browsers_per_pod))
    assert set(sizes) == {(2, 4)}, sizes
    assert memory.stream_average is not None and 3.0 < memory.stream_average < 3.6
    assert memory.busy_average is not None and memory.busy_average < 3.0  # the low reading


@given(
    depth=st.integers(0, 500),
    busy=st.one_of(st.none(), st.integers(0, 60)),
    ready=st.integers(0, 16),
    last=st.tuples(st.integers(0, 16), st.integers(1, 8)),
    steady=st.one_of(st.none(), st.floats(0, 60)),
    stream=st.floats(0, 100),
    min_replicas=st.integers(0, 3),
    idle=st.floats(0, 1000),
)
def test_the_streams_floor_only_stops_shrinks(
    depth: int,
    busy: int | None,
    ready: int,
    last: tuple[int, int],
    steady: float | None,
    stream: float,
    min_replicas: int,
    idle: float,
) -> None:
    """Whatever the stream's average says, a decision with it is the one without it, or a shrink
    stopped short of it (never more pods than the pool runs or the need asks, never fewer than
    without the floor); while blind the floor plays no part. Generated: any depth, busy
    browsers, pool, memory and stream average (no completions read at this tick, so the average
    is the one given)."""
    pool = policy.PoolSpec(min_replicas=min_replicas, max_replicas=16)
    seen = observe(depth, busy, ready, last[1])
    memory = state(*last, last_work_at=NOW - idle, busy_average=steady, decided_at=NOW - 5)
    without = policy.decide(seen, spec=pool, state=memory)
    floored = dataclasses.replace(memory, stream_average=stream)
    within = policy.decide(seen, spec=pool, state=floored)
    assert within.state.stream_average == stream  # held: nothing to sample
    if busy is None:
        assert (within.replicas, within.browsers_per_pod) == (
            without.replicas,
            without.browsers_per_pod,
        )
        return
    assert without.replicas <= within.replicas <= max(without.replicas, last[0])
    assert pool.fewest_browsers <= within.browsers_per_pod <= pool.browsers_that_fit


def _stream(
    busy: float, *, now: float, render_s: float = 2.0, waiting: int = 0
) -> policy.Observation:
    """A stream of ``busy`` browsers' worth read at ``now``: as many queued (in flight) plus
    ``waiting``, and the renders a 5 s tick completes at that concurrency."""
    return policy.Observation(
        now=now,
        queue_depth=round(busy) + waiting,
        ready_replicas=20,
        browsers_per_pod=4,
        busy_browsers=round(busy),
        mean_render_s=render_s,
        completed=round(busy / render_s * 5),
    )


def _ride(pool: policy.PoolSpec, levels: list[float], **waiting: int) -> list[policy.Decision]:
    """Decide every 5 s on a stream at ``levels``; ``waiting`` maps a tick's index (as a
    string, ``t7=30``) to jobs waiting then."""
    memory = policy.State(replicas=20, browsers_per_pod=4, last_work_at=NOW)
    decisions = []
    for tick, busy in enumerate(levels):
        seen = _stream(busy, now=NOW + 5 * tick, waiting=waiting.get(f"t{tick}", 0))
        decisions.append(policy.decide(seen, pool, memory))
        memory = decisions[-1].state
    return decisions


def test_a_rising_stream_is_sized_where_it_will_be_when_a_new_pod_is_ready() -> None:
    """A stream rising by 0.1 browsers a second (0.5 a tick), never backlogged: its trend is read
    from the stream's average between decisions, and the steady need (what the window holds)
    moves by it over a pod's start (20 s: ~2 browsers, ~2.4 at a utilization of 0.85); off
    (``stream_trend_s`` 0), it is the moving average, ~20 s behind the stream. Falling, the
    steady need moves down by as much."""

    def steady(decision: policy.Decision) -> int:
        return decision.state.window[-1][1]  # the newest entry: this decision's steady need

    rising = [10 + 0.5 * tick for tick in range(60)]
    ahead = _ride(policy.PoolSpec(), rising)
    behind = _ride(policy.PoolSpec(stream_trend_s=0), rising)
    trend = ahead[-1].state.stream_trend
    assert trend is not None and 0.07 < trend < 0.13
    assert behind[-1].state.stream_trend is None
    assert 2 <= steady(ahead[-1]) - steady(behind[-1]) <= 4
    falling = _ride(policy.PoolSpec(), rising[::-1])
    without = _ride(policy.PoolSpec(stream_trend_s=0), rising[::-1])
    trend = falling[-1].state.stream_trend
    assert trend is not None and -0.13 < trend < -0.07
    assert 2 <= steady(without[-1]) - steady(falling[-1]) <= 4


@pytest.mark.parametrize("hold_s", [5.0, 0.0], ids=["drained-hold", "no-hold"])
def test_a_backlog_and_the_decision_after_it_do_not_move_the_streams_trend(hold_s: float) -> None:
    """A backlog's drain is not the stream's rise: the trend is held at a decision with a backlog
    waiting and at the one after it (the stream's average sampled again there jumps from the
    value held through the backlog), and sampled again from the next."""
    levels = [10.0] * 8 + [30.0] * 4 + [10.0] * 4
    pool = policy.PoolSpec(drained_backlog_hold_s=hold_s)
    decisions = _ride(pool, levels, t8=60, t9=60, t10=60, t11=60)
    trends = [decision.state.stream_trend for decision in decisions]
    assert trends[7] is not None and abs(trends[7]) < 0.05
    assert trends[8:13] == [trends[7]] * 5  # held: backlogged ticks, then the tick after them
    assert trends[13] != trends[7]  # sampled again
    restored = policy.State.from_dict(json.loads(json.dumps(decisions[7].state.to_dict())))
    assert restored.stream_trend == trends[7]
