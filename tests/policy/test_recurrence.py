"""Drained backlogs: a drained backlog's ready browsers are held one tick
(``PoolSpec.drained_backlog_hold_s``), and for ``recurring_backlog_hold_s`` when backlogs recur,
only then (``reportfarm.recurrence``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reportfarm import policy, recurrence
from tests.policy import pools

# 1 s renders, a 10 s target, pods ready at once, no steady window: a backlog of 200 jobs needs
# 20 browsers (5 pods of 4), and only the hold can keep them once it drained. The tick every
# drained backlog gets is off unless a test sets it: the recurring hold is what most test here.
POOL: dict[str, Any] = {
    **{key: value for key, value in pools.EXACT.items() if key not in ("full_pools", "tolerance")},
    "scale_down_stabilization_s": 0.0,
    "drained_backlog_hold_s": 0.0,
}
BATCH = ((200, 4), (120, 20), (20, 20), (0, 0))
"""(depth, busy) at four ticks 5 s apart: a batch lands, 5 pods drain it, it is gone."""
IDLE = ((0, 0),)


def pool(**changes: Any) -> policy.PoolSpec:
    return policy.PoolSpec(**{**POOL, **changes})


def replay(
    spec: policy.PoolSpec,
    ticks: list[tuple[int, int]],
    *,
    start: float = 1000.0,
    ready: int | None = None,
) -> list[policy.Decision]:
    """Decide every 5 s on (depth, busy); the pods the last decision asked are ready (at most
    ``ready`` of them when given: the others are still starting)."""
    state, decisions = policy.State(replicas=1, browsers_per_pod=4), []
    for step, (depth, busy) in enumerate(ticks):
        asked = state.replicas or 0
        observation = policy.Observation(
            now=start + 5 * step,
            queue_depth=depth,
            ready_replicas=asked if ready is None else min(asked, ready),
            browsers_per_pod=state.browsers_per_pod or 1,
            busy_browsers=busy,
        )
        decision = policy.decide(observation, spec, state)
        decisions.append(decision)
        state = decision.state
    return decisions


def batches(gap_ticks: int, *, after: int) -> list[tuple[int, int]]:
    """Two batches ``gap_ticks`` ticks apart (idle in between), then ``after`` idle ticks."""
    return [*BATCH, *IDLE * gap_ticks, *BATCH, *IDLE * after]


def test_a_recurring_backlog_is_held_for_the_hold_time() -> None:
    decisions = replay(pool(recurring_backlog_hold_s=60.0), batches(8, after=14))
    second = decisions[len(BATCH) + 8 :]
    assert [d.replicas for d in second[:4]] == [5, 5, 5, 5]  # 5 pods drain it; kept when gone
    drained_at = second[2].state.decided_at
    held = [d for d in second[3:] if d.replicas == 5]
    assert held and all(d.reason is policy.Reason.STABILIZING for d in held)
    assert all(d.state.decided_at <= drained_at + 60.0 for d in held)  # type: ignore[operator]
    assert "backlogs recur" in held[0].message


def test_the_hold_expires() -> None:
    decisions = replay(pool(recurring_backlog_hold_s=30.0), batches(8, after=10))
    holds = [d.state.hold for d in decisions if d.state.hold is not None]
    assert holds and holds[0][1] >= 20  # the second batch's 5 pods were held...
    until = holds[0][0]
    drained = [d for d in decisions if d.state.hold == holds[0]]
    assert len(drained) >= 4 and all(d.replicas == 5 for d in drained)
    late = [d for d in decisions if d.state.decided_at is not None and d.state.decided_at > until]
    assert late and all(d.replicas == 1 for d in late)  # ...and let go when the hold ended
    assert late[-1].reason is policy.Reason.WAITING_FOR_IDLE
    assert late[-1].state.hold is None


def test_a_lone_batch_is_not_held() -> None:
    decisions = replay(pool(recurring_backlog_hold_s=60.0), [*BATCH, *IDLE * 5])
    assert decisions[0].replicas >= 5
    assert [d.replicas for d in decisions[3:]] == [1] * 6  # gone once drained
    assert all(d.state.hold is None for d in decisions)


def test_backlogs_further_apart_than_the_window_do_not_recur() -> None:
    spec = pool(recurring_backlog_hold_s=60.0, recurring_backlog_within_s=30.0)
    decisions = replay(spec, batches(8, after=3))  # the second begins 60 s after the first
    assert decisions[-1].replicas == 1
    assert all(d.state.hold is None for d in decisions)


def test_the_knob_at_zero_changes_nothing() -> None:
    script = batches(8, after=14)
    off = replay(pool(recurring_backlog_hold_s=0.0), script)
    assert [d.replicas for d in off[len(BATCH) + 8 :][3:]] == [1] * 15  # gone once drained
    assert all(d.state.hold is None and not d.state.backlogs for d in off)


DRAINING = [(200, 4), (120, 20), (4, 4)]
"""A batch lands, 5 pods drain it, and at the third tick 4 jobs are left, all running."""


def test_the_default_keeps_a_drained_backlogs_ready_pods_one_tick() -> None:
    """The default (5 s, one tick): the first reading of a drained backlog keeps the 5 pods that
    drained it, the next lets them go; without the tick they go at the first reading."""
    default = policy.PoolSpec().drained_backlog_hold_s
    assert default == 5.0
    held = replay(pool(drained_backlog_hold_s=default), [*DRAINING, *IDLE * 3])
    assert [d.replicas for d in held] == [6, 5, 5, 1, 1, 1]
    assert held[2].reason is policy.Reason.STABILIZING
    assert "just drained" in held[2].message and "recur" not in held[2].message
    off = replay(pool(drained_backlog_hold_s=0.0), [*DRAINING, *IDLE * 3])
    assert [d.replicas for d in off] == [6, 5, 2, 1, 1, 1]


def test_a_second_part_a_tick_later_finds_the_pods_warm() -> None:
    """A batch submitted in two parts, drained once in between: the tick keeps the 5 pods for
    the second part, where without it the pool shrinks to 2 and starts 3 pods again."""
    script = [*DRAINING, (150, 4), (100, 20), (4, 4), *IDLE * 2]
    held = replay(pool(drained_backlog_hold_s=5.0), script)
    assert [d.replicas for d in held] == [6, 5, 5, 5, 5, 5, 1, 1]
    off = replay(pool(drained_backlog_hold_s=0.0), script)
    assert [d.replicas for d in off] == [6, 5, 2, 5, 5, 2, 1, 1]


def test_pods_still_starting_when_it_drains_are_not_held() -> None:
    """Only the ready pods' browsers are held: 3 of the 6 pods are ready, so the tick keeps 3
    (their start is paid) and lets the 3 still starting go."""
    decisions = replay(pool(drained_backlog_hold_s=5.0), [*DRAINING, *IDLE * 2], ready=3)
    assert [d.replicas for d in decisions] == [6, 6, 3, 1, 1]
    assert "held a tick" in decisions[2].message
    off = replay(pool(drained_backlog_hold_s=0.0), [*DRAINING, *IDLE * 2], ready=3)
    assert [d.replicas for d in off] == [6, 6, 2, 1, 1]


@settings(max_examples=80, deadline=None)
@given(
    ticks=st.lists(
        st.tuples(st.integers(0, 400), st.integers(0, 40), st.integers(0, 10)),
        min_size=2,
        max_size=40,
    ),
)
def test_the_tick_keeps_only_ready_pods(ticks: list[tuple[int, int, int]]) -> None:
    """Any trace, any readiness: the default's tick never runs more pods than the decision
    without its memory would, or than were ready."""
    spec = dataclasses.replace(policy.PoolSpec(), pod_start_s=0.0)
    state = policy.State(replicas=1, browsers_per_pod=4)
    for step, (depth, busy, ready) in enumerate(ticks):
        observation = policy.Observation(
            now=1000.0 + 5 * step,
            queue_depth=depth,
            ready_replicas=min(ready, state.replicas or 0),
            browsers_per_pod=4,
            busy_browsers=busy,
        )
        with_hold = policy.decide(observation, spec, state)
        without = policy.decide(observation, spec, dataclasses.replace(state, hold=None))
        assert without.replicas <= with_hold.replicas
        assert with_hold.replicas <= max(without.replicas, observation.ready_replicas)
        state = with_hold.state


def test_the_state_keeps_the_hold_through_the_status() -> None:
    decisions = replay(pool(recurring_backlog_hold_s=60.0), batches(8, after=1))
    state = decisions[-1].state
    assert state.hold is not None and state.backlogs
    assert policy.State.from_dict(state.to_dict()) == state


@settings(max_examples=60, deadline=None)
@given(
    ticks=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 40)), min_size=2, max_size=40),
    hold=st.floats(5.0, 300.0),
)
def test_the_hold_only_keeps_pods_it_never_starts_one(
    ticks: list[tuple[int, int]], hold: float
) -> None:
    """Any trace: with the hold, each decision runs at least the pods it would without the hold's
    memory, and more only up to the pods the pool already ran."""
    spec = pool(recurring_backlog_hold_s=hold)
    state = policy.State(replicas=1, browsers_per_pod=4)
    for step, (depth, busy) in enumerate(ticks):
        observation = policy.Observation(
            now=1000.0 + 5 * step,
            queue_depth=depth,
            ready_replicas=state.replicas or 0,
            browsers_per_pod=4,
            busy_browsers=busy,
        )
        with_hold = policy.decide(observation, spec, state)
        forgotten = dataclasses.replace(state, hold=None)
        without = policy.decide(observation, spec, forgotten)
        assert with_hold.replicas >= without.replicas
        assert with_hold.replicas <= max(without.replicas, state.replicas or 0)
        state = with_hold.state


def test_the_hold_never_asks_for_more_than_the_pool_runs() -> None:
    memory = policy.State(hold=(1060.0, 20))
    assert recurrence.held(memory, now=1000.0, capacity=8) == 8
    assert recurrence.held(memory, now=1000.0, capacity=40) == 20
    assert recurrence.held(memory, now=1060.0, capacity=40) == 0
