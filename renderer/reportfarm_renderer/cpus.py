"""The CPUs this pod may use: its cgroup's CPU quota (the container's ``limits.cpu``), bounded by
the CPUs the process may run on (its affinity, ``cpuset``).

``os.cpu_count()`` is the node's cores, not the pod's: a pod limited to 2 CPUs on a 16-core node
that sized a process pool by it would start 16 processes, each throttled. The quota is read from
cgroup v2 (``cpu.max``: ``<quota> <period>`` or ``max``) or v1 (``cpu.cfs_quota_us`` and
``cpu.cfs_period_us``, ``-1`` for none), the first found of the process's own cgroup and the
mount's root (what a container sees as its own).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def affinity() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def quota(root: Path = CGROUP_ROOT) -> float | None:
    """The cgroup's CPU quota in CPUs (``1.5``: one and a half), None when there is none."""
    for folder in _folders(root):
        v2 = folder / "cpu.max"
        if v2.is_file():
            return _v2(v2.read_text())
        v1 = folder / "cpu.cfs_quota_us"
        if v1.is_file():
            period = folder / "cpu.cfs_period_us"
            return _v1(v1.read_text(), period.read_text() if period.is_file() else "100000")
    return None


def pod_cpus(root: Path = CGROUP_ROOT) -> float:
    """The CPUs this pod may use: the quota if it has one, at most the CPUs it may run on."""
    limit = quota(root)
    cores = float(affinity())
    return cores if limit is None else max(0.01, min(limit, cores))


def used_s(root: Path = CGROUP_ROOT) -> float | None:
    """CPU seconds this process's cgroup has used (in a container, the container's: every
    process in it), from cgroup v2 (``cpu.stat``'s ``usage_usec``) or v1 (``cpuacct.usage``,
    nanoseconds), looked for where :func:`quota` looks; None where none is readable."""
    for folder in [*_folders(root), root / "cpuacct"]:
        v1 = folder / "cpuacct.usage"
        if v1.is_file():
            return int(v1.read_text().strip()) / 1e9
        v2 = folder / "cpu.stat"
        if v2.is_file():
            usage = [line.split()[1] for line in v2.read_text().splitlines()
                     if line.startswith("usage_usec ")]  # fmt: skip
            if usage:
                return int(usage[0]) / 1e6
    return None


def whole(cpus: float) -> int:
    """Processes to keep ``cpus`` busy: rounded up (1.5 CPUs: 2), at least one."""
    return max(1, math.ceil(cpus - 1e-9))


def _folders(root: Path) -> list[Path]:
    """The process's own cgroup folders (v2's unified path, v1's ``cpu`` controller), then the
    mount's root and v1's ``cpu`` folder under it."""
    folders: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":
            folders.append(root / relative)
        elif "cpu" in controllers.split(","):
            folders += [root / controllers / relative, root / "cpu" / relative]
    folders += [root, root / "cpu", root / "cpu,cpuacct"]
    return folders


def _v2(text: str) -> float | None:
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    period = float(fields[1]) if len(fields) > 1 else 100000.0
    return float(fields[0]) / period if period > 0 else None


def _v1(quota_text: str, period_text: str) -> float | None:
    value, period = int(quota_text.strip()), int(period_text.strip())
    return value / period if value > 0 and period > 0 else None
