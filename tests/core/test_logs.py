"""The cadence of a repeated warning: a flood is cut, a problem that goes on is never silent."""

from __future__ import annotations

from reportfarm import logs


def test_a_repeated_warning_is_logged_at_1_10_100_then_every_thousandth() -> None:
    logged = [count for count in range(0, 5001) if logs.worth_logging(count)]
    assert logged == [1, 10, 100, 1000, 2000, 3000, 4000, 5000]
