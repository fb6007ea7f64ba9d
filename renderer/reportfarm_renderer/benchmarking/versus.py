"""``bench-gotenberg``'s report: one JSON-able dict, shown as tables and drawn as a PNG.

Three sides: ``gotenberg`` (HTTP round trip), ``reportfarm`` (our pool's print path, the
``reportfarm`` strategy of ``bench``) and ``end_to_end`` (queue -> renderer -> blob). Ratios are
ours over Gotenberg's, from one run on the same cores, so the per-core ratio equals the plain one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

Report = dict[str, Any]

SIDES: dict[str, str] = {
    "gotenberg": "Gotenberg: HTTP round trip, one browser, a tab per PDF",
    "reportfarm": "our pool: warm pages, guard, template (print path)",
    "end_to_end": "ours: submit -> queue -> renderer -> blob",
}
OURS = ("reportfarm", "end_to_end")

TARGETS: dict[str, tuple[str, float]] = {
    "end_to_end_over_gotenberg_pdf_per_s_per_core": (">=", 2.5),
    "end_to_end_over_gotenberg_mib_per_pdf_per_s": ("<", 1.0),
}
"""The issue's bar: end to end >= 2.5x Gotenberg's PDFs/s per core, with less peak memory per
PDF/s."""


def side(
    *,
    pdf_per_s: float,
    p50_ms: float,
    p95_ms: float,
    cores: int,
    peak_mib: float | None,
    **rest: Any,
) -> dict[str, Any]:
    """One side's row: the throughput and latency, per core, and memory per PDF/s."""
    return {
        "pdf_per_s": round(pdf_per_s, 2),
        "pdf_per_s_per_core": round(pdf_per_s / cores, 3),
        "p50_ms": round(p50_ms, 1),
        "p95_ms": round(p95_ms, 1),
        "peak_pss_mib": peak_mib,
        "mib_per_pdf_per_s": _divide(peak_mib, pdf_per_s, digits=1),
        **rest,
    }


def ratios(report: Mapping[str, Any]) -> dict[str, float | None]:
    """Ours over Gotenberg's for every measure (above 1 is better for PDFs/s, below 1 for
    latency and memory)."""
    theirs = report["gotenberg"]
    found: dict[str, float | None] = {}
    for name in OURS:
        ours = report[name]
        for key in ("pdf_per_s", "pdf_per_s_per_core", "p50_ms", "p95_ms"):
            found[f"{name}_over_gotenberg_{key.removesuffix('_ms')}"] = _divide(
                ours[key], theirs[key]
            )
        for key in ("peak_pss_mib", "mib_per_pdf_per_s"):
            found[f"{name}_over_gotenberg_{key.replace('_pss', '')}"] = _divide(
                ours[key], theirs[key]
            )
    return found


def targets(values: Mapping[str, float | None]) -> dict[str, dict[str, Any]]:
    checked = {}
    for name, (comparison, target) in TARGETS.items():
        value = values.get(name)
        met = None if value is None else (value >= target if comparison == ">=" else value < target)
        checked[name] = {"target": f"{comparison} {target:g}", "met": met}
    return checked


def show(report: Report, console: Console) -> None:
    params = report["parameters"]
    gotenberg = params["gotenberg"]
    table = Table(
        title=f"reportfarm vs Gotenberg {gotenberg['version']}: concurrency {params['pool_size']} "
        f"each, {params['jobs']} documents per side in rounds of {params['rounds']}, "
        f"{params['cores']} cores shared by both, Chromium {params['chromium']}"
    )
    columns = ("side", "what", "PDFs/s", "per core", "p50 ms", "p95 ms", "peak MiB", "MiB/(PDF/s)")
    for column in (*columns, "valid", "load1"):
        table.add_column(column, justify="left" if column in ("side", "what") else "right")
    for name, what in SIDES.items():
        row = report[name]
        table.add_row(
            name,
            what,
            f"{row['pdf_per_s']:.2f}",
            f"{row['pdf_per_s_per_core']:.2f}",
            f"{row['p50_ms']:.0f}",
            f"{row['p95_ms']:.0f}",
            _cell(row["peak_pss_mib"], ".0f"),
            _cell(row["mib_per_pdf_per_s"], ".0f"),
            f"{row['valid_pdfs']}/{row['pdfs']}",
            _cell(row["load1"], ".2f"),
        )
    console.print(table)
    checks = Table(title="ratios, ours / Gotenberg's (one run, same machine)")
    for column in ("ratio", "value", "target", "met"):
        checks.add_column(column, justify="left" if column == "ratio" else "right")
    for name, value in report["ratios"].items():
        target = report["targets"].get(name, {"target": "", "met": None})
        met = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "-"}[target["met"]]
        checks.add_row(name, _cell(value, ".2f"), target["target"], met)
    console.print(checks)
    same = report["sameness"]
    console.print(
        f"same PDFs: {same['same_pages']}/{same['documents']} documents with the same page count, "
        f"{same['same_text']}/{same['documents']} with the same text"
        + (f"; differences: {same['differences']}" if same["differences"] else "")
    )
    console.print(f"Gotenberg: {gotenberg['how']}; flags: {' '.join(gotenberg['flags'])}")
    if gotenberg["unknown_to_this_version"]:
        console.print(f"left out (unknown to it): {' '.join(gotenberg['unknown_to_this_version'])}")
    console.print(f"memory: {params['memory']}")
    console.print(f"load average before {params['load_before']}, after {params['load_after']}")


def plot(report: Report, path: Path) -> None:
    """Bars: PDFs/s per core, p50/p95 latency and peak memory per PDF/s, per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(SIDES)
    colors = ["#e07b39", "#2f7ed8", "#8e44ad"]
    figure, (rate, latency, memory) = plt.subplots(1, 3, figsize=(15, 5))
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
    per = [report[n]["mib_per_pdf_per_s"] or 0.0 for n in names]
    drawn = memory.bar(names, per, color=colors)
    memory.bar_label(drawn, fmt="%.0f")
    memory.set_title("peak PSS MiB per PDF/s (lower is better)")
    params = report["parameters"]
    figure.suptitle(
        f"reportfarm vs Gotenberg {params['gotenberg']['version']}: concurrency "
        f"{params['pool_size']}, {params['jobs']} documents/side, {params['cores']} shared cores, "
        f"load {params['load_before'][0]} -> {params['load_after'][0]}"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _divide(top: float | None, bottom: float | None, *, digits: int = 2) -> float | None:
    if top is None or bottom is None or not bottom or math.isnan(top) or math.isnan(bottom):
        return None
    return round(top / bottom, digits)


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
