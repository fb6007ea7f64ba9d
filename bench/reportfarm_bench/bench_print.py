"""``reportfarm bench print``: pool shapes, Chromium flags and loading, side by side with today's
print path (see :mod:`.printing` for what each variant is).

Reported per variant: PDFs/s, per core and per GiB of peak browser memory (PSS), p50/p95, and the
ratio to ``today`` measured in the same rounds; the load average before and after; a table, a
PNG plot and, with ``--json``, the same as JSON on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reportfarm_renderer import browser
from rich.console import Console
from rich.table import Table

from reportfarm import loops, renderer_api
from reportfarm_bench import bench_strategies, measuring, printing, reporting, strategies
from reportfarm_bench import documents as documenting

Report = dict[str, Any]


async def run(
    chosen: Sequence[printing.Variant], *, jobs: int, chromium_path: str | None, console: Console
) -> Report:
    catalog, documents = documenting.load()
    settings = documenting.settings(chromium_path=chromium_path)
    load_before = bench_strategies._load()
    chunks = printing.rounds(jobs)
    async with contextlib.AsyncExitStack() as stack:
        launcher = await stack.enter_async_context(
            browser.ChromiumLauncher(executable_path=chromium_path)
        )
        lab = strategies.Lab(launcher, catalog=catalog, settings=settings)
        console.log(f"starting {len(chosen)} variants")
        printers = [await stack.enter_async_context(printing.opened(lab, v)) for v in chosen]
        for printer in printers:
            lanes = printer.variant.lanes
            await measuring.warm_up(printer.job, documents, count=2 * lanes, concurrency=lanes)
        for index, count in enumerate(chunks):
            offset = sum(chunks[:index])
            if index % 5 == 0:
                console.log(f"round {index + 1}/{len(chunks)}: {count} documents per variant")
            for printer in printers if index % 2 == 0 else reversed(printers):
                await printer.measure(documents, count=count, offset=offset)
    count = printing.cores()
    report: Report = {"variants": {p.variant.name: p.summary(count) for p in printers}}
    today = report["variants"]["today"]
    for row in report["variants"].values():
        row["cpu_ms_per_pdf"] = round(
            (row["browser_cpu_ms_per_pdf"] or 0.0) + (row["client_cpu_ms_per_pdf"] or 0.0), 1
        )
    for row in report["variants"].values():
        row["cpu_over_today"] = _ratio(today["cpu_ms_per_pdf"], row["cpu_ms_per_pdf"])
        row["over_today"] = _ratio(row["pdf_per_s"], today["pdf_per_s"])
        row["per_gib_over_today"] = _ratio(row["pdf_per_s_per_gib"], today["pdf_per_s_per_gib"])
        row["per_gib_alone_over_today"] = _ratio(
            row["pdf_per_s_per_gib_alone"], today["pdf_per_s_per_gib_alone"]
        )
    report["parameters"] = {
        "jobs": jobs,
        "rounds": chunks,
        "documents": len(documents),
        "cpu_count": count,
        "chromium": lab.chromium_version,
        "today_args": list(printing.TODAY_ARGS),
        "chromium_paths": {
            v.name: v.executable or launcher.executable_path or "playwright's own" for v in chosen
        },
        "load_before": load_before,
        "load_after": bench_strategies._load(),
    }
    return report


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return round(top / bottom, 2) if top and bottom else None


def show(report: Report, console: Console) -> None:
    params = report["parameters"]
    table = Table(
        title=f"reportfarm bench print: {params['jobs']} documents per variant in rounds of "
        f"{params['rounds']}, {params['cpu_count']} CPUs, Chromium {params['chromium']}"
    )
    columns: tuple[str, ...] = ("variant", "lanes", "PDFs/s", "/core", "peak MiB", "/GiB")
    columns = (*columns, "alone MiB", "/GiB", "x today", "x today (/GiB alone)", "p50 ms")
    for column in (*columns, "p95 ms", "CPU ms/PDF", "browser+client", "x today (CPU)", "load1"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name, row in report["variants"].items():
        table.add_row(
            name,
            str(row["lanes"]),
            f"{row['pdf_per_s']:.2f}",
            f"{row['pdf_per_s_per_core']:.2f}",
            str(row["peak_mib"]),
            _cell(row["pdf_per_s_per_gib"]),
            "-" if row["alone_peak_mib"] is None else str(row["alone_peak_mib"]),
            _cell(row["pdf_per_s_per_gib_alone"]),
            _cell(row["over_today"]),
            _cell(row["per_gib_alone_over_today"]),
            f"{row['p50_ms']:.0f}",
            f"{row['p95_ms']:.0f}",
            f"{row['cpu_ms_per_pdf']:.0f}",
            f"{row['browser_cpu_ms_per_pdf']:.0f}+{row['client_cpu_ms_per_pdf']:.0f}",
            _cell(row["cpu_over_today"]),
            _cell(row["load1"]),
        )
    console.print(table)
    console.print(
        f"Chromium binaries: {_binaries(params)}. "
        f"today: 2 browsers x 1 page, {' '.join(params['today_args'])}; load average before "
        f"{params['load_before']}, after {params['load_after']}. CPU ms/PDF: CPU time per PDF "
        "of the variant's browsers plus the Playwright driver's and this process's while it "
        "printed, little changed by other work on the machine; x today (CPU): today's over the "
        "variant's, above 1 is cheaper. peak MiB: PSS of the variant's browsers, which splits a "
        "binary's pages among every variant running it; alone MiB: the same browsers as if "
        "nothing else ran (anonymous PSS plus their distinct file pages; needs root), the "
        "figure to compare across binaries"
    )


def _binaries(params: dict[str, Any]) -> str:
    """``today: /usr/bin/chromium; every other: ...`` from the report's per-variant paths."""
    paths: dict[str, str] = params.get("chromium_paths", {})
    by_path: dict[str, list[str]] = {}
    for name, path in paths.items():
        by_path.setdefault(path, []).append(name)
    return "; ".join(f"{', '.join(names)}: {path}" for path, names in by_path.items())


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot(report: Report, path: Path) -> None:
    """PDFs/s and PDFs/s per GiB per variant, as ratios to today, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["variants"]
    names = list(rows)
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    for axis, key, title in (
        (left, "pdf_per_s", "PDFs/s"),
        (right, "pdf_per_s_per_gib_alone", "PDFs/s per GiB of browser memory (as if alone)"),
    ):
        if key == "pdf_per_s_per_gib_alone" and not rows["today"][key]:
            key, title = "pdf_per_s_per_gib", "PDFs/s per GiB of browser PSS"
        values = [rows[name][key] or 0.0 for name in names]
        colors = ["#9e9e9e" if name == "today" else "#2f7ed8" for name in names]
        bars = axis.bar(names, values, color=colors)
        axis.bar_label(bars, fmt="%.2f", fontsize=8)
        axis.axhline(rows["today"][key] or 0.0, color="black", linestyle="--", linewidth=0.8)
        axis.set_title(title)
        axis.tick_params(axis="x", labelrotation=35)
    params = report["parameters"]
    reporting.save_figure(
        figure,
        path,
        f"print path variants vs today (2x1), {params['jobs']} documents each, "
        f"{params['cpu_count']} CPUs, load {params['load_before'][0]} -> {params['load_after'][0]}",
    )


def main(
    *,
    as_json: bool,
    jobs: int,
    shapes: Sequence[str],
    flags: Sequence[str],
    flag_shape: str,
    with_flags: Sequence[str] = (),
    loading: Sequence[str],
    plot_path: Path | None,
) -> int:
    """Run the sweep; 0 when every variant printed only valid PDFs, 1 otherwise, 2 on bad input."""
    try:
        chosen = printing.variants(
            shapes=shapes,
            flags=flags,
            base_args=printing.args_with(with_flags),
            flag_shape=flag_shape,
            loading=[printing.wait_until(value) for value in loading],
        )
    except (KeyError, ValueError) as error:
        known = ", ".join(printing.FLAGS)
        print(f"reportfarm bench print: {error} (flags: {known})", file=sys.stderr)
        return 2
    if jobs < 1:
        print("reportfarm bench print: --jobs must be at least 1", file=sys.stderr)
        return 2
    console = reporting.bench_console(as_json, width=140)
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    report = loops.run(run(chosen, jobs=jobs, chromium_path=chromium_path, console=console))
    if plot_path is not None:
        plot(report, plot_path)
    show(report, console)
    if as_json:
        print(json.dumps(report, indent=2))
    rows = report["variants"].values()
    return 0 if all(row["valid_pdfs"] == row["pdfs"] > 0 for row in rows) else 1


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--jobs", type=int, default=40, help="documents per variant")
    parser.add_argument(
        "--shapes", default="1x2,1x3,2x2", help="BROWSERSxPAGES list (today, 2x1, always runs)"
    )
    parser.add_argument("--flags", default="", help="flag names to try, comma-separated")
    parser.add_argument("--flag-shape", default="2x1", help="the shape flags are tried on")
    parser.add_argument(
        "--with", dest="with_flags", default="", help="flag names every variant but today gets"
    )
    parser.add_argument("--loading", default="", help="set_content wait_until values to try")
    parser.add_argument(
        "--plot", type=Path, default=Path("out/bench-print.png"), help="PNG plot path"
    )


def command(args: argparse.Namespace) -> int:
    return main(
        as_json=args.json,
        jobs=args.jobs,
        shapes=_names(args.shapes),
        flags=_names(args.flags),
        flag_shape=args.flag_shape,
        with_flags=_names(args.with_flags),
        loading=_names(args.loading),
        plot_path=args.plot,
    )


def _names(text: str) -> list[str]:
    """A comma-separated option as a list, blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]
