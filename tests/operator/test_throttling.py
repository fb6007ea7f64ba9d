"""Repeated failures in the operator's log: the first in full, then a count, not one per tick."""

from __future__ import annotations

import logging

import pytest
from reportfarm_operator import throttling


def test_a_repeated_failure_is_logged_once_then_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("test.throttling")
    throttle = throttling.LogThrottle(logger, every=3600)
    caplog.set_level(logging.ERROR, logger="test.throttling")
    try:
        raise ValueError("browser.cpu is 0")
    except ValueError as error:
        logged = [throttle.failure("ns/pool", "tick failed", error=error) for _ in range(50)]
    assert logged == [True] + [False] * 49
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is not None
    # Another pool, or another failure, is its own line.
    assert throttle.failure("ns/other", "tick failed")
    assert throttle.failure("ns/pool", "another failure")
    # Once the pool works again, its next failure is logged at once.
    throttle.success("ns/pool")
    assert throttle.failure("ns/pool", "tick failed")


def test_after_the_interval_a_summary_counts_the_repeats(caplog: pytest.LogCaptureFixture) -> None:
    throttle = throttling.LogThrottle(logging.getLogger("test.throttling"), every=0.0)
    caplog.set_level(logging.ERROR, logger="test.throttling")
    throttle.failure("ns/pool", "tick failed")
    assert throttle.failure("ns/pool", "tick failed")
    assert "again, 1 more time(s)" in caplog.records[-1].getMessage()


def test_failures_that_stopped_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys of pods long gone do not pile up; a failure still repeating is kept."""
    clock = [1000.0]
    monkeypatch.setattr(throttling.time, "monotonic", lambda: clock[0])
    throttle = throttling.LogThrottle(logging.getLogger("test.throttling"), every=300.0)
    for index in range(100):
        throttle.failure(f"ns/pod-{index}", "resize failed")
    clock[0] += 200.0
    assert not throttle.failure("ns/pod-0", "resize failed")  # still counted, not logged
    clock[0] += 3601.0
    throttle.failure("ns/still", "resize failed")
    assert len(throttle._seen) == 1
