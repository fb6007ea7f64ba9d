"""Driving a strategy: a closed loop with one runner per browser, timed per document.

Each of ``concurrency`` runners takes the next document as soon as its previous one is printed,
so the pool is always full and never oversubscribed. A strategy is measured in chunks (rounds,
interleaved with the other strategies by the caller); throughput is its documents over the sum
of its chunks' wall times (first start to last finish); latency is one document's time in its
runner.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from reportfarm.quantiles import quantile
from reportfarm_bench.documents import Document

Job = Callable[[int, Document], Awaitable[bytes]]
"""Print one document on lane ``i`` (0 to concurrency - 1; a lane is one browser or page)."""


@dataclasses.dataclass
class Run:
    """What one strategy measured."""

    name: str
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    valid: int = 0
    """PDFs that look like PDFs (header and trailer)."""
    invalid: int = 0
    sample: bytes | None = None
    """The first PDF, for a look (``--samples``)."""
    loads: list[float] = dataclasses.field(default_factory=list)
    """The 1-minute load average when each chunk started: how noisy the machine was."""

    @property
    def count(self) -> int:
        return len(self.latencies_s)

    @property
    def pdf_per_s(self) -> float:
        return self.count / self.wall_s if self.wall_s > 0 else 0.0

    def keep(self, pdf: bytes) -> None:
        if looks_like_pdf(pdf):
            self.valid += 1
            if self.sample is None:
                self.sample = pdf
        else:
            self.invalid += 1

    def summary(self) -> dict[str, float | int | None]:
        return {
            "pdf_per_s": round(self.pdf_per_s, 2),
            "p50_ms": round((quantile(self.latencies_s, 0.50) or 0.0) * 1000, 1),
            "p95_ms": round((quantile(self.latencies_s, 0.95) or 0.0) * 1000, 1),
            "jobs": self.count,
            "pdfs": self.valid + self.invalid,
            "valid_pdfs": self.valid,
            "load1": round(statistics.fmean(self.loads), 2) if self.loads else None,
        }


def looks_like_pdf(data: bytes) -> bool:
    return data.startswith(b"%PDF-") and b"%%EOF" in data[-1024:]


def load_average() -> float:
    return os.getloadavg()[0]


async def warm_up(job: Job, documents: Sequence[Document], *, count: int, concurrency: int) -> None:
    """Print ``count`` documents untimed."""
    await _drive(job, documents, count=count, concurrency=concurrency, offset=0, run=None)


async def closed_loop(
    job: Job,
    documents: Sequence[Document],
    *,
    run: Run,
    count: int,
    concurrency: int,
    offset: int = 0,
) -> None:
    """One timed chunk: documents ``offset`` to ``offset + count`` (cyclic), added to ``run``."""
    run.loads.append(load_average())
    started = time.perf_counter()
    await _drive(job, documents, count=count, concurrency=concurrency, offset=offset, run=run)
    run.wall_s += time.perf_counter() - started


async def _drive(
    job: Job,
    documents: Sequence[Document],
    *,
    count: int,
    concurrency: int,
    offset: int,
    run: Run | None,
) -> None:
    indexes = iter(range(offset, offset + count))  # shared: each runner takes the next one

    async def runner(lane: int) -> None:
        for index in indexes:
            document = documents[index % len(documents)]
            started = time.perf_counter()
            pdf = await job(lane, document)
            if run is not None:
                run.latencies_s.append(time.perf_counter() - started)
                run.keep(pdf)

    async with asyncio.TaskGroup() as group:
        for lane in range(concurrency):
            group.create_task(runner(lane))
