"""Memory of whole process trees, sampled while a side of the comparison runs.

PSS (proportional set size, ``/proc/<pid>/smaps_rollup``) counts a page shared by N processes as
1/N to each, so summing it over Chromium's many processes does not count the shared binary N
times, as RSS would. A side's peak is the largest sum over its processes among the samples taken
while it was printing: tabs and renderer processes come and go, so the sampling runs throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

MIB = 1024 * 1024
INTERVAL_S = 0.5
"""Sampling period: reading smaps_rollup walks the page tables, so not much faster."""

Members = Callable[[dict[int, int]], Iterable[int]]
"""Which pids make up a side, given the machine's parent map (pid -> parent pid)."""


def parents() -> dict[int, int]:
    """pid -> parent pid for every process visible in /proc."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            # The command name is in parentheses and may hold spaces: split after the last ')'.
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def children(pid: int, tree: dict[int, int]) -> set[int]:
    return {child for child, parent in tree.items() if parent == pid}


def descendants(pid: int, tree: dict[int, int]) -> set[int]:
    """``pid`` and everything under it."""
    found, frontier = {pid}, [pid]
    while frontier:
        below = children(frontier.pop(), tree)
        frontier += below - found
        found |= below
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def pss_bytes(pid: int) -> int:
    """The process's PSS, 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def total_bytes(pids: Iterable[int]) -> int:
    return sum(pss_bytes(pid) for pid in pids)


class Peak:
    """The highest PSS sum of a side's processes, sampled during its timed chunks."""

    def __init__(self, members: Members) -> None:
        self.members = members
        self.peak_bytes = 0
        self.samples = 0

    def sample(self) -> None:
        self.peak_bytes = max(self.peak_bytes, total_bytes(self.members(parents())))
        self.samples += 1

    @contextlib.asynccontextmanager
    async def sampling(self) -> AsyncIterator[None]:
        """Sample every :data:`INTERVAL_S` (in a thread: /proc reads block) while inside."""
        stop = asyncio.Event()

        async def loop() -> None:
            while not stop.is_set():
                await asyncio.to_thread(self.sample)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), INTERVAL_S)

        task = asyncio.create_task(loop())
        try:
            yield
        finally:
            stop.set()
            await task
            await asyncio.to_thread(self.sample)  # the state at the end counts too

    @property
    def peak_mib(self) -> float | None:
        return round(self.peak_bytes / MIB, 1) if self.samples and self.peak_bytes else None
