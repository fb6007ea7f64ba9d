"""The renderer's start, phase by phase, measured by the renderer itself.

Each phase is logged once, as one line ``start phase`` with ``phase``, ``since_start_s`` (seconds
since this Python process started, from the kernel's record of its start, so the interpreter's own
start and the imports count) and ``at`` (the wall clock, epoch seconds, to line it up with the
pod's creation and its Ready condition, which only the API server and the kubelet see).

In a container, the process's parent is PID 1 (tini): its start is when the container started, and
``container_started`` is logged (negative ``since_start_s``: before this process).
On the real node, ``scripts/bench_pod_start.sh`` (``tests/node/podstart.py``) collects these lines.

In a container, a line marked as it happens also carries ``cpu_s``: the CPU the container (its
cgroup: tini, Python, the driver, Chromium) has used since it started
(:func:`reportfarm_renderer.cpus.used_s`), so that a start can be told CPU-bound (as many CPU
seconds as wall seconds, on a pod of one CPU) from one that waits.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import typing
from collections.abc import Callable
from pathlib import Path

from reportfarm_renderer import cpus

logger = logging.getLogger(__name__)

Phase = typing.Literal[
    "container_started",
    "process_started",
    "imported",
    "browser_ready",
    "listening",
    "ready",
    "first_receive",
    "first_stored",
]
PHASES: tuple[Phase, ...] = typing.get_args(Phase)
"""In the order a start normally passes them (``listening`` and ``ready`` may swap with
``browser_ready`` and ``first_receive``: the queue and the browsers start side by side)."""

LOG_MESSAGE = "start phase"


def started_at(pid: int | str = "self") -> float | None:
    """When process ``pid`` started, wall clock (epoch seconds, to the kernel's 10 ms tick);
    None where /proc does not say (not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


@dataclasses.dataclass
class Timeline:
    """The phases passed so far: phase -> wall clock (epoch seconds)."""

    process_started: float
    """This process's start, wall clock."""
    marks: dict[str, float] = dataclasses.field(default_factory=dict)
    cpu: Callable[[], float | None] | None = None
    """Reads the container's CPU seconds (``cpu_s`` in the lines); None: not logged."""

    @classmethod
    def begin(cls) -> Timeline:
        """The timeline of this process: its start and, in a container, the container's."""
        now = time.time()
        timeline = cls(process_started=started_at() or now)
        if os.getppid() == 1 and (container := started_at(1)) is not None:
            timeline.cpu = cpus.used_s
            timeline.mark("container_started", at=container)
        timeline.mark("process_started", at=timeline.process_started)
        return timeline

    @classmethod
    def from_now(cls) -> Timeline:
        """A timeline that counts from now (a renderer started inside another program)."""
        return cls(process_started=time.time())

    def mark(self, phase: Phase, *, at: float | None = None) -> None:
        """Record ``phase`` now (or ``at``: then without ``cpu_s``); only its first time counts."""
        if phase in self.marks:
            return
        when = time.time() if at is None else at
        self.marks[phase] = when
        since = round(when - self.process_started, 3)
        extra: dict[str, object] = {"phase": phase, "since_start_s": since, "at": round(when, 3)}
        if at is None and self.cpu is not None and (cpu := self.cpu()) is not None:
            extra["cpu_s"] = round(cpu, 3)
        logger.info(LOG_MESSAGE, extra=extra)

    def since_start(self) -> dict[str, float]:
        """Phase -> seconds since the process started, in the order passed."""
        return {p: round(t - self.process_started, 3) for p, t in self.marks.items()}
