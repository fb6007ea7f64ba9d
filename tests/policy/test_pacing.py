"""The receive loops' pacing (the renderer's worker and the webhook dispatcher share it)."""

from __future__ import annotations

from reportfarm import backoff


def test_idle_pauses_double_to_the_ceiling_and_work_ends_them() -> None:
    pacing = backoff.Pacing(poll_max_s=0.3)
    pauses = []
    for count in (0, 0, 0, 0, 0, 2, 0):
        pacing.received(count)
        pauses.append(pacing.pause_s())
    assert pauses == [0.05, 0.1, 0.2, 0.3, 0.3, 0.0, 0.05]


def test_failures_back_off_and_a_good_receive_ends_them() -> None:
    pacing = backoff.Pacing(poll_max_s=1.0)
    ceilings = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    for failures, ceiling in enumerate(ceilings, 1):
        assert pacing.failed() == failures
        assert ceiling / 2 <= pacing.pause_s() <= ceiling  # jittered: one in [ceiling/2, ceiling]
    assert pacing.received(1) == len(ceilings)
    assert (pacing.failures, pacing.pause_s()) == (0, 0.0)


def test_a_receive_that_gave_fewer_than_it_asked_pauses_as_an_idle_one_begins() -> None:
    # Azure returns the visible messages when fewer than asked: the queue is drained for now, so
    # the loop does not ask again at once (an empty receive each job at 2 concurrent requests).
    pacing = backoff.Pacing(poll_max_s=1.0)
    pacing.received(3, asked=3)
    assert pacing.pause_s() == 0.0  # full: more may wait
    pacing.received(1, asked=3)
    assert pacing.pause_s() == backoff.IDLE_FIRST_S
    pacing.received(0, asked=3)
    assert pacing.pause_s() == 2 * backoff.IDLE_FIRST_S  # then empty ones double it, as before
    pacing.received(2)  # without ``asked``: as many as the loop could take
    assert pacing.pause_s() == 0.0
