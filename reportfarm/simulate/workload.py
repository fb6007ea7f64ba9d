"""
Jobs: when each one arrives and how long its render takes.

Both strategies replay the same jobs: the arrival instants (spread uniformly inside their second)
and the render times (lognormal: most reports render in about half a second, some take seconds)
are drawn once from a seeded RNG.
"""

from __future__ import annotations

import dataclasses
import math
import random

from reportfarm.simulate import traces


@dataclasses.dataclass(frozen=True, kw_only=True)
class RenderTimes:
    """The lognormal render-time distribution of one job in one browser."""

    median_s: float = 0.5
    """Median render time (HTML in, PDF out, in a warm browser page)."""
    sigma: float = 0.6
    """Lognormal shape: 0.6 gives a mean ~1.2x the median and a p99 ~4x the median."""
    max_s: float = 60.0
    """Renders are cut at this time (the renderer's job timeout)."""
    tail_share: float = 0.0
    """A heavy tail: this share of the jobs takes ``tail_s`` (uniform) instead."""
    tail_s: tuple[float, float] = (20.0, 60.0)
    """The heavy tail's render times."""

    @property
    def mean_s(self) -> float:
        body = min(self.max_s, self.median_s * math.exp(self.sigma**2 / 2))
        return (1 - self.tail_share) * body + self.tail_share * sum(self.tail_s) / 2

    def draw(self, rng: random.Random) -> float:
        """One job's render time (no extra draw without a tail: old seeds replay as before)."""
        if self.tail_share > 0 and rng.random() < self.tail_share:
            return min(self.max_s, rng.uniform(*self.tail_s))
        return min(self.max_s, rng.lognormvariate(math.log(self.median_s), self.sigma))


class Job:
    """One job's life: mutable, one copy per strategy (see ``make_jobs``)."""

    __slots__ = ("arrival", "interruptions", "render_s", "start", "visible_at")

    def __init__(self, *, arrival: float, render_s: float) -> None:
        self.arrival = arrival
        self.render_s = render_s
        self.visible_at = arrival
        """When the message is (again) visible in the queue."""
        self.start: float | None = None
        """Start of the current (or the completed) render attempt; None while queued."""
        self.interruptions = 0

    @property
    def wait_s(self) -> float:
        """Arrival to the start of the render that completed: lost attempts count as waiting."""
        assert self.start is not None
        return self.start - self.arrival


def make_jobs(trace: traces.Trace, *, render: RenderTimes, seed: int) -> list[list[Job]]:
    """Fresh jobs per second of the trace (the same for the same seed)."""
    rng = random.Random(f"jobs:{trace.name}:{seed}")
    per_second: list[list[Job]] = []
    for second, count in enumerate(trace.arrivals):
        arrivals = sorted(second + rng.random() for _ in range(count))
        per_second.append([Job(arrival=at, render_s=render.draw(rng)) for at in arrivals])
    return per_second
