"""``reportfarm bench pages``' report: ratios between sizes, a table, a PNG plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportfarm_bench import reporting

TARGETS = {
    "s_per_page": ("<=", 1.0, "seconds per page: total time grows at most linearly"),
    "worker_mib": ("<=", 2.0, "Python process + Playwright driver peak (500 vs 50: within 2x)"),
    "chromium_mib": ("<=", None, "browser peak: at most linear (<= the ratio of page counts)"),
}
"""Ratio (bigger size / smaller size): comparison, bound (None: the page-count ratio), meaning."""


def ratios(sizes: Mapping[str, Mapping[str, Any]], order: Sequence[int]) -> list[dict[str, Any]]:
    """Every larger size against every smaller one, for each measure in :data:`TARGETS`."""
    rows = []
    for index, small in enumerate(order):
        for big in order[index + 1 :]:
            low, high = sizes[str(small)], sizes[str(big)]
            page_ratio = high["pages"] / low["pages"]
            for measure, (_, bound, _) in TARGETS.items():
                value = _value(high, measure) / _value(low, measure)
                limit = page_ratio if bound is None else bound
                if measure == "worker_mib" and (small, big) != (50, 500):
                    limit = page_ratio  # the 2x target is the 500-vs-50 pages
                rows.append(
                    {
                        "measure": measure,
                        "sizes": f"{big}/{small}",
                        "value": round(value, 2),
                        "target": f"<= {limit:.3g}",
                        "met": value <= limit,
                    }
                )
    return rows


def _value(row: Mapping[str, Any], measure: str) -> float:
    if measure == "worker_mib":
        return float(row["python_mib"] + row["driver_mib"])
    return float(row[measure])


def show(report: Mapping[str, Any], console: Console) -> None:
    params = report["parameters"]
    table = Table(
        title=f"reportfarm bench pages: the month-end statement, 1 browser, {params['rounds']} "
        f"rounds, production defaults (render timeout {params['render_timeout']:.0f} s)"
    )
    columns = ("pages", "prints", "s/page", "PDF MiB", "blocks", "Python MiB", "driver MiB")
    for column in (*columns, "Chromium MiB", "whole", "load1"):
        table.add_column(column, justify="right")
    for row in report["sizes"].values():
        table.add_row(
            str(row["pages"]),
            str(row["prints"]),
            f"{row['s_per_page']:.3f}",
            f"{row['pdf_mib']:.1f}",
            str(row["blocks"]) if row["streamed"] else "1 request",
            f"{row['python_mib']:.0f}",
            f"{row['driver_mib']:.0f}",
            f"{row['chromium_mib']:.0f}",
            "yes" if row["complete"] else "[red]no[/red]",
            f"{row['load1']:.1f}",
        )
    console.print(table)
    checks = Table(title="ratios, larger size / smaller (one run, interleaved)")
    for column in ("measure", "sizes", "value", "target", "met"):
        checks.add_column(column, justify="left" if column == "measure" else "right")
    for row in report["ratios"]:
        met = "[green]yes[/green]" if row["met"] else "[red]no[/red]"
        what = f"{row['measure']}\n[dim]{TARGETS[row['measure']][2]}[/dim]"
        checks.add_row(what, row["sizes"], f"{row['value']:.2f}", row["target"], met)
    console.print(checks)
    console.print(f"load average before {params['load_before']}, after {params['load_after']}")


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Seconds per page and peak memory against pages (log-log), to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(report["sizes"].values())
    pages = [row["pages"] for row in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    left.plot(pages, [row["s_per_page"] * 1000 for row in rows], marker="o")
    left.set_ylabel("ms per page (median)")
    left.set_title("time per page")
    for name, label in (
        ("python_mib", "Python process"),
        ("driver_mib", "Playwright driver"),
        ("chromium_mib", "browser (PSS)"),
    ):
        right.plot(pages, [row[name] for row in rows], marker="o", label=label)
    right.set_ylabel("peak MiB")
    right.set_title("peak memory while printing")
    right.legend()
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_xlabel("pages")
        axis.set_xticks(pages, [str(p) for p in pages])
    params = report["parameters"]
    reporting.save_figure(
        figure,
        path,
        f"month-end statement, 1 browser, {params['cpu_count']} CPUs, "
        f"load {params['load_before'][0]} -> {params['load_after'][0]}",
    )
