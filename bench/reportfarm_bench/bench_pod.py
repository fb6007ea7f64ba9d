"""``reportfarm bench pod``: end to end against the ceiling on one pod's cores, with the storage
emulator and the submitting client on the others (see :mod:`.pod`).

``reportfarm bench strategies`` measures end to end on shared cores, where Azurite and the
benchmark's own client take CPU that production does not put in a pod. Here the ceiling and the
real renderer process run pinned to the same CPUs, one printing at a time in interleaved rounds,
and each side's CPU per PDF is read from its own process tree: the ratio is what the queue path
costs the pod itself. A table, a PNG plot and, with ``--json``, the same as JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportfarm import azurite, loops
from reportfarm.quantiles import quantile
from reportfarm_bench import bench_strategies, cpu, end_to_end, footprint, pod, reporting
from reportfarm_bench import documents as documenting

Report = dict[str, Any]
TARGET = 0.95
"""End to end against the ceiling, on the pod's cores (issue #14)."""
POD_COMPONENTS = ("chromium", "driver", "python")
START_TIMEOUT_S = 180.0


class PodFailed(RuntimeError):
    """A pinned process exited or did not answer."""


@dataclasses.dataclass
class Side:
    """What one side measured over its chunks."""

    pdfs: int = 0
    wall_s: float = 0.0
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    cpu_s: cpu.Sample = dataclasses.field(default_factory=dict)
    valid: int = 0
    invalid: int = 0

    def summary(self) -> dict[str, Any]:
        per_pdf = {
            name: self.cpu_s.get(name, 0.0) * 1000 / max(1, self.pdfs) for name in POD_COMPONENTS
        }
        return {
            "pdf_per_s": round(self.pdfs / self.wall_s, 2) if self.wall_s > 0 else 0.0,
            "p50_ms": round((quantile(self.latencies_s, 0.50) or 0.0) * 1000, 1),
            "p95_ms": round((quantile(self.latencies_s, 0.95) or 0.0) * 1000, 1),
            "cpu_ms_per_pdf": {
                **{name: round(value, 1) for name, value in per_pdf.items()},
                "total": round(sum(per_pdf.values()), 1),
            },
            "jobs": self.pdfs,
            "valid_pdfs": self.valid,
            "pdfs": self.valid + self.invalid,
        }


class Ceiling:
    """The ceiling process: pinned, warm, printing a chunk per request."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def ready(self) -> dict[str, Any]:
        return await self._answer()

    async def chunk(self, offset: int, count: int) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{offset} {count}\n".encode())
        await self.process.stdin.drain()
        return await self._answer()

    async def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), START_TIMEOUT_S)
        if not line:
            raise PodFailed(f"the ceiling process exited ({await self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer


async def run(*, jobs: int, pool_size: int, pod_cpus: int | None, console: Console) -> Report:
    pod_set, others = pod.split_cpus(pod_cpus)
    # this process (the client) and Azurite, which it starts, run on the other CPUs
    os.sched_setaffinity(0, others)
    _, documents = documenting.load()
    chunks = _rounds(jobs)
    load_before = bench_strategies._load()
    sides = {"ceiling": Side(), "end_to_end": Side()}
    outside: cpu.Sample = {}
    client_s = 0.0
    with tempfile.TemporaryDirectory(prefix="reportfarm-bench-pod-") as scratch:
        console.log(f"pod CPUs {pod_set}, client and Azurite on {others}: starting")
        async with (
            end_to_end.running_process(
                documents,
                pool_size=pool_size,
                rng=random.Random(bench_strategies.SEED),
                log=Path(scratch, "worker.log"),
                cpus=pod_set,
            ) as farm,
            _ceiling(pod_set, pool_size) as process,
        ):
            assert farm.worker is not None
            worker, ceiling = farm.worker, Ceiling(process)
            lanes = int((await ceiling.ready())["lanes"])
            await farm.warm_up(2 * lanes)
            for index, count in enumerate(chunks):
                offset = sum(chunks[:index])
                console.log(f"round {index + 1}/{len(chunks)}: {count} documents a side")
                for name in ("ceiling", "end_to_end")[:: 1 if index % 2 == 0 else -1]:
                    side = sides[name]
                    root = ceiling.process.pid if name == "ceiling" else worker.pid
                    before = cpu.sample(root)
                    if name == "ceiling":
                        answer = await ceiling.chunk(offset, count)
                        side.wall_s += answer["wall_s"]
                        side.latencies_s += answer["latencies_s"]
                        side.valid += answer["valid"]
                        side.invalid += answer["invalid"]
                    else:  # the client and Azurite, outside the pod, too
                        before_outside, before_client = cpu.sample(), time.process_time()
                        seen = len(farm.result.throughput)
                        span = farm.result.throughput_span_s
                        await farm.throughput(count, offset=offset)
                        side.wall_s += farm.result.throughput_span_s - span
                        side.latencies_s += [
                            end_to_end.worker_side_s(record)
                            for record in farm.result.throughput[seen:]
                        ]
                        client_s += time.process_time() - before_client
                        cpu.add(outside, cpu.spent(before_outside, cpu.sample()))
                    side.pdfs += count
                    cpu.add(side.cpu_s, cpu.spent(before, cpu.sample(root)))
            strays = _off_the_pod([ceiling.process.pid, worker.pid], pod_set)
            await farm.check_pdfs()
            sides["end_to_end"].valid = farm.result.check.valid
            sides["end_to_end"].invalid = farm.result.check.invalid
            stages = farm.result.summary(end_to_end.Phases(0, 0), pool_size=lanes)["stages_p50_ms"]
    report: Report = {name: side.summary() for name, side in sides.items()}
    pdfs = max(1, sides["end_to_end"].pdfs)
    report["end_to_end"]["outside_cpu_ms_per_pdf"] = {
        "client": round(client_s * 1000 / pdfs, 1),
        "azurite": round(outside.get("azurite", 0.0) * 1000 / pdfs, 1),
    }
    report["end_to_end"]["stages_p50_ms"] = stages
    ratio = _divide(report["end_to_end"]["pdf_per_s"], report["ceiling"]["pdf_per_s"])
    cpu_ratio = _divide(
        report["ceiling"]["cpu_ms_per_pdf"]["total"],
        report["end_to_end"]["cpu_ms_per_pdf"]["total"],
    )
    report["ratios"] = {
        "end_to_end_over_ceiling": ratio,
        "ceiling_cpu_over_end_to_end_cpu": cpu_ratio,
    }
    report["targets"] = {"end_to_end_over_ceiling": reporting.check(ratio, ">=", TARGET)}
    report["parameters"] = {
        "pod_cpus": pod_set,
        "other_cpus": others,
        "pool_size": pool_size,
        "lanes": lanes,
        "jobs": jobs,
        "rounds": chunks,
        "documents": len(documents),
        "processes_off_the_pod": strays,
        "load_before": load_before,
        "load_after": bench_strategies._load(),
    }
    return report


def _rounds(jobs: int) -> list[int]:
    """About 20 documents a side in each round."""
    count = max(1, round(jobs / 20))
    return [jobs // count + (1 if index < jobs % count else 0) for index in range(count)]


def _divide(top: float, bottom: float) -> float | None:
    return round(top / bottom, 3) if bottom else None


def _off_the_pod(roots: list[int], pod_set: list[int]) -> list[str]:
    """Processes of the pinned trees allowed on a CPU outside the pod (none, if pinning held)."""
    strays, tree = [], footprint.parents()
    for root in roots:
        for pid in sorted(footprint.descendants(root, tree)):
            allowed = pod.affinity(pid)
            if allowed is not None and not allowed <= set(pod_set):
                strays.append(f"{pid}: {sorted(allowed)}")
    return strays


@contextlib.asynccontextmanager
async def _ceiling(cpus: list[int], pool_size: int) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *pod.pinned(cpus, pod.__name__, pod.CEILING, str(pool_size)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.stdin is not None:
            process.stdin.close()
        await end_to_end.stop(process)


def show(report: Report, console: Console) -> None:
    params = report["parameters"]
    table = Table(
        title=(
            f"reportfarm bench pod: pool {params['pool_size']} on CPUs {params['pod_cpus']}, "
            f"client and Azurite on {params['other_cpus']}, {params['jobs']} documents a side"
        )
    )
    for column in (
        "side",
        "PDFs/s",
        "p50 ms",
        "p95 ms",
        "pod CPU ms/PDF",
        "of it: chromium",
        "driver",
        "python",
        "outside the pod",
        "valid PDFs",
    ):
        table.add_column(column, justify="left" if column == "side" else "right")
    for name in ("ceiling", "end_to_end"):
        row = report[name]
        spent = row["cpu_ms_per_pdf"]
        outside = row.get("outside_cpu_ms_per_pdf")
        table.add_row(
            name,
            f"{row['pdf_per_s']:.2f}",
            f"{row['p50_ms']:.0f}",
            f"{row['p95_ms']:.0f}",
            f"{spent['total']:.1f}",
            *(f"{spent[component]:.1f}" for component in POD_COMPONENTS),
            "-" if outside is None else f"client {outside['client']}, Azurite {outside['azurite']}",
            f"{row['valid_pdfs']}/{row['pdfs']}",
        )
    console.print(table)
    ratios, target = report["ratios"], report["targets"]["end_to_end_over_ceiling"]
    met = {True: "met", False: "not met", None: "-"}[target["met"]]
    console.print(
        f"end to end / ceiling, on the pod's CPUs: {ratios['end_to_end_over_ceiling']} "
        f"(target {target['target']}: {met}); ceiling CPU / end-to-end CPU per PDF: "
        f"{ratios['ceiling_cpu_over_end_to_end_cpu']}; p50/p95 end to end: the worker's, from "
        "taking a job to its PDF stored"
    )
    console.print(
        f"load average before {params['load_before']}, after {params['load_after']}; "
        f"processes off the pod's CPUs: {len(params['processes_off_the_pod'])}"
    )


def plot(report: Report, path: Path) -> None:
    """PDFs/s of the two sides, and their CPU per PDF by process (the pod's, then outside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["ceiling", "end_to_end"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    bars = left.bar(names, [report[n]["pdf_per_s"] for n in names], color=["#5cb85c", "#8e44ad"])
    left.bar_label(bars, fmt="%.1f")
    left.set_ylabel("PDFs per second, on the pod's CPUs")
    left.set_title(f"end to end / ceiling: {report['ratios']['end_to_end_over_ceiling']}")
    colors = {
        "chromium": "#2f7ed8",
        "driver": "#e07b39",
        "python": "#f1c40f",
        "client": "#cccccc",
        "azurite": "#999999",
    }
    bottoms = [0.0, 0.0]
    for component, color in colors.items():
        values = [
            report[n]["cpu_ms_per_pdf"].get(component)
            or report[n].get("outside_cpu_ms_per_pdf", {}).get(component, 0.0)
            for n in names
        ]
        outside = component in ("client", "azurite")
        right.bar(
            names,
            values,
            bottom=bottoms,
            color=color,
            hatch="//" if outside else None,
            label=f"{component} (outside the pod)" if outside else component,
        )
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    right.set_ylabel("CPU ms per PDF")
    right.set_title("where the CPU goes")
    right.legend(fontsize=8)
    params = report["parameters"]
    reporting.save_figure(
        figure,
        path,
        f"one pod: CPUs {params['pod_cpus']} (client and Azurite on {params['other_cpus']}), "
        f"pool {params['pool_size']}, load {params['load_before'][0]} -> {params['load_after'][0]}",
    )


def main(
    *, as_json: bool, jobs: int, pool_size: int, pod_cpus: int | None, plot_path: Path | None
) -> int:
    """0 when both sides printed only valid PDFs and pinning held; 1 otherwise; 2 on bad usage."""
    if jobs < 1 or pool_size < 1:
        print("reportfarm bench pod: --jobs and --pool-size must be at least 1", file=sys.stderr)
        return 2
    try:
        pod.split_cpus(pod_cpus)
    except ValueError as error:
        print(f"reportfarm bench pod: {error}", file=sys.stderr)
        return 2
    console = reporting.bench_console(as_json)
    try:
        report = loops.run(run(jobs=jobs, pool_size=pool_size, pod_cpus=pod_cpus, console=console))
    except (azurite.AzuriteError, end_to_end.JobsFailed, PodFailed) as error:
        console.print(f"[red]reportfarm bench pod failed:[/red] {error}")
        return 1
    show(report, console)
    if plot_path is not None:
        plot(report, plot_path)
        console.print(f"plot: {plot_path}")
    if as_json:
        print(json.dumps(report, indent=2))
    sides = [report[name] for name in ("ceiling", "end_to_end")]
    valid = all(0 < row["valid_pdfs"] == row["pdfs"] for row in sides)
    return 0 if valid and not report["parameters"]["processes_off_the_pod"] else 1


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=100, help="documents a side")
    parser.add_argument("--pool-size", type=int, default=2, help="browsers in the pod")
    parser.add_argument(
        "--pod-cpus", type=int, default=None, help="CPUs the pod gets (default: half of them)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--plot", type=Path, default=Path("out/bench-pod.png"), help="PNG plot path"
    )


def command(args: argparse.Namespace) -> int:
    return main(
        as_json=args.json,
        jobs=args.jobs,
        pool_size=args.pool_size,
        pod_cpus=args.pod_cpus,
        plot_path=args.plot,
    )
