"""
Generated load shapes for the suite (``reportfarm simulate --suite N``): a space of arrival
shapes, each with random parameters, so that no policy is tuned on a handful of hand-picked traces.

Case ``i`` is shape ``SHAPES[i % len(SHAPES)]`` with parameters drawn from ``Random(f"shape:{i}")``:
the same ``i`` is the same case everywhere (the follow-up on a real node replays these by index).
All shapes are in real time (the controllers' windows are absolute) and last 20-45 min.

- ``burst``: a Poisson background and a few batches of 200-3,000 jobs submitted within 5-60 s.
- ``small-bursts``: 5-15 jobs every 30-90 s, nothing in between.
- ``sustained-jump``: a steady stream that becomes 4-12x for 3-8 minutes.
- ``ramp``: the rate climbs to a peak, then falls back (minutes each way).
- ``cliff``: a high rate that stops dead (or falls to a trickle).
- ``wake``: work, silence longer than the scale-to-zero idle time, work again.
- ``waves``: a sine rate (a compressed day) of 10-40 min period.
- ``trickle``: a lone job every 10-120 s.
- ``heavy-tail``: a Poisson stream with batches, and 3 % of renders taking 20-60 s.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable

from reportfarm.simulate import traces, workload


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case:
    """One generated case: its arrivals and its render times."""

    index: int
    shape: str
    trace: traces.Trace
    render: workload.RenderTimes = dataclasses.field(default_factory=workload.RenderTimes)


Made = tuple[list[int], str, workload.RenderTimes | None]


def _poisson_stream(rng: random.Random, rates: list[float]) -> list[int]:
    return [traces.poisson(rng, rate) for rate in rates]


def _burst(rng: random.Random) -> Made:
    duration = rng.randint(20, 45) * 60
    base = rng.uniform(0.1, 2.0)
    counts = _poisson_stream(rng, [base] * duration)
    batches = rng.randint(2, 5)
    sizes = []
    for _ in range(batches):
        size, over = round(math.exp(rng.uniform(math.log(200), math.log(3000)))), rng.randint(5, 60)
        traces.spread(counts, at=rng.randrange(60, duration - 300), jobs=size, over_s=over)
        sizes.append(size)
    return counts, f"Poisson {base:.1f}/s + {batches} batches of {min(sizes)}-{max(sizes)}", None


def _small_bursts(rng: random.Random) -> Made:
    duration = rng.randint(20, 40) * 60
    counts = [0] * duration
    t = rng.uniform(0, 60)
    low, high = rng.randint(5, 10), rng.randint(10, 15)
    gap = (rng.uniform(30, 50), rng.uniform(50, 90))
    while t < duration:
        traces.spread(counts, at=int(t), jobs=rng.randint(low, high), over_s=rng.randint(1, 3))
        t += rng.uniform(*gap)
    return counts, f"{low}-{high} jobs every {gap[0]:.0f}-{gap[1]:.0f} s", None


def _sustained_jump(rng: random.Random) -> Made:
    duration = rng.randint(25, 40) * 60
    base, factor = rng.uniform(1.0, 6.0), rng.uniform(4.0, 12.0)
    start, length = rng.randint(300, 900), rng.randint(180, 480)
    rates = [base * factor if start <= t < start + length else base for t in range(duration)]
    text = f"Poisson {base:.1f}/s, x{factor:.0f} for {length // 60} min at {start // 60} min"
    return _poisson_stream(rng, rates), text, None


def _ramp(rng: random.Random) -> Made:
    duration = rng.randint(25, 45) * 60
    peak, up, down = rng.uniform(4, 25), rng.randint(300, 900), rng.randint(120, 900)
    top = rng.randint(60, 300)
    rates = []
    for t in range(duration):
        if t < up:
            rates.append(0.2 + (peak - 0.2) * t / up)
        elif t < up + top:
            rates.append(peak)
        else:
            rates.append(max(0.2, peak - (peak - 0.2) * (t - up - top) / down))
    text = f"0.2 -> {peak:.0f}/s over {up // 60} min, back over {down // 60} min"
    return _poisson_stream(rng, rates), text, None


def _cliff(rng: random.Random) -> Made:
    duration = rng.randint(20, 35) * 60
    high, low, until = rng.uniform(5, 30), rng.choice((0.0, 0.1, 0.5)), rng.randint(300, 900)
    rates = [high if t < until else low for t in range(duration)]
    text = f"Poisson {high:.0f}/s for {until // 60} min, then {low}/s"
    return _poisson_stream(rng, rates), text, None


def _wake(rng: random.Random) -> Made:
    counts: list[int] = []
    rates = []
    for _ in range(rng.randint(2, 3)):
        rate = rng.uniform(2, 20)
        rates.append(rate)
        counts += _poisson_stream(rng, [rate] * rng.randint(60, 300))
        counts += [0] * rng.randint(360, 900)  # longer than the 300 s idle time: back to zero
    return counts, f"work ({min(rates):.0f}-{max(rates):.0f}/s), silence, work", None


def _waves(rng: random.Random) -> Made:
    duration = rng.randint(30, 45) * 60
    peak, period = rng.uniform(3, 20), rng.randint(600, 2400)
    rates = [0.05 + peak * max(0.0, math.sin(2 * math.pi * t / period)) for t in range(duration)]
    return _poisson_stream(rng, rates), f"sine up to {peak:.0f}/s, period {period // 60} min", None


def _trickle(rng: random.Random) -> Made:
    duration = rng.randint(20, 40) * 60
    mean_gap = rng.uniform(10, 120)
    return (
        _poisson_stream(rng, [1 / mean_gap] * duration),
        f"a job every ~{mean_gap:.0f} s",
        None,
    )


def _heavy_tail(rng: random.Random) -> Made:
    counts, text, _ = _burst(rng)
    share = rng.uniform(0.02, 0.04)
    tail = workload.RenderTimes(tail_share=share, tail_s=(20.0, 60.0))
    return counts, f"{text}; {share:.0%} of renders take 20-60 s", tail


SHAPES: dict[str, Callable[[random.Random], Made]] = {
    "burst": _burst,
    "small-bursts": _small_bursts,
    "sustained-jump": _sustained_jump,
    "ramp": _ramp,
    "cliff": _cliff,
    "wake": _wake,
    "waves": _waves,
    "trickle": _trickle,
    "heavy-tail": _heavy_tail,
}


def case(index: int) -> Case:
    """Case ``index`` of the suite (deterministic)."""
    names = list(SHAPES)
    shape = names[index % len(names)]
    counts, description, render = SHAPES[shape](random.Random(f"shape:{index}"))
    trace = traces.Trace(name=f"{shape}-{index}", arrivals=tuple(counts), description=description)
    return Case(index=index, shape=shape, trace=trace, render=render or workload.RenderTimes())
