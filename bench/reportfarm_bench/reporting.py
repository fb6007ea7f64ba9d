"""The benchmark's report: one JSON-able dict, shown as a table and drawn as a PNG."""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportfarm_bench import cpu
from reportfarm_bench.strategies import STRATEGIES

Report = dict[str, Any]

TARGETS: dict[str, tuple[str, float, str]] = {
    "reportfarm_over_context_per_job": (">=", 3.0, "reportfarm PDFs/s / context_per_job PDFs/s"),
    "end_to_end_over_ceiling": (">=", 0.95, "end_to_end PDFs/s / ceiling PDFs/s"),
    "reportfarm_over_site_isolated": (
        ">=",
        0.9,
        "reportfarm PDFs/s / site_isolated PDFs/s (what the crash fix costs)",
    ),
    "burst_p95_over_bound": (
        "<=",
        1.25,
        "p95 of 20 concurrent / (20 / end_to_end PDFs/s + a single job), submit-to-stored",
    ),
    "ceiling_over_today": (">=", 1.25, "ceiling PDFs/s / ceiling_today PDFs/s (the print path)"),
}
"""Ratio: (comparison, target, what it divides), from the issue's "Done when"."""


def ratios(report: Mapping[str, Any]) -> dict[str, float | None]:
    end_to_end = report.get("end_to_end", {})

    def divide(top: float | None, bottom: float | None) -> float | None:
        if top is None or bottom is None or not bottom or math.isnan(top) or math.isnan(bottom):
            return None
        return round(top / bottom, 2)

    return {
        "reportfarm_over_context_per_job": divide(
            report["reportfarm"]["pdf_per_s"], report["context_per_job"]["pdf_per_s"]
        ),
        "end_to_end_over_ceiling": divide(
            end_to_end.get("pdf_per_s"), report["ceiling"]["pdf_per_s"]
        ),
        "reportfarm_over_site_isolated": divide(
            report["reportfarm"]["pdf_per_s"], report["site_isolated"]["pdf_per_s"]
        ),
        "burst_p95_over_bound": divide(end_to_end.get("p95_ms"), burst_bound_ms(end_to_end)),
        "ceiling_over_today": divide(
            report["ceiling"]["pdf_per_s"], report["ceiling_today"]["pdf_per_s"]
        ),
    }


def burst_bound_ms(end_to_end: Mapping[str, Any]) -> float | None:
    """What a burst costs at best on one pod: its jobs at the measured throughput, plus one lone
    job's latency (the last job still has to be received, printed and stored)."""
    rate, single, burst = (end_to_end.get(key) for key in ("pdf_per_s", "single_ms", "burst"))
    if not rate or single is None or not burst or math.isnan(single):
        return None
    return round(burst / rate * 1000 + single, 1)


def targets(values: Mapping[str, float | None]) -> dict[str, dict[str, Any]]:
    return {
        name: check(values.get(name), comparison, target)
        for name, (comparison, target, _) in TARGETS.items()
    }


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
}


def check(value: float | None, comparison: str, target: float) -> dict[str, Any]:
    """A ratio against its target: ``{"target": ">= 2.5", "met": True/False/None}`` (None: not
    measured)."""
    met = None if value is None else _COMPARE[comparison](value, target)
    return {"target": f"{comparison} {target:g}", "met": met}


def bench_console(as_json: bool, *, width: int = 120) -> Console:
    """The console a benchmark's main prints its progress and table on, with the farm's loggers
    quieted (one info line per job would bury the table).

    With ``as_json`` it writes to stderr (stdout then holds only the JSON); when it is not a
    terminal it is ``width`` columns wide, so the table is not cut to 80.
    """
    console = Console(stderr=as_json)
    if not console.is_terminal:
        console.width = width
    for name in ("reportfarm", "reportfarm_renderer"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return console


def show(report: Report, console: Console) -> None:
    """The results and the ratios as rich tables."""
    params = report["parameters"]
    table = Table(
        title=f"reportfarm bench: pool {params['pool_size']}, {params['jobs']} documents per "
        f"strategy in rounds of {params['rounds']}, {params['cpu_count']} CPUs, "
        f"Chromium {params['chromium']} ({params['chromium_path']}; ceiling_today: "
        f"{params.get('today_chromium_path', params['chromium_path'])})"
    )
    for column in ("strategy", "how", "PDFs/s", "p50 ms", "p95 ms", "valid PDFs", "load1"):
        table.add_column(column, justify="left" if column in ("strategy", "how") else "right")
    for name, (_, how) in STRATEGIES.items():
        row = report[name]
        table.add_row(name, how, *_cells(row))
    end_to_end = report["end_to_end"]
    how = f"queue; p50/p95: {end_to_end['burst']} concurrent, submit-to-stored"
    table.add_row("end_to_end", how, *_cells(end_to_end))
    console.print(table)
    single, waited = end_to_end["single_ms"], end_to_end["single_queue_wait_p50_ms"]
    console.print(
        f"end_to_end: a single job alone takes {single:.0f} ms submit-to-stored (median of "
        f"{end_to_end['single_samples_ms']}), {waited:.0f} ms of it waiting for the worker's next "
        f"receive; in the bursts a job waited {end_to_end['queue_wait_p50_ms']:.0f} ms (p50) "
        f"before a browser took it; stage p50s (ms): {end_to_end['stages_p50_ms']}; the browsers "
        f"printed {end_to_end['browser_utilization']:.0%} of the throughput run's time; "
        f"a burst's bound (its jobs at this throughput plus a single job) is "
        f"{burst_bound_ms(end_to_end) or float('nan'):.0f} ms"
    )
    _show_cpu(report, console)
    if report.get("finishing"):
        from reportfarm_bench import finishing

        console.print(finishing.table(report["finishing"]))
    checks = Table(title="ratios (one run, same machine: these are what we report)")
    for column in ("ratio", "value", "target", "met"):
        checks.add_column(column, justify="left" if column == "ratio" else "right")
    for name, value in report["ratios"].items():
        target = report["targets"][name]
        met = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "-"}[target["met"]]
        shown = "-" if value is None else f"{value:.2f}"
        checks.add_row(f"{name}\n[dim]{TARGETS[name][2]}[/dim]", shown, target["target"], met)
    console.print(checks)
    console.print(
        f"load average before {params['load_before']}, after {params['load_after']} "
        f"(other work on this machine makes absolute numbers noisy)"
    )


def _show_cpu(report: Report, console: Console) -> None:
    """CPU milliseconds per PDF, by component: where the end-to-end path's time goes."""
    rows = [name for name in [*STRATEGIES, "end_to_end"] if report[name].get("cpu_ms_per_pdf")]
    if not rows:
        return
    table = Table(title="CPU ms per PDF, by process (all on this machine's cores)")
    for column in ("strategy", *cpu.COMPONENTS, "total"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for name in rows:
        shares = report[name]["cpu_ms_per_pdf"]
        columns = (*cpu.COMPONENTS, "total")
        table.add_row(name, *(f"{shares.get(column, 0.0):.0f}" for column in columns))
    console.print(table)
    console.print(
        "python: the bench process (the in-process strategies, their template renders, and "
        "end_to_end's client); renderer: end_to_end's renderer process (reportfarm worker, as "
        "a pod runs it); azurite: the storage emulator, which in production runs elsewhere"
    )


def _cells(row: Mapping[str, Any]) -> list[str]:
    return [
        f"{row['pdf_per_s']:.2f}",
        f"{row['p50_ms']:.0f}",
        f"{row['p95_ms']:.0f}",
        f"{row['valid_pdfs']}/{row['pdfs']}",
        "-" if row["load1"] is None else f"{row['load1']:.2f}",
    ]


def save_figure(figure: Any, path: Path, title: str) -> None:
    """A benchmark's plot, titled, to a PNG at ``path`` (its folder made), and closed."""
    import matplotlib.pyplot as plt

    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot(report: Report, path: Path) -> None:
    """Bars of PDFs/s per strategy, and p50/p95 latency per strategy, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    names = [name for name in [*STRATEGIES, "end_to_end"] if "pdf_per_s" in report[name]]
    rates = [report[name]["pdf_per_s"] for name in names]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    colors = ["#9e9e9e", "#e07b39", "#2f7ed8", "#7fb3e8", "#5cb85c", "#a3d9a5", "#8e44ad"]
    bars = left.bar(names, rates, color=colors[: len(names)])
    left.bar_label(bars, fmt="%.1f")
    left.set_ylabel("PDFs per second")
    left.set_title("throughput")
    positions = range(len(names))
    width = 0.38
    p50 = [report[name]["p50_ms"] for name in names]
    p95 = [report[name]["p95_ms"] for name in names]
    for shift, values, label in ((-width / 2, p50, "p50"), (width / 2, p95, "p95")):
        drawn = right.bar([x + shift for x in positions], values, width, label=label)
        right.bar_label(drawn, fmt="%.0f", fontsize=8)
    end_to_end = report["end_to_end"]
    if "single_ms" in end_to_end and "end_to_end" in names:
        x = names.index("end_to_end")
        right.hlines(end_to_end["single_ms"], x - 0.45, x + 0.45, colors="black", linestyles="--")
        right.annotate("single job", (x, end_to_end["single_ms"]), ha="center", va="bottom")
    right.set_xticks(list(positions), names)
    right.set_yscale("log")
    right.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.0f}"))
    right.set_ylabel("ms (log scale)")
    right.set_title("latency per PDF (end_to_end: submit-to-stored, 20 concurrent)")
    right.legend()
    for axis in (left, right):
        axis.tick_params(axis="x", labelrotation=20)
    params = report["parameters"]
    save_figure(
        figure,
        path,
        f"pool {params['pool_size']}, {params['jobs']} documents/strategy, "
        f"{params['cpu_count']} CPUs, Chromium {params['chromium']}, "
        f"load {params['load_before'][0]} -> {params['load_after'][0]}",
    )
