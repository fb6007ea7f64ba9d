"""Exponential backoff with full jitter, in one small place."""

from __future__ import annotations

import dataclasses
import random


def compute_backoff(
    attempts: int,
    *,
    factor: float = 1.0,
    max_backoff: float = 60.0,
    jitter: bool = True,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before attempt ``attempts + 1`` (attempts counts from 1)."""
    ceiling = min(max_backoff, factor * (2 ** max(0, attempts - 1)))
    if not jitter:
        return ceiling
    return (rng or random).uniform(ceiling / 2, ceiling)


IDLE_FIRST_S = 0.05
"""The first idle pause of a receive loop (then doubling to ``Pacing.poll_max_s``)."""


@dataclasses.dataclass
class Pacing:
    """How a receive loop (the renderer's worker, the webhook dispatcher) waits between receives:
    after failed ones, backoff (from 0.5 s, doubling to 30 s, jittered); after empty ones, an idle
    pause doubling from 50 ms to ``poll_max_s``; after a receive that filled what it asked for,
    none; after one that gave fewer (the queue had no more visible messages: Azure returns the
    visible ones when fewer than asked), the first idle pause, not an empty receive at once."""

    poll_max_s: float
    """The longest idle pause: how late a message may be noticed on a quiet queue."""
    failures: int = 0
    """Failed receives in a row."""
    idle_s: float = 0.0

    def failed(self) -> int:
        """Count a failed receive; return how many failed in a row."""
        self.failures += 1
        return self.failures

    def received(self, count: int, *, asked: int | None = None) -> int:
        """Count a receive that gave ``count`` messages of the ``asked`` (None: as many as it
        could take); return the failures it ends."""
        ended, self.failures = self.failures, 0
        if not count:
            self.idle_s = min(self.poll_max_s, max(IDLE_FIRST_S, self.idle_s * 2))
        elif asked is not None and count < asked:  # the queue is drained for now
            self.idle_s = min(self.poll_max_s, IDLE_FIRST_S)
        else:
            self.idle_s = 0.0
        return ended

    def pause_s(self) -> float:
        """Seconds to wait before the next receive."""
        if self.failures:
            return compute_backoff(self.failures, factor=0.5, max_backoff=30.0)
        return self.idle_s
