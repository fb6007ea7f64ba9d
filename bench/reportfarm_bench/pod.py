"""One pod's cores: the ceiling and the renderer, each a process of its own pinned to the same
CPUs, with the storage emulator and the submitting client pinned to the others.

In production a renderer pod shares its cores with nothing of the queue path but its own job
runner: Azure Storage and the clients that submit are elsewhere. ``reportfarm bench strategies``
runs them all on the same cores, so its end-to-end figure also pays for Azurite and the client.
Here:

- **pod CPUs** (``--pod-cpus``, default half of them, the last ones): the ceiling (a process of
  its own: warm pages printing pre-rendered HTML, the production shape) and the renderer (the
  real ``reportfarm worker`` process, production settings), one printing at a time;
- **the other CPUs**: this process (the client: submits, reads records) and Azurite.

Each side's CPU is read from ``/proc`` for its own process tree (Python, the Playwright driver,
Chromium). Pinning is :func:`os.sched_setaffinity` in the child before it starts anything
(:func:`pinned`), so every process it launches inherits it; the run checks that every process of
both trees is on the pod CPUs.

The ceiling process (``python -m reportfarm_bench.pod ceiling POOL_SIZE``) reads
``OFFSET COUNT`` lines on stdin, prints that chunk of documents and answers one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from collections.abc import Sequence
from typing import Any

from reportfarm_renderer import browser

from reportfarm import loops, renderer_api
from reportfarm_bench import documents as documenting
from reportfarm_bench import measuring, strategies

PIN = "pin"
CEILING = "ceiling"
AFFINITY = "affinity"


def split_cpus(pod_cpus: int | None) -> tuple[list[int], list[int]]:
    """(the pod's CPUs, the others) out of the CPUs this process may run on: the pod takes the
    last ``pod_cpus`` (default half, at least one); at least one is left for the others."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        raise ValueError(f"needs at least 2 CPUs to split, this process may use {len(allowed)}")
    count = max(1, len(allowed) // 2) if pod_cpus is None else pod_cpus
    if not 1 <= count < len(allowed):
        raise ValueError(f"--pod-cpus must be 1 to {len(allowed) - 1} here, got {count}")
    return allowed[-count:], allowed[:-count]


def pinned(cpus: Sequence[int], module: str, *args: str) -> list[str]:
    """The command line that runs ``python -m module args`` on ``cpus`` only."""
    return [sys.executable, "-m", __name__, PIN, ",".join(map(str, cpus)), module, *args]


def affinity(pid: int) -> set[int] | None:
    """The CPUs process ``pid`` may run on (None: it exited)."""
    try:
        return set(os.sched_getaffinity(pid))
    except (ProcessLookupError, PermissionError):
        return None


async def _ceiling(pool_size: int) -> None:
    """Serve chunks on stdin: warm pages, the production shape, pre-rendered HTML."""
    catalog, documents = documenting.load()
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    settings = documenting.settings(pool_size=pool_size, chromium_path=chromium_path)
    async with browser.ChromiumLauncher(executable_path=chromium_path) as launcher:
        lab = strategies.Lab(launcher, catalog=catalog, settings=settings)
        lanes = strategies.lanes("ceiling", lab, pool_size)
        async with strategies.ceiling(lab, pool_size) as job:
            await measuring.warm_up(job, documents, count=2 * lanes, concurrency=lanes)
            print(json.dumps({"ready": True, "lanes": lanes}), flush=True)
            while line := await asyncio.to_thread(sys.stdin.readline):
                offset, count = map(int, line.split())
                run = measuring.Run(CEILING)
                await measuring.closed_loop(
                    job, documents, run=run, count=count, concurrency=lanes, offset=offset
                )
                answer: dict[str, Any] = {
                    "wall_s": run.wall_s,
                    "latencies_s": run.latencies_s,
                    "valid": run.valid,
                    "invalid": run.invalid,
                }
                print(json.dumps(answer), flush=True)


def main(argv: Sequence[str]) -> None:
    if argv[:1] == [PIN]:
        os.sched_setaffinity(0, {int(cpu) for cpu in argv[1].split(",")})
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    elif argv[:1] == [CEILING]:
        loops.run(_ceiling(int(argv[1])))
    elif argv[:1] == [AFFINITY]:  # what a pinned command sees (the tests' check)
        print(json.dumps(sorted(os.sched_getaffinity(0))))
    else:
        raise SystemExit(f"usage: {PIN} CPUS MODULE [ARGS...] | {CEILING} POOL_SIZE | {AFFINITY}")


if __name__ == "__main__":
    main(sys.argv[1:])
