"""``reportfarm bench sync``'s report: the table by concurrency, the ratios against Gotenberg, the
targets' verdicts, the idle farm's requests, and the plot."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportfarm.quantiles import quantile
from reportfarm_bench import footprint, measuring, reporting

Side = str

TARGETS = {
    "pdf_per_s_at_2": 1.5,
    "pdf_per_s_at_8": 2.0,
    "p50_at_most": 0.7,
    "mib_per_pdf_per_s_at_most": 1.2,
    "lone_vs_print_and_upload_at_most": 1.3,
}
"""Issue 28's targets: ours / Gotenberg's (PDFs/s at least; p50 and memory at most), and a lone
request's p50 / the p50 of its warm print plus upload.

Memory is each side's peak *as if alone* (``footprint.alone``: anonymous PSS plus every distinct
file page once) where page frames are readable, else its PSS: both sides run the same Chromium
binary at once, and PSS would split its pages by how many processes of either side map them."""


def build(
    *,
    runs: dict[int, dict[Side, measuring.Run]],
    cpu_s: dict[int, dict[Side, float]],
    peaks: dict[int, dict[Side, footprint.Peak]],
    print_upload: list[float],
    parameters: dict[str, Any],
) -> dict[str, Any]:
    table: dict[str, dict[Side, dict[str, Any]]] = {}
    ratios: dict[str, dict[str, float | None]] = {}
    for concurrency, by_side in runs.items():
        rows = table[str(concurrency)] = {}
        for name, measured in by_side.items():
            summary = measured.summary()
            sampled = peaks[concurrency][name]
            pss, alone = sampled.peak_mib, getattr(sampled, "alone_peak_mib", None)
            peak = alone or pss  # the tree as if alone on its node, where page frames are readable
            rate = measured.pdf_per_s
            rows[name] = {
                **summary,
                "cpu_ms_per_pdf": round(cpu_s[concurrency][name] * 1000 / measured.count, 1)
                if measured.count
                else None,
                "peak_pss_mib": pss,
                "peak_alone_mib": alone,
                "peak_mib": peak,
                "mib_per_pdf_per_s": round(peak / rate, 1) if peak and rate else None,
            }
        ratios[str(concurrency)] = _ratios(rows)
    lone = runs[min(runs)]["gateway"] if 1 in runs else None
    lone_p50 = quantile(lone.latencies_s, 0.5) if lone else None
    floor = statistics.median(print_upload) if print_upload else None
    return {
        "by_concurrency": table,
        "ratios": ratios,
        "lone": {
            "p50_ms": _ms(lone_p50),
            "print_and_upload_p50_ms": _ms(floor),
            "ratio": round(lone_p50 / floor, 2) if lone_p50 and floor else None,
            "jobs": len(print_upload),
        },
        "targets": TARGETS,
        "parameters": parameters,
    }


def _ratios(rows: dict[Side, dict[str, Any]]) -> dict[str, float | None]:
    """gateway / gotenberg (and gateway_polling / gotenberg when measured)."""
    found: dict[str, float | None] = {}
    theirs = rows["gotenberg"]
    for name in rows:
        if name == "gotenberg":
            continue
        for key in ("pdf_per_s", "p50_ms", "p95_ms", "cpu_ms_per_pdf", "mib_per_pdf_per_s"):
            top, bottom = rows[name].get(key), theirs.get(key)
            found[f"{name}/{key}"] = round(top / bottom, 2) if top and bottom else None
    return found


def verdicts(report: dict[str, Any]) -> dict[str, bool | None]:
    """Each target met (True), missed (False) or not measured (None)."""
    ratios, lone = report["ratios"], report["lone"]

    def at(concurrency: int, key: str) -> float | None:
        return ratios.get(str(concurrency), {}).get(f"gateway/{key}")

    def atleast(value: float | None, bound: float) -> bool | None:
        return None if value is None else value >= bound

    def atmost(value: float | None, bound: float) -> bool | None:
        return None if value is None else value <= bound

    p50s = [v for c in ratios if (v := at(int(c), "p50_ms")) is not None]
    mems = [v for c in ratios if (v := at(int(c), "mib_per_pdf_per_s")) is not None]
    return {
        "pdf_per_s_at_2": atleast(at(2, "pdf_per_s"), TARGETS["pdf_per_s_at_2"]),
        "pdf_per_s_at_8": atleast(at(8, "pdf_per_s"), TARGETS["pdf_per_s_at_8"]),
        "p50_at_most": atmost(max(p50s) if p50s else None, TARGETS["p50_at_most"]),
        "mib_per_pdf_per_s_at_most": atmost(
            max(mems) if mems else None, TARGETS["mib_per_pdf_per_s_at_most"]
        ),
        "lone_vs_print_and_upload_at_most": atmost(
            lone["ratio"], TARGETS["lone_vs_print_and_upload_at_most"]
        ),
    }


def _show_requests(concurrency: str, rows: dict[str, Any], console: Console) -> None:
    """Each of our sides' storage requests a PDF (``--count-requests``), if counted."""
    for name, row in rows.items():
        counted = row.get("storage_requests_per_pdf")
        if counted:
            console.print(
                f"{name}'s storage requests a PDF at {concurrency} concurrent: "
                f"{counted['all']:.1f}, of which {counted['receives']:.1f} receives"
            )


def show(report: dict[str, Any], console: Console) -> None:
    table = Table(title="the synchronous path, as a client meets it")
    for column in ("concurrency", "side", "PDFs/s", "p50 ms", "p95 ms", "CPU ms/PDF"):
        table.add_column(column, justify="right")
    for column in ("peak MiB", "(PSS)", "MiB per PDF/s", "load"):
        table.add_column(column, justify="right")
    for concurrency, rows in report["by_concurrency"].items():
        for name, row in rows.items():
            table.add_row(
                concurrency,
                name,
                f"{row['pdf_per_s']:.2f}",
                f"{row['p50_ms']:.0f}",
                f"{row['p95_ms']:.0f}",
                _cell(row["cpu_ms_per_pdf"], ".0f"),
                _cell(row["peak_mib"], ".0f"),
                _cell(row["peak_pss_mib"], ".0f"),
                _cell(row["mib_per_pdf_per_s"], ".0f"),
                _cell(row["load1"], ".1f"),
            )
    console.print(table)
    for concurrency, rows in report["by_concurrency"].items():
        split = rows["gateway"].get("peak_mib_by_part", {})
        shown = ", ".join(f"{part} {_cell(mib, '.0f')}" for part, mib in split.items())
        console.print(f"our path's peak MiB by part at {concurrency} concurrent: {shown}")
        split = rows["gateway"].get("cpu_ms_per_pdf_by_part", {})
        shown = ", ".join(f"{part} {_cell(ms, '.0f')}" for part, ms in split.items())
        console.print(f"our path's CPU ms per PDF by part at {concurrency} concurrent: {shown}")
        _show_requests(concurrency, rows, console)
    ratios = Table(title="gateway / gotenberg (same Chromium)")
    for column in ("concurrency", "PDFs/s", "p50", "p95", "CPU/PDF", "MiB per PDF/s"):
        ratios.add_column(column, justify="right")
    for concurrency, found in report["ratios"].items():
        keys = ("pdf_per_s", "p50_ms", "p95_ms", "cpu_ms_per_pdf", "mib_per_pdf_per_s")
        ratios.add_row(concurrency, *(_cell(found.get(f"gateway/{k}"), ".2f") for k in keys))
    console.print(ratios)
    lone = report["lone"]
    console.print(
        f"lone request: p50 {_cell(lone['p50_ms'], '.0f')} ms, its warm print + upload "
        f"{_cell(lone['print_and_upload_p50_ms'], '.0f')} ms: {_cell(lone['ratio'], '.2f')}x"
    )
    phases = lone.get("phases_p50_ms") or {}
    if phases:
        shown = ", ".join(f"{name} {_cell(ms, '.0f')}" for name, ms in phases.items())
        console.print(f"lone request, median ms by phase: {shown}")
    stages = lone.get("stages_p50_ms") or {}
    if stages:
        shown = ", ".join(f"{name} {ms:.0f}" for name, ms in stages.items())
        console.print(f"lone request, the renderer's stages (median ms): {shown}")
    for name, met in verdicts(report).items():
        mark = "-" if met is None else ("met" if met else "MISSED")
        console.print(f"target {name} ({TARGETS[name]}): {mark}")


def show_idle(idle: dict[str, Any], console: Console) -> None:
    table = Table(title=f"an idle farm's storage requests ({idle['seconds']:.0f} s counted)")
    for column in ("request (service, method, queue/lane, what)", "counted", "per hour"):
        table.add_column(column, justify="right")
    for name, per_hour in idle["per_hour"].items():
        table.add_row(name, str(idle["requests"][name]), f"{per_hour:,}")
    table.add_row("all", str(sum(idle["requests"].values())), f"{sum(idle['per_hour'].values()):,}")
    console.print(table)


def plot(report: dict[str, Any], path: Path) -> None:
    """Lines against concurrency, per side: PDFs/s, p50 (p95 dashed), MiB per PDF/s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [int(c) for c in report["by_concurrency"]]
    names = list(report["by_concurrency"][str(levels[0])])
    figure, (rate, latency, memory) = plt.subplots(1, 3, figsize=(16, 5))
    for name in names:
        rows = [report["by_concurrency"][str(c)][name] for c in levels]
        (line,) = rate.plot(levels, [r["pdf_per_s"] for r in rows], marker="o", label=name)
        latency.plot(levels, [r["p50_ms"] for r in rows], marker="o", color=line.get_color())
        latency.plot(levels, [r["p95_ms"] for r in rows], ls="--", color=line.get_color())
        memory.plot(
            levels, [r["mib_per_pdf_per_s"] or 0 for r in rows], marker="o", color=line.get_color()
        )
    rate.set_title("PDFs/s (higher is better)")
    rate.legend()
    latency.set_title("client wait, ms: p50, p95 dashed (lower is better)")
    latency.set_yscale("log")
    memory.set_title("peak MiB (as if alone) per PDF/s (lower is better)")
    for axes in (rate, latency, memory):
        axes.set_xscale("log")
        axes.set_xticks(levels, [str(c) for c in levels])
        axes.set_xlabel("concurrent requests")
    params = report["parameters"]
    reporting.save_figure(
        figure,
        path,
        f"synchronous path vs Gotenberg {params['gotenberg']['version']} (same Chromium), ours "
        f"{params['pool_size']}x{params['pages_per_browser']} pages, Gotenberg's concurrency "
        f"{params['gotenberg_concurrency']}, {params['rounds']} rounds, {params['cores']} shared "
        f"cores, load {params['load_before'][0]} -> {params['load_after'][0]}",
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
