"""Quantiles of measured times, one convention for the whole farm.

``q`` is a fraction (0.95 for p95); between two ranks the value is interpolated linearly (numpy's
default, ``statistics.quantiles(method="inclusive")``), so a p95 of two samples is not just the
larger one; no values give None, and a caller that wants a number says which.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def quantile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-quantile (0 <= q <= 1) of unsorted values; None when there are none."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is not between 0 and 1")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
