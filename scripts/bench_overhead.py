#!/usr/bin/env python3
"""Where (c) reportfarm's CPU per PDF goes beyond (d) the ceiling's, by process, in one run.

    PYTHONPATH=.:renderer:operator:gateway:bench python scripts/bench_overhead.py [--rounds 10]
        [--per-round 20] [--pool-size 2]

Variants, each with browsers of its own, interleaved in rounds (forward, then backward), every
chunk a closed loop of ``--per-round`` example documents on ``--pool-size`` lanes:

- ``ceiling``: ``reportfarm bench strategies``'s (d): warm pages, ``set_content`` and ``page.pdf``;
- ``reportfarm``: its (c): our pool, the guard, the template rendered per job;
- ``pool_no_template``: the same pool printing the pre-rendered HTML (what the template costs);
- ``pool_no_memory``: (c) with the pool's memory check after the first job turned off (what the
  PSS reading costs in this chunked pattern: a chunk after 10 s idle re-reads every browser).

Recycling after K jobs is off in every variant: a browser's renderer processes die with it, are
reaped by nobody under this process and their CPU vanishes from ``/proc`` (a recycle would show
as a negative cost). ``--launches`` instead measures what one recycle costs: launching a worker,
warming it and printing one document.

CPU is read from ``/proc`` before and after each chunk for every process under this one and
charged to the chunk's variant by the process's kind: ``python`` (this process), ``driver``
(Playwright's node), and Chromium's ``browser``, ``renderer``, ``gpu-process``, ``zygote`` (which
reaps the print compositor, a utility process started for each print), ``utility:*``.
Compare ratios within one run; the load average is printed with every round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from reportfarm_bench import documents as documenting
from reportfarm_bench import measuring, strategies
from reportfarm_renderer import browser
from reportfarm_renderer import pool as pooling

from reportfarm import loops

_TICK = os.sysconf("SC_CLK_TCK")
_TYPE = re.compile(r"--type=([\w-]+)")
_SUB = re.compile(r"--utility-sub-type=(\w+)")


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds so far of this process and its descendants, by kind (see the docstring)."""
    table: dict[int, tuple[int, float, float, str]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, UnicodeDecodeError):
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            own = (int(fields[11]) + int(fields[12])) / _TICK
            reaped = (int(fields[13]) + int(fields[14])) / _TICK
            table[int(entry.name)] = (int(fields[1]), own, reaped, command)
    me, totals = os.getpid(), dict[str, float]()
    for pid, (_, own, reaped, _command) in table.items():
        kind = "python" if pid == me else _kind(pid, me, table)
        if kind is not None:
            charged = own if kind in ("python", "driver") else own + reaped
            totals[kind] = totals.get(kind, 0.0) + charged
    return totals


def _kind(pid: int, me: int, table: dict[int, tuple[int, float, float, str]]) -> str | None:
    current, chromium = pid, False
    while current != me:
        if current not in table or current <= 1:
            return None
        chromium = chromium or Path(table[current][3].split(" ", 1)[0]).name.startswith("chrom")
        current = table[current][0]
    command = table[pid][3]
    if not chromium:
        return "driver"
    match = _TYPE.search(command)
    kind = match.group(1) if match else "browser"
    if kind == "utility" and (sub := _SUB.search(command)):
        kind = f"utility:{sub.group(1)}"
    return kind


@contextlib.asynccontextmanager
async def _pool(
    lab: strategies.Lab, size: int, *, template: bool, memory_check_interval: float
) -> AsyncIterator[measuring.Job]:
    factory = functools.partial(lab.launcher.new_worker, pages=1)
    pool = pooling.BrowserPool(
        factory,
        size=size,
        borrow_timeout=60,
        launch_timeout=60,
        render_timeout=180,
        recycle_after_jobs=None,
        memory_check_interval=memory_check_interval,
    )

    async def job(lane: int, document: documenting.Document) -> bytes:
        html = document.html
        if template:
            html = await asyncio.to_thread(lab.catalog.render, document.template, document.data)
        return await pool.render(html, document.pdf, javascript=False)

    async with pool:
        yield job


Variant = Callable[[strategies.Lab, int], contextlib.AbstractAsyncContextManager[measuring.Job]]
VARIANTS: dict[str, Variant] = {
    "ceiling": strategies.ceiling,
    "reportfarm": functools.partial(_pool, template=True, memory_check_interval=10.0),
    "pool_no_template": functools.partial(_pool, template=False, memory_check_interval=10.0),
    "pool_no_memory": functools.partial(_pool, template=True, memory_check_interval=1e9),
}


async def main(rounds: int, per_round: int, size: int, launches: int) -> None:
    catalog, documents = documenting.load()
    settings = documenting.settings(pool_size=size)
    async with contextlib.AsyncExitStack() as stack:
        launcher = await stack.enter_async_context(browser.ChromiumLauncher())
        lab = strategies.Lab(launcher, catalog=catalog, settings=settings)
        jobs = {n: await stack.enter_async_context(v(lab, size)) for n, v in VARIANTS.items()}
        for job in jobs.values():
            await measuring.warm_up(job, documents, count=2 * size, concurrency=size)
        spent = {name: dict[str, float]() for name in jobs}
        walls = dict.fromkeys(jobs, 0.0)
        for index in range(rounds):
            names = list(jobs) if index % 2 == 0 else list(reversed(jobs))
            for name in names:
                before, started = cpu_by_kind(), time.perf_counter()
                run = measuring.Run(name)
                await measuring.closed_loop(
                    jobs[name],
                    documents,
                    run=run,
                    count=per_round,
                    concurrency=size,
                    offset=index * per_round,
                )
                walls[name] += time.perf_counter() - started
                if run.invalid:
                    raise SystemExit(f"{name} printed {run.invalid} invalid PDFs")
                after = cpu_by_kind()
                for kind in after:
                    used = after[kind] - before.get(kind, 0.0)
                    spent[name][kind] = spent[name].get(kind, 0.0) + used
            print(f"round {index + 1}/{rounds}: load average {_load()}", flush=True)
        _table(spent, walls, rounds * per_round)
        for _ in range(launches):
            before = cpu_by_kind()
            worker = await launcher.new_worker()
            await worker.render(documents[0].html, documents[0].pdf, javascript=False)
            used = sum(cpu_by_kind().values()) - sum(before.values())
            await worker.close()
            print(f"launch + warm page + 1 print: {used * 1000:.0f} CPU ms (load {_load()})")


def _table(spent: dict[str, dict[str, float]], walls: dict[str, float], pdfs: int) -> None:
    kinds = sorted({kind for used in spent.values() for kind in used})
    print("variant | PDFs/s | " + " | ".join(kinds) + " | CPU ms/PDF | / ceiling")
    reference = sum(spent["ceiling"].values())
    for name, used in spent.items():
        cells = " | ".join(f"{used.get(kind, 0.0) * 1000 / pdfs:.1f}" for kind in kinds)
        total = sum(used.values())
        print(
            f"{name} | {pdfs / walls[name]:.2f} | {cells} | {total * 1000 / pdfs:.1f} | "
            f"{total / reference:.3f}"
        )


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--launches", type=int, default=3)
    arguments = parser.parse_args()
    loops.run(main(arguments.rounds, arguments.per_round, arguments.pool_size, arguments.launches))
