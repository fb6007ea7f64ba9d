"""Where the CPU goes: this process and its descendants' CPU time, by component, from ``/proc``.

The benchmark runs everything on one machine: Chromium, the Playwright driver, the renderer and
the client (this Python process) and the storage emulator (Azurite). In production the storage
and the client are elsewhere, so a throughput ratio measured here also says how much of the
cores Azurite took. :func:`sample` reads every process under this one and sorts its CPU seconds
into components; the difference of two samples is what a phase cost.

- ``python``: this process (the in-process strategies, the template renders and the client).
- ``renderer``: a renderer process of its own under this one (``reportfarm worker``, as a pod
  runs it: its job runner, template renders and storage calls), its own time.
- ``chromium``: Chromium's processes (a command line that runs a ``chrom*`` binary, or a
  process under one).
- ``driver``: the Playwright drivers (the Node.js processes that launch Chromium) and anything
  else that is neither Chromium nor Azurite.
- ``azurite``: the storage emulator and its children.

A descendant's CPU includes the children it has reaped (``cutime``/``cstime``), so a renderer
process that exited between two samples still counts, under its browser (and a browser closed
by the driver, under ``chromium``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

COMPONENTS = ("chromium", "driver", "renderer", "python", "azurite")
WORKER = "reportfarm.cli worker"
"""What a renderer process's command line holds (``python -m reportfarm.cli worker``, pinned or
not)."""
_TICK = os.sysconf("SC_CLK_TCK")

Sample = dict[str, float]
"""CPU seconds used so far, by component."""


def sample(root: int | None = None) -> Sample:
    """CPU seconds so far of ``root`` (default: this process) and its descendants, by component."""
    root = os.getpid() if root is None else root
    table = _processes()
    totals = dict.fromkeys(COMPONENTS, 0.0)
    for pid, (_, own, reaped, _) in table.items():
        if pid == root:
            # its reaped children are not the renderer's; this process's own time is read from
            # the clock, not /proc's ticks (10 ms: a few cheap PDFs rounded to nothing)
            totals["python"] += time.process_time() if root == os.getpid() else own
            continue
        component = _component(pid, root, table)
        if component == "driver":  # what the driver reaped are the browsers it launched
            totals["driver"] += own
            totals["chromium"] += reaped
        elif component == "renderer":  # what it reaped is its driver, at its end
            totals["renderer"] += own
            totals["driver"] += reaped
        elif component is not None:
            totals[component] += own + reaped
    return totals


def spent(before: Sample, after: Sample) -> Sample:
    return {name: max(0.0, after.get(name, 0.0) - before.get(name, 0.0)) for name in COMPONENTS}


def add(total: Sample, more: Mapping[str, float]) -> None:
    for name in COMPONENTS:
        total[name] = total.get(name, 0.0) + more.get(name, 0.0)


def per_pdf(total: Mapping[str, float], pdfs: int) -> dict[str, float]:
    """CPU milliseconds per PDF, by component and in all."""
    if pdfs <= 0:
        return {}
    shares = {name: round(total.get(name, 0.0) * 1000 / pdfs, 1) for name in COMPONENTS}
    shares["total"] = round(sum(total.get(name, 0.0) for name in COMPONENTS) * 1000 / pdfs, 1)
    return shares


def _component(pid: int, root: int, table: Mapping[int, _Process]) -> str | None:
    """The component of a descendant of ``root``; None for a process outside the tree."""
    lineage: list[str] = []
    current = pid
    while current != root:
        entry = table.get(current)
        if entry is None or current <= 1:
            return None
        lineage.append(entry[3])
        current = entry[0]
    if any("azurite" in command for command in lineage):
        return "azurite"
    if len(lineage) == 1 and WORKER in lineage[0]:
        return "renderer"
    if any(_is_chromium(command) for command in lineage):
        return "chromium"
    return "driver"


def _is_chromium(command: str) -> bool:
    program = command.split(" ", 1)[0]
    return Path(program).name.startswith("chrom") or "/chromium" in program


_Process = tuple[int, float, float, str]
"""(parent pid, own CPU seconds, reaped children's CPU seconds, command line)."""


def _processes() -> dict[int, _Process]:
    table: dict[int, _Process] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # exited meanwhile
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        # After the command: state, ppid, ..., then utime, stime, cutime, cstime (fields 14-17).
        parent = int(fields[1])
        own = (int(fields[11]) + int(fields[12])) / _TICK
        reaped = (int(fields[13]) + int(fields[14])) / _TICK
        table[int(entry.name)] = (parent, own, reaped, command.decode(errors="replace").strip())
    return table
