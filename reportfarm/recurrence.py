"""
Drained backlogs: keep their ready browsers for a moment (``PoolSpec.drained_backlog_hold_s``),
and for a while when backlogs come back (``PoolSpec.recurring_backlog_hold_s``).

The policy sizes a backlog to drain within the accepted wait and lets its pods go once it is
gone: a drained backlog is not a rate. That is right for a lone batch and wrong for batch runs
that land every few minutes, where each batch waits a pod start that a warm pool would have
saved. KEDA's scale-down window keeps ``depth / queueLength`` pods after every backlog, by
accident; here a drained backlog's browsers are kept only when another backlog began within
``recurring_backlog_within_s`` before it, for ``recurring_backlog_hold_s``, and never more than
the pool's ready pods run at the decision (the hold keeps pods, it never starts one).

Every drained backlog's ready browsers are also kept ``drained_backlog_hold_s`` (5 s, one
operator tick): a depth read drained once may be the gap between two parts of a batch (two runs
submitted back to back), and a ready pod's start is already paid, where letting it go and
starting it again costs a pod start of waiting. Pods still starting when it drains are not held
(their start is not paid yet): a hold caps at the ready pods' browsers.

Pure, like the policy: :func:`track` takes the memory (``policy.State``) and one decision's
readings and gives the memory back; :func:`held` is the browsers the hold asks for now.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reportfarm.policy import PoolSpec, State


def track(
    state: State, *, spec: PoolSpec, now: float, backlogged: bool | None, capacity: int
) -> State:
    """
    ``state`` with the backlogs' memory moved to ``now``.

    ``backlogged``: a backlog waits now (None: unknown, the busy browsers could not be read:
    nothing changes). ``capacity``: the browsers the pool runs now (its last decision's). A backlog
    begins when one waits and none did at the last decision; while it waits, its peak is the most
    browsers the pool ran; when it drains and another backlog began within
    ``recurring_backlog_within_s`` before it, its peak is held until ``now + hold``; when it
    drains alone, until ``now + drained_backlog_hold_s``.
    """
    recurring = spec.recurring_backlog_hold_s > 0
    if backlogged is None:
        return state
    if not recurring and spec.drained_backlog_hold_s <= 0:  # no hold: whether one waited only
        return dataclasses.replace(state, backlogged=backlogged)
    hold = state.hold if state.hold is not None and state.hold[0] > now else None
    if backlogged:
        starts = state.backlogs
        peak = max(state.backlog_peak, capacity)
        if not state.backlogged:  # a new backlog: the recent ones are those that began lately
            if recurring:
                recent = (at for at in starts if at >= now - spec.recurring_backlog_within_s)
                starts = (*recent, now)
            peak = capacity
        return dataclasses.replace(
            state, backlogs=starts, backlogged=True, backlog_peak=peak, hold=hold
        )
    if state.backlogged:  # a backlog just drained
        peak = max(state.backlog_peak, capacity)
        if recurring and len(state.backlogs) >= 2:  # ... and backlogs recur
            hold = (now + spec.recurring_backlog_hold_s, peak)
        elif spec.drained_backlog_hold_s > 0:
            until = now + spec.drained_backlog_hold_s  # a longer hold still running is kept
            hold = (max(until, hold[0]) if hold else until, peak)
    return dataclasses.replace(state, backlogged=False, hold=hold)


def recurs(state: State, *, spec: PoolSpec) -> bool:
    """Whether the hold is a recurring backlog's (not the one tick every drained backlog gets)."""
    return spec.recurring_backlog_hold_s > 0 and len(state.backlogs) >= 2


def held(state: State, *, now: float, capacity: int) -> int:
    """The browsers a drained backlog still holds at ``now`` (0: no hold), at most ``capacity``
    (the ready pods' browsers): the hold keeps browsers, it never asks for more."""
    if state.hold is None or state.hold[0] <= now:
        return 0
    return min(state.hold[1], capacity)
