"""``reportfarm bench strategies``: five ways to print the same documents, and the whole path
through the queue, in one run, with the same pool size N.

The documents are the example reports and the batch lines (``examples/``), rendered to HTML
once up front. Each strategy (see :mod:`.strategies`) prints ``jobs`` of them,
N at a time, after an untimed warm-up; ``end_to_end`` sends ``jobs`` jobs through an embedded
Azurite to an in-process renderer with the production settings and pool size N (see
:mod:`.end_to_end`). Strategies never run at the same time, but the machine is
shared and its load drifts, so the run is split into rounds: in each round every strategy
prints its share of the documents, in forward order one round and backward the next, and a
drift weighs on all of them alike. Then the end-to-end latency phases: lone jobs and bursts of
20 concurrent submissions.

Reported: PDFs/s, p50 and p95 per strategy, three ratios against the issue's targets, the load
average before and after (compare ratios within a run, not absolute numbers across runs), a
table, a PNG plot and, with ``--json``, the same as JSON on stdout.

Only ``REPORTFARM_CHROMIUM_PATH`` is read from the environment; every other renderer setting is
the production default, so a local ``REPORTFARM_*`` variable cannot skew the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from reportfarm_renderer import browser
from rich.console import Console

from reportfarm import azurite, loops, renderer_api
from reportfarm_bench import (
    cpu,
    end_to_end,
    finishing,
    measuring,
    reporting,
    strategies,
)
from reportfarm_bench import documents as documenting

SEED = 2026
"""Seeds the random pauses of the end-to-end phases: the same run, run after run."""
END_TO_END = "end_to_end"


def rounds(jobs: int) -> list[int]:
    """Documents per strategy in each round: about 20 a round, at most 3 rounds."""
    count = max(1, min(3, jobs // 20))
    return [jobs // count + (1 if index < jobs % count else 0) for index in range(count)]


def phases(jobs: int) -> end_to_end.Phases:
    """The end-to-end latency phases for ``--jobs``: 60 gives 10 lone jobs and 3 bursts of 20.

    A lone job's latency is mostly where it lands in the idle worker's polling (0 to 1 s), so
    the median of 5 moved the burst's bound by half a second between runs: 10 steady it."""
    return end_to_end.Phases(singles=max(2, min(10, jobs // 6)), bursts=max(1, min(3, jobs // 20)))


def warmup(name: str, lanes: int) -> int:
    """Untimed documents before a strategy's timed ones: two per lane (one for a browser per
    job, whose every job starts cold anyway)."""
    return lanes if name == "browser_per_job" else 2 * lanes


async def run(
    *, jobs: int, pool_size: int, chromium_path: str | None, console: Console
) -> tuple[reporting.Report, dict[str, bytes]]:
    """Measure everything; returns the report and one sample PDF per strategy."""
    catalog, documents = documenting.load()
    settings = documenting.settings(pool_size=pool_size, chromium_path=chromium_path)
    load_before = _load()
    runs = {name: measuring.Run(name) for name in strategies.STRATEGIES}
    plan, chunks = phases(jobs), rounds(jobs)
    async with contextlib.AsyncExitStack() as stack:
        launcher = await stack.enter_async_context(
            browser.ChromiumLauncher(
                executable_path=chromium_path, launch_timeout=settings.launch_timeout
            )
        )
        lab = strategies.Lab(launcher, catalog=catalog, settings=settings)
        console.log(f"starting: {len(runs)} strategies and a renderer, pool size {pool_size}")
        printers = {
            name: await stack.enter_async_context(strategy(lab, pool_size))
            for name, (strategy, _) in strategies.STRATEGIES.items()
        }
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="reportfarm-bench-"))
        farm = await stack.enter_async_context(
            end_to_end.running_process(
                documents,
                pool_size=pool_size,
                rng=random.Random(SEED),
                log=Path(scratch, "worker.log"),
            )
        )
        for name, job in printers.items():
            lanes = strategies.lanes(name, lab, pool_size)
            await measuring.warm_up(job, documents, count=warmup(name, lanes), concurrency=lanes)
        await farm.warm_up(2 * strategies.lanes("reportfarm", lab, pool_size))
        order = [*strategies.STRATEGIES, END_TO_END]
        spent: dict[str, cpu.Sample] = {name: {} for name in order}
        for index, count in enumerate(chunks):
            offset = sum(chunks[:index])
            console.log(f"round {index + 1}/{len(chunks)}: {count} documents per strategy")
            for name in order if index % 2 == 0 else reversed(order):
                before = cpu.sample()
                if name == END_TO_END:
                    await farm.throughput(count, offset=offset)
                else:
                    await measuring.closed_loop(
                        printers[name],
                        documents,
                        run=runs[name],
                        count=count,
                        concurrency=strategies.lanes(name, lab, pool_size),
                        offset=offset,
                    )
                cpu.add(spent[name], cpu.spent(before, cpu.sample()))
        console.log(f"end_to_end: {plan.singles} lone jobs, {plan.bursts} bursts of {plan.burst}")
        await farm.latency_phases(plan)
        await farm.check_pdfs()
        console.log("finishing: each option on one report per template")
        finish_costs = await finishing.measure(launcher, documents, log=console.log)
    report: reporting.Report = {name: measured.summary() for name, measured in runs.items()}
    # the renderer's lanes (browsers x pages), for the share of them spent printing
    lanes = strategies.lanes("reportfarm", lab, pool_size)
    report[END_TO_END] = farm.result.summary(plan, pool_size=lanes)
    for name in order:
        report[name]["cpu_ms_per_pdf"] = cpu.per_pdf(spent[name], jobs)
    report["finishing"] = finish_costs
    report["ratios"] = reporting.ratios(report)
    report["targets"] = reporting.targets(report["ratios"])
    report["parameters"] = {
        "pool_size": pool_size,
        "pages_per_browser": settings.pages_per_browser,
        "jobs": jobs,
        "rounds": chunks,
        "documents": len(documents),
        "warmup": {
            name: warmup(name, strategies.lanes(name, lab, pool_size))
            for name in strategies.STRATEGIES
        },
        "cpu_count": os.cpu_count(),
        "chromium": lab.chromium_version,
        "chromium_path": launcher.executable_path or "playwright's own",
        "today_chromium_path": lab.today_chromium or "playwright's own",
        "python": platform.python_version(),
        "renderer_settings": {
            "poll_max_s": settings.poll_max_s,
            "visibility_timeout": settings.visibility_timeout,
            "recycle_after_jobs": settings.recycle_after_jobs,
        },
        "end_to_end_phases": {"singles": plan.singles, "bursts": plan.bursts, "burst": plan.burst},
        "load_before": load_before,
        "load_after": _load(),
    }
    samples = {name: pdf for name, measured in runs.items() if (pdf := measured.sample)}
    if farm.result.check.sample is not None:
        samples[END_TO_END] = farm.result.check.sample
    return report, samples


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def main(
    *, as_json: bool, jobs: int, pool_size: int, plot: Path | None, samples: Path | None = None
) -> int:
    """Run the benchmark; 0 when every strategy printed only valid PDFs, 1 otherwise.

    The table goes to stdout, or to stderr with ``as_json`` (stdout then holds only the JSON).
    ``samples``: a folder for one PDF per strategy (``<strategy>.pdf``).
    """
    if jobs < 1 or pool_size < 1:
        print("bench: --jobs and --pool-size must be at least 1", file=sys.stderr)
        return 2
    console = reporting.bench_console(as_json)
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    try:
        report, pdfs = loops.run(
            run(jobs=jobs, pool_size=pool_size, chromium_path=chromium_path, console=console)
        )
    except (azurite.AzuriteError, end_to_end.JobsFailed) as error:
        console.print(f"[red]bench failed:[/red] {error}")
        return 1
    if samples is not None:
        samples.mkdir(parents=True, exist_ok=True)
        for name, pdf in pdfs.items():
            (samples / f"{name}.pdf").write_bytes(pdf)
    if plot is not None:
        reporting.plot(report, plot)
    reporting.show(report, console)
    if plot is not None:
        console.print(f"plot: {plot}")
    if as_json:
        print(json.dumps(report, indent=2))
    return 0 if _all_valid(report) else 1


def _all_valid(report: dict[str, Any]) -> bool:
    rows = [report[name] for name in [*strategies.STRATEGIES, END_TO_END]]
    return all(row["valid_pdfs"] == row["pdfs"] > 0 for row in rows)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--jobs", type=int, default=60, help="documents per strategy")
    parser.add_argument("--pool-size", type=int, default=2, help="browsers per pool")
    parser.add_argument("--plot", type=Path, default=Path("out/bench.png"), help="PNG plot path")
    parser.add_argument(
        "--samples", type=Path, default=None, help="folder for one PDF per strategy (optional)"
    )


def command(args: argparse.Namespace) -> int:
    return main(
        as_json=args.json,
        jobs=args.jobs,
        pool_size=args.pool_size,
        plot=args.plot,
        samples=args.samples,
    )
