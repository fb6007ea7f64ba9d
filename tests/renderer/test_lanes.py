"""The lanes' share of free browsers, with a fake clock: pure bookkeeping."""

from __future__ import annotations

import pytest
from reportfarm_renderer.lanes import LaneShare


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bulk_takes_everything_while_no_interactive_job_is_seen() -> None:
    share = LaneShare(weight=3, hold_s=2.0, clock=Clock())
    assert share.bulk_first(8) == 0  # interactive is asked first...
    assert share.bulk_after(8) == 8  # ...and bulk takes what it leaves


def test_bulk_gets_one_browser_per_weight_interactive_jobs_while_both_have_work() -> None:
    clock = Clock()
    share = LaneShare(weight=3, hold_s=2.0, clock=clock)
    granted = {"interactive": 0, "bulk": 0}
    share.interactive_started(1)
    for _ in range(120):  # one free browser at a time, both lanes always have work
        clock.now += 0.1
        if share.bulk_first(1):  # the worker asks bulk first for its earned share
            share.bulk_started(1)
            granted["bulk"] += 1
        else:
            share.interactive_started(1)
            granted["interactive"] += 1
    assert granted["bulk"] > 0  # never starved
    assert granted["interactive"] == pytest.approx(3 * granted["bulk"], abs=3)


def test_a_free_browser_is_held_for_interactive_while_its_traffic_is_live() -> None:
    clock = Clock()
    share = LaneShare(weight=3, hold_s=2.0, clock=clock)
    share.interactive_started(1)
    share.bulk_started(share.bulk_first(1))  # bulk spends its credit
    clock.now += 0.5
    assert share.bulk_first(1) == 0
    assert share.bulk_after(1) == 0  # interactive may come back any moment
    clock.now += 2.0
    assert share.bulk_after(4) == 4  # traffic gone: bulk takes everything again


@pytest.mark.parametrize("weight", [0, -1])
def test_weight_must_be_positive(weight: int) -> None:
    with pytest.raises(ValueError):
        LaneShare(weight=weight)


def test_an_empty_bulk_lane_is_not_asked_first_again_until_its_recheck() -> None:
    clock = Clock()
    share = LaneShare(weight=3, hold_s=2.0, clock=clock)  # recheck_s: 1 s by default
    share.interactive_started(1)
    assert share.bulk_first(2) == 1  # its credit: bulk is asked first...
    share.bulk_started(0)  # ...and was empty
    asked = 0
    for _ in range(9):  # interactive jobs keep coming, 0.1 s apart
        clock.now += 0.1
        share.interactive_started(1)
        asked += share.bulk_first(2) > 0
    assert asked == 0  # not once within the recheck (before: at every interactive job)
    clock.now += 0.2
    assert share.bulk_first(2) == 2  # the recheck is due: its credit grew meanwhile
    share.bulk_started(2)  # bulk had work: it is asked again as its credit allows
    clock.now += 0.1
    share.interactive_started(3)
    assert share.bulk_first(2) > 0
