"""
Arrival traces: how many jobs arrive in each second.

Built-in traces are generated from a seeded RNG (Poisson arrivals, batch submissions), so a run is
reproducible. A user trace is a CSV file with a header and two columns::

    t_s,arrivals
    0,3
    1,0
    2,120

``t_s`` is the second (an integer offset from the start, >= 0; fractions are floored) and
``arrivals`` the number of jobs submitted during ``[t_s, t_s + 1)``. Seconds not listed have no
arrivals; repeated seconds add up; rows may come in any order. Lines starting with ``#`` are
comments.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import pathlib
import random
from collections.abc import Callable


@dataclasses.dataclass(frozen=True, kw_only=True)
class Trace:
    """Jobs arriving per second, from second 0."""

    name: str
    arrivals: tuple[int, ...]
    description: str = ""

    @property
    def duration_s(self) -> int:
        return len(self.arrivals)

    @property
    def jobs(self) -> int:
        return sum(self.arrivals)


def poisson(rng: random.Random, rate: float) -> int:
    """A Poisson draw (Knuth for small rates, a rounded normal for large ones)."""
    if rate <= 0:
        return 0
    if rate > 30:
        return max(0, round(rng.gauss(rate, math.sqrt(rate))))
    limit, k, product = math.exp(-rate), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def spread(counts: list[int], *, at: int, jobs: int, over_s: int) -> None:
    """A batch submission: ``jobs`` jobs spread evenly over ``over_s`` seconds from ``at``."""
    for i in range(over_s):
        if 0 <= at + i < len(counts):
            counts[at + i] += jobs // over_s + (1 if i < jobs % over_s else 0)


def steady(rng: random.Random) -> Trace:
    counts = [poisson(rng, 6.0) for _ in range(1800)]
    return Trace(name="steady", arrivals=tuple(counts), description="30 min, Poisson 6 jobs/s")


def burst(rng: random.Random) -> Trace:
    counts = [poisson(rng, 1.0) for _ in range(3600)]
    for at in (420, 1330, 2050, 2890):
        spread(counts, at=at, jobs=1500, over_s=10)
    return Trace(
        name="burst",
        arrivals=tuple(counts),
        description="1 h, Poisson 1 job/s + 4 batches of 1500 jobs in 10 s",
    )


def _batches(
    counts: list[int],
    rng: random.Random,
    *,
    until: int,
    gap_s: tuple[float, float],
    median: tuple[float, float],
) -> None:
    """Batch runs (a statement or invoice run): Poisson starts whose mean gap and median size
    move linearly from the first to the second value of each pair; submitted over 10-60 s."""
    t = rng.expovariate(1 / gap_s[0])
    while t < until:
        ramp = t / until
        size = rng.lognormvariate(math.log(median[0] + (median[1] - median[0]) * ramp), 0.5)
        spread(counts, at=int(t), jobs=round(size), over_s=rng.randint(10, 60))
        t += rng.expovariate(1 / (gap_s[0] + (gap_s[1] - gap_s[0]) * ramp))


def _ramp_to_close(rng: random.Random, *, duration: int, close: int, peak: float) -> list[int]:
    """Interactive load: Poisson, 1 job/s rising to ``peak`` at the close, back to 1 in 10 min."""
    counts = []
    for t in range(duration):
        rate = (
            1 + (peak - 1) * t / close if t < close else max(1.0, peak - (t - close) / 600 * peak)
        )
        counts.append(poisson(rng, rate))
    return counts


def month_end(rng: random.Random) -> Trace:
    """The last 4 h to the close, in real time: interactive load ramps, batch runs grow."""
    counts = _ramp_to_close(rng, duration=14400, close=12600, peak=8.0)
    _batches(counts, rng, until=12600, gap_s=(1800, 480), median=(300, 2000))
    return Trace(
        name="month-end",
        arrivals=tuple(counts),
        description="4 h to the close: Poisson 1 -> 8 jobs/s; batch runs every ~30 -> 8 min,"
        " ~300 -> 2000 jobs each",
    )


def month_end_dense(rng: random.Random) -> Trace:
    """The same story squeezed into 2 h: batch runs every ~15 -> 3 min, often < 300 s apart."""
    counts = _ramp_to_close(rng, duration=7200, close=6000, peak=8.0)
    _batches(counts, rng, until=6000, gap_s=(900, 180), median=(100, 600))
    return Trace(
        name="month-end-dense",
        arrivals=tuple(counts),
        description="2 h: Poisson 1 -> 8 jobs/s; batch runs every ~15 -> 3 min, ~100 -> 600 jobs",
    )


def diurnal(rng: random.Random) -> Trace:
    """A business day, 24 h in real time: quiet nights, a morning ramp, a lunch dip."""
    counts = []
    for t in range(86400):
        hour = t / 3600
        day = max(0.0, math.sin(math.pi * (hour - 7) / 12)) if 7 <= hour <= 19 else 0.0
        dip = 0.6 if 12 <= hour < 13 else 1.0
        counts.append(poisson(rng, 0.02 + 10.0 * day**1.5 * dip))
    return Trace(
        name="diurnal",
        arrivals=tuple(counts),
        description="24 h: ~0 at night (a job per minute), 10 jobs/s at midday, lunch dip",
    )


BUILTIN: dict[str, Callable[[random.Random], Trace]] = {
    "steady": steady,
    "burst": burst,
    "month-end": month_end,
    "diurnal": diurnal,
    "month-end-dense": month_end_dense,
}


def load_csv(path: pathlib.Path) -> Trace:
    """Read a ``t_s,arrivals`` CSV (see the module docstring)."""
    per_second: dict[int, int] = {}
    with path.open(newline="") as file:
        lines = (line for line in file if line.strip() and not line.lstrip().startswith("#"))
        reader = csv.DictReader(lines)
        if reader.fieldnames is None or {"t_s", "arrivals"} - set(reader.fieldnames):
            raise ValueError(f"{path.name}: the header must name the columns t_s,arrivals")
        for row in reader:
            second, count = math.floor(float(row["t_s"])), int(row["arrivals"])
            if second < 0 or count < 0:
                raise ValueError(f"{path.name}: negative value in row {row}")
            per_second[second] = per_second.get(second, 0) + count
    if not per_second:
        raise ValueError(f"{path.name}: no rows")
    counts = [0] * (max(per_second) + 1)
    for second, count in per_second.items():
        counts[second] = count
    return Trace(name=path.stem, arrivals=tuple(counts), description=f"from {path.name}")


def load(name_or_path: str, *, seed: int = 0) -> Trace:
    """A built-in trace by name, or a CSV file by path."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path](random.Random(f"trace:{name_or_path}:{seed}"))
    path = pathlib.Path(name_or_path)
    if path.suffix.lower() == ".csv" and path.is_file():
        return load_csv(path)
    known = ", ".join(BUILTIN)
    raise ValueError(f"unknown trace {name_or_path!r}: use one of {known} or a .csv file")
