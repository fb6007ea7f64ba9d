"""Exponential backoff with full jitter, in one small place."""

from __future__ import annotations

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
