"""Peak memory of the renderer while it prints one document, read from ``/proc``.

Three parts, each with its own peak: this Python process (its RSS high-water mark, reset before
each document by writing 5 to ``/proc/self/clear_refs``; where that is refused, the highest RSS
sampled), the Playwright driver (Node, a child of this process: PSS, sampled) and the pool's
browsers (PSS of each whole process tree, sampled through the pool). Sampling every
:data:`INTERVAL_S` misses spikes shorter than that; the Python figure is exact where the reset
works.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator

from reportfarm_renderer import pool as pooling

INTERVAL_S = 1.0
"""Reading smaps_rollup walks a process's page tables under its memory map's lock: a browser of
several GiB printing 500 pages was slowed by sampling it five times a second (measured)."""
MIB = 2**20


@dataclasses.dataclass
class Peaks:
    """Bytes, the highest seen while one document printed."""

    python: int = 0
    driver: int = 0
    chromium: int = 0

    def see(self, *, python: int, driver: int, chromium: int) -> None:
        self.python = max(self.python, python)
        self.driver = max(self.driver, driver)
        self.chromium = max(self.chromium, chromium)


@contextlib.asynccontextmanager
async def peaks(pool: pooling.BrowserPool) -> AsyncIterator[Peaks]:
    """Sample while the body runs; the result is complete once the body has left."""
    found = Peaks()
    exact = _reset_high_water_mark()
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            browsers = sum(await pool.memory())
            found.see(python=_status("VmRSS:"), driver=_driver_memory(), chromium=browsers)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), INTERVAL_S)

    sampler = asyncio.ensure_future(sample())
    try:
        yield found
    finally:
        stop.set()
        await sampler
        browsers = sum(await pool.memory())  # once more at the end: a short print's peak
        found.see(python=_status("VmRSS:"), driver=_driver_memory(), chromium=browsers)
        if exact:
            found.python = max(found.python, _status("VmHWM:"))


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError:
        return False
    return True


def _status(field: str, pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _status("VmRSS:", pid)


def _driver_memory() -> int:
    """The Playwright driver: this process's children that run Node."""
    me = str(os.getpid())
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                parent = file.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                command = file.read()
        except (OSError, IndexError):
            continue
        if parent == me and b"node" in command:
            total += _pss(int(entry))
    return total
