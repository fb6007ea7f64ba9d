"""Memory of whole process trees, sampled while a side of the comparison runs.

PSS (proportional set size, ``/proc/<pid>/smaps_rollup``) counts a page shared by N processes as
1/N to each, so summing it over Chromium's many processes does not count the shared binary N
times, as RSS would. A side's peak is the largest sum over its processes among the samples taken
while it was printing: tabs and renderer processes come and go, so the sampling runs throughout.

But PSS splits a page among *every* process that maps it, the other sides' too: when two sides
run the same Chromium binary (Gotenberg given ours), each side's PSS loses the share of the
binary's pages that the other side's browsers, idle or not, map (measured: a Gotenberg tree's PSS
went from 225 to 144 MiB when two of our idle browsers on the same binary started; its distinct
pages stayed 227 MiB), and other work on a shared machine running that binary does the same. So
each sample also counts the tree's memory **as if alone** (:func:`alone`): its anonymous PSS
(anonymous pages are shared only between forks, all inside the tree) plus every distinct file or
shared-memory page its processes map, counted once whoever else maps it (page frame numbers from
``/proc/<pid>/pagemap``: they need CAP_SYS_ADMIN, without it there is no such figure). Reading
page frames costs more than PSS, so they are re-read every :data:`FILES_EVERY` samples (file
pages change slowly: the binary, fonts and resources, read in once).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

MIB = 1024 * 1024
INTERVAL_S = 0.5
"""Sampling period: reading smaps_rollup walks the page tables, so not much faster."""
FILES_EVERY = 8
"""Re-read a tree's distinct file pages every this many samples, 4 s (about 0.2 s of CPU each for
a pool of two browsers: at every sample that would take a third of a core from the sides)."""
PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT, _FILE_OR_SHARED = 1 << 63, 1 << 61
_PFN = (1 << 55) - 1

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
    return rollup(pid)[0]


def total_bytes(pids: Iterable[int]) -> int:
    return sum(pss_bytes(pid) for pid in pids)


def rollup(pid: int) -> tuple[int, int]:
    """The process's (PSS, anonymous PSS) in bytes, (0, 0) once it has gone."""
    found = {"Pss": 0, "Pss_Anon": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key in found:
                    found[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found["Pss"], found["Pss_Anon"]


def file_pages(pids: Iterable[int]) -> set[int] | None:
    """The page frames of every file or shared-memory page the processes map (each once); None
    when the kernel hides page frame numbers (no CAP_SYS_ADMIN: they read as 0)."""
    frames: set[int] = set()
    present = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
                for line in maps:
                    fields = line.split(maxsplit=5)
                    # a path and an inode: files, memfd and /dev/shm (not [heap], [stack]...)
                    if len(fields) < 6 or not fields[5].startswith("/") or fields[4] == "0":
                        continue
                    low, high = (int(bound, 16) for bound in fields[0].split("-"))
                    pagemap.seek(low // PAGE * 8)
                    entries = array.array("Q")
                    entries.frombytes(pagemap.read((high - low) // PAGE * 8))
                    wanted = _PRESENT | _FILE_OR_SHARED
                    mapped = [entry for entry in entries if entry & wanted == wanted]
                    present += len(mapped)
                    frames.update(entry & _PFN for entry in mapped)
        except (OSError, ValueError):
            continue  # gone meanwhile
    if present and frames <= {0}:
        return None
    return frames


def alone(pids: Iterable[int]) -> int | None:
    """The processes' memory as if nothing outside them shared their pages: anonymous PSS plus
    their distinct file and shared-memory pages; None without page frame numbers."""
    members = list(pids)
    frames = file_pages(members)
    if frames is None:
        return None
    return sum(rollup(pid)[1] for pid in members) + len(frames) * PAGE


class Peak:
    """The highest PSS sum of a side's processes, and the highest memory as if alone
    (:func:`alone`), sampled during its timed chunks."""

    def __init__(self, members: Members) -> None:
        self.members = members
        self.peak_bytes = 0
        self.alone_peak_bytes = 0
        self.samples = 0
        self._files: int | None = None
        """The tree's distinct file pages when last read, in bytes."""
        self._hidden = False
        """No page frame numbers here: no memory as if alone."""

    def sample(self) -> None:
        pids = list(self.members(parents()))
        pss = anon = 0
        for pid in pids:
            total, anonymous = rollup(pid)
            pss, anon = pss + total, anon + anonymous
        self.peak_bytes = max(self.peak_bytes, pss)
        if not self._hidden and (self._files is None or self.samples % FILES_EVERY == 0):
            frames = file_pages(pids)
            self._hidden = frames is None
            self._files = None if frames is None else len(frames) * PAGE
        if self._files is not None:
            self.alone_peak_bytes = max(self.alone_peak_bytes, anon + self._files)
        self.samples += 1

    def sampling(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Sample every :data:`INTERVAL_S` while inside, and once at the end."""
        return periodically(self.sample)

    @property
    def peak_mib(self) -> float | None:
        return round(self.peak_bytes / MIB, 1) if self.samples and self.peak_bytes else None

    @property
    def alone_peak_mib(self) -> float | None:
        """None when page frame numbers are hidden here (or nothing was sampled)."""
        if self._hidden or not self.samples or not self.alone_peak_bytes:
            return None
        return round(self.alone_peak_bytes / MIB, 1)


@contextlib.asynccontextmanager
async def periodically(sample: Callable[[], object]) -> AsyncIterator[None]:
    """Call ``sample`` every :data:`INTERVAL_S` (in a thread: /proc reads block) while inside,
    and once more at the end (the state at the end counts too)."""
    stop = asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            await asyncio.to_thread(sample)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), INTERVAL_S)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        stop.set()
        await task
        await asyncio.to_thread(sample)
