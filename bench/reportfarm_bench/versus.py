"""``reportfarm bench gotenberg``'s report: one JSON-able dict, shown as tables and drawn as a PNG.

Its sides: one or more Gotenbergs (HTTP round trip), each given its own Chromium (``gotenberg``:
the same binary as ours; ``gotenberg_full``: Debian's full ``chromium``, as Gotenberg's image
runs it), then ours: ``reportfarm`` (our pool's print path, the ``reportfarm`` strategy of
``bench``) and ``end_to_end`` (queue -> renderer -> blob). Ratios are ours over each Gotenberg
side's, from one run on the same cores, so the per-core ratio equals the plain one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportfarm_bench import reporting

Report = dict[str, Any]

OURS: dict[str, str] = {
    "reportfarm": "our pool: warm pages, guard, template (print path)",
    "end_to_end": "ours: submit -> queue -> renderer -> blob",
}
GOTENBERG_WHAT = "Gotenberg over HTTP: one browser, a tab per PDF"
MEASURES = (
    "pdf_per_s",
    "pdf_per_s_per_core",
    "p50_ms",
    "p95_ms",
    "peak_pss_mib",
    "mib_per_pdf_per_s",
    "peak_alone_mib",
    "alone_mib_per_pdf_per_s",
)

TARGETS: dict[str, tuple[str, float]] = {
    "end_to_end_over_{theirs}_pdf_per_s_per_core": (">=", 2.5),
    "end_to_end_over_{theirs}_mib_per_pdf_per_s": ("<", 1.0),
    "end_to_end_over_{theirs}_alone_mib_per_pdf_per_s": ("<", 1.0),
}
"""The issue's bar, against every Gotenberg side: end to end >= 2.5x Gotenberg's PDFs/s per core,
with less peak memory per PDF/s (PSS, and as if alone: when Gotenberg runs our Chromium binary,
PSS splits the binary's pages between the two sides)."""


def side(
    *,
    pdf_per_s: float,
    p50_ms: float,
    p95_ms: float,
    cores: int,
    peak_mib: float | None,
    alone_mib: float | None = None,
    **rest: Any,
) -> dict[str, Any]:
    """One side's row: the throughput and latency, per core, and memory per PDF/s: peak PSS, and
    peak memory as if alone (:func:`.footprint.alone`: no page discounted for being shared with
    another side)."""
    return {
        "pdf_per_s": round(pdf_per_s, 2),
        "pdf_per_s_per_core": round(pdf_per_s / cores, 3),
        "p50_ms": round(p50_ms, 1),
        "p95_ms": round(p95_ms, 1),
        "peak_pss_mib": peak_mib,
        "mib_per_pdf_per_s": _divide(peak_mib, pdf_per_s, digits=1),
        "peak_alone_mib": alone_mib,
        "alone_mib_per_pdf_per_s": _divide(alone_mib, pdf_per_s, digits=1),
        **rest,
    }


def gotenberg_sides(report: Mapping[str, Any]) -> list[str]:
    """The Gotenberg sides that printed (a row each), in the report's order."""
    return [
        name
        for name, row in report.items()
        if name.startswith("gotenberg") and isinstance(row, Mapping) and "pdf_per_s" in row
    ]


def measured(report: Mapping[str, Any]) -> list[str]:
    """Every side with a row: the Gotenbergs, then ours."""
    return [*gotenberg_sides(report), *(name for name in OURS if name in report)]


def ratio_key(ours: str, theirs: str, measure: str) -> str:
    short = measure.removesuffix("_ms").replace("_pss", "")
    if short == "peak_alone_mib":
        short = "alone_mib"
    return f"{ours}_over_{theirs}_{short}"


def ratios(report: Mapping[str, Any]) -> dict[str, float | None]:
    """Ours over each Gotenberg side's for every measure (above 1 is better for PDFs/s, below 1
    for latency and memory)."""
    found: dict[str, float | None] = {}
    for theirs in gotenberg_sides(report):
        for name in OURS:
            for measure in MEASURES:
                found[ratio_key(name, theirs, measure)] = _divide(
                    report[name].get(measure), report[theirs].get(measure)
                )
    return found


def targets(values: Mapping[str, float | None], theirs: Sequence[str]) -> dict[str, dict[str, Any]]:
    checked = {}
    for side_name in theirs:
        for template, (comparison, target) in TARGETS.items():
            name = template.format(theirs=side_name)
            checked[name] = reporting.check(values.get(name), comparison, target)
    return checked


def show(report: Report, console: Console) -> None:
    console.print(_sides_table(report))
    params = report["parameters"]
    gotenberg = params["gotenberg"]
    console.print(f"our Chromium (reportfarm, end_to_end): {params['chromium_path']}")
    for name, about in gotenberg["sides"].items():
        console.print(
            f"{name}'s Chromium: {about['chromium_path'] or '-'} ({about['chromium']}): "
            f"{about['which']}"
        )
    console.print(_ratio_table(report))
    checks = Table(title="the bar, end to end / each Gotenberg side")
    for column in ("ratio", "value", "target", "met"):
        checks.add_column(column, justify="left" if column == "ratio" else "right")
    for name, target in report["targets"].items():
        met = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "-"}[target["met"]]
        checks.add_row(name, _cell(report["ratios"].get(name), ".2f"), target["target"], met)
    console.print(checks)
    for line in _notes(report):
        console.print(line)


def _sides_table(report: Report) -> Table:
    params = report["parameters"]
    gotenberg = params["gotenberg"]
    table = Table(
        title=f"reportfarm vs Gotenberg {gotenberg['version']}: concurrency {params['pool_size']} "
        f"each, {params['jobs']} documents per side in rounds of {params['rounds']}, "
        f"{params['cores']} cores shared by all, our Chromium {params['chromium']}"
    )
    columns = ("side", "what", "PDFs/s", "per core", "p50 ms", "p95 ms", "CPU ms/PDF")
    memory = ("PSS MiB", "/(PDF/s)", "alone MiB", "/(PDF/s)")
    for column in (*columns, *memory, "valid", "load1"):
        table.add_column(column, justify="left" if column in ("side", "what") else "right")
    for name, about in gotenberg["sides"].items():
        if about["status"] != "ran":
            table.add_row(name, f"[red]{about['status']}:[/red] {about['reason']}")
    for name in measured(report):
        row = report[name]
        table.add_row(
            name,
            report["sides"][name],
            f"{row['pdf_per_s']:.2f}",
            f"{row['pdf_per_s_per_core']:.2f}",
            f"{row['p50_ms']:.0f}",
            f"{row['p95_ms']:.0f}",
            _cell(row.get("cpu_ms_per_pdf"), ".0f"),
            _cell(row["peak_pss_mib"], ".0f"),
            _cell(row["mib_per_pdf_per_s"], ".0f"),
            _cell(row.get("peak_alone_mib"), ".0f"),
            _cell(row.get("alone_mib_per_pdf_per_s"), ".0f"),
            f"{row['valid_pdfs']}/{row['pdfs']}",
            _cell(row["load1"], ".2f"),
        )
    return table


def _ratio_table(report: Report) -> Table:
    shown = (
        *("pdf_per_s_per_core", "p50_ms", "p95_ms", "peak_pss_mib", "mib_per_pdf_per_s"),
        *("peak_alone_mib", "alone_mib_per_pdf_per_s"),
    )
    matrix = Table(title="ratios, ours / each Gotenberg side's (one run, same machine)")
    columns = ("PDFs/s (per core)", "p50", "p95", "PSS", "PSS/(PDF/s)", "alone", "alone/(PDF/s)")
    for column in ("ours / theirs", *columns):
        matrix.add_column(column, justify="left" if column == "ours / theirs" else "right")
    for their in gotenberg_sides(report):
        for ours in OURS:
            values = [report["ratios"].get(ratio_key(ours, their, m)) for m in shown]
            matrix.add_row(f"{ours} / {their}", *(_cell(v, ".2f") for v in values))
    return matrix


def _notes(report: Report) -> list[str]:
    params = report["parameters"]
    gotenberg = params["gotenberg"]
    lines = []
    for their, same in report["sameness"].items():
        lines.append(
            f"same PDFs, ours and {their}'s: {same['same_pages']}/{same['documents']} documents "
            f"with the same page count, {same['same_text']}/{same['documents']} with the same text"
            + (f"; differences: {same['differences']}" if same["differences"] else "")
        )
    for their in gotenberg_sides(report):
        idle = report[their].get("idle")
        if idle and idle["wall_s"]:
            lines.append(
                f"{their} idle while the other sides printed: {idle['cpu_s']:.1f} CPU s in "
                f"{idle['wall_s']:.1f} s ({idle['cores']:.3f} of a core); printing, its tree took "
                f"{_cell(report[their].get('cpu_ms_per_pdf'), '.0f')} CPU ms per PDF"
            )
    lines.append(f"Gotenberg: {gotenberg['how']}")
    flags: dict[str, list[str]] = {}
    for name, about in gotenberg["sides"].items():
        if about.get("flags"):
            shown = " ".join(f for f in about["flags"] if not f.startswith("--api-port="))
            flags.setdefault(shown, []).append(name)
    for shown, names in flags.items():
        lines.append(f"flags of {', '.join(names)} (besides each one's --api-port): {shown}")
    for name, about in gotenberg["sides"].items():
        if about.get("unknown_to_this_version"):
            left = " ".join(about["unknown_to_this_version"])
            lines.append(f"{name}: left out (unknown to it): {left}")
    lines.append(f"memory: {params['memory']}")
    lines.append(f"load average before {params['load_before']}, after {params['load_after']}")
    return lines


def plot(report: Report, path: Path) -> None:
    """Bars: PDFs/s per core, p50/p95 latency and peak memory per PDF/s, per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = measured(report)
    theirs = gotenberg_sides(report)
    warm, cool = ["#e07b39", "#c0392b", "#f1c40f", "#7f3f00"], ["#2f7ed8", "#8e44ad"]
    colors = [warm[i % len(warm)] for i in range(len(theirs))] + cool[: len(names) - len(theirs)]
    figure, (rate, latency, memory) = plt.subplots(1, 3, figsize=(max(15, 4.5 * len(names)), 5))
    drawn = rate.bar(names, [report[n]["pdf_per_s_per_core"] for n in names], color=colors)
    rate.bar_label(drawn, fmt="%.2f")
    rate.set_title("PDFs/s per core (higher is better)")
    width = 0.38
    for shift, key in ((-width / 2, "p50_ms"), (width / 2, "p95_ms")):
        bars = latency.bar(
            [x + shift for x in range(len(names))],
            [report[n][key] for n in names],
            width,
            label=key.removesuffix("_ms"),
        )
        latency.bar_label(bars, fmt="%.0f", fontsize=8)
    latency.set_xticks(range(len(names)), names)
    latency.set_title("latency per PDF, ms (lower is better)")
    latency.legend()
    alone = all(report[n].get("alone_mib_per_pdf_per_s") for n in names)
    key = "alone_mib_per_pdf_per_s" if alone else "mib_per_pdf_per_s"
    what = "as if alone" if alone else "PSS"
    drawn = memory.bar(names, [report[n][key] or 0.0 for n in names], color=colors)
    memory.bar_label(drawn, fmt="%.0f")
    memory.set_title(f"peak MiB ({what}) per PDF/s (lower is better)")
    for axes in (rate, latency, memory):
        axes.tick_params(axis="x", labelsize=8)
    params = report["parameters"]
    chromiums = "; ".join(
        f"{name}: {Path(about['chromium_path']).name}"
        for name, about in params["gotenberg"]["sides"].items()
        if about["status"] == "ran" and about["chromium_path"]
    )
    reporting.save_figure(
        figure,
        path,
        f"reportfarm vs Gotenberg {params['gotenberg']['version']}: concurrency "
        f"{params['pool_size']}, {params['jobs']} documents/side, {params['cores']} shared cores, "
        f"load {params['load_before'][0]} -> {params['load_after'][0]}\n"
        f"ours: {Path(params['chromium_path']).name}; {chromiums}",
    )


def _divide(top: float | None, bottom: float | None, *, digits: int = 2) -> float | None:
    if top is None or bottom is None or not bottom or math.isnan(top) or math.isnan(bottom):
        return None
    return round(top / bottom, digits)


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
