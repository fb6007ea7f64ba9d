"""``reportfarm bench sync --gotenberg-concurrency 1,2,3,4,6,...``: Gotenberg's one knob swept
against the same side of ours.

Gotenberg prints at most ``--chromium-max-concurrency`` documents at once (1 to 6) and queues the
rest; the benchmark gives it our lanes by default (browsers x pages). With many requests at once
a Gotenberg user would raise it while the CPU has room, so the comparison at 8 and 20 concurrent
requests is only fair against its best value. Each value runs one whole benchmark (both sides,
interleaved rounds, the same documents), in the order given; repeats are allowed and are how the
noise shows. Ratios are taken within each run (ours / Gotenberg's, measured minutes apart on the
same machine), never across runs, whose absolute speeds drift.

Gotenberg's best value at a concurrency is the one where our PDFs/s ratio over it is lowest
(median over that value's runs), and the issue's targets are held against it."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportfarm_bench import reporting, sync_reporting

Report = dict[str, Any]
KEYS = {
    "pdf_per_s": "gateway/pdf_per_s",
    "p50": "gateway/p50_ms",
    "mib_per_pdf_per_s": "gateway/mib_per_pdf_per_s",
}
"""A point's ratios (ours / Gotenberg's) and where the run's report keeps them."""


def main(
    measure: Callable[[int], Report],
    values: Sequence[int],
    *,
    console: Console,
    as_json: bool,
    plot_path: Path | None,
) -> int:
    """Measure each value in turn, then show the sweep; 0 when the targets hold against
    Gotenberg's best value at each concurrency, 1 when one does not."""
    reports = []
    for index, value in enumerate(values, start=1):
        console.log(f"sweep {index} of {len(values)}: Gotenberg's concurrency {value}")
        reports.append(measure(value))
    sweep = summarize(reports)
    show(sweep, console)
    if plot_path is not None:
        plot(sweep, plot_path)
        console.log(f"plot: {plot_path}")
    if as_json:
        print(json.dumps({"sweep": sweep, "runs": reports}, indent=2))
    return 1 if False in sweep["verdicts"].values() else 0


def points(reports: Sequence[Report]) -> list[dict[str, Any]]:
    """One point per run and concurrency: Gotenberg's value, both sides' PDFs/s, the ratios."""
    found = []
    for run, report in enumerate(reports):
        value = report["parameters"]["gotenberg_concurrency"]
        for concurrency, ratios in report["ratios"].items():
            rows = report["by_concurrency"][concurrency]
            found.append(
                {
                    "run": run,
                    "gotenberg_concurrency": value,
                    "concurrency": int(concurrency),
                    "ours_pdf_per_s": rows["gateway"]["pdf_per_s"],
                    "theirs_pdf_per_s": rows["gotenberg"]["pdf_per_s"],
                    "theirs_cpu_ms_per_pdf": rows["gotenberg"]["cpu_ms_per_pdf"],
                    "theirs_peak_mib": rows["gotenberg"]["peak_mib"],
                    **{name: ratios.get(key) for name, key in KEYS.items()},
                }
            )
    return found


def summarize(reports: Sequence[Report]) -> dict[str, Any]:
    """The points, each value's medians and ranges per concurrency, Gotenberg's best value at
    each concurrency, and the targets' verdicts against it."""
    found = points(reports)
    by: dict[int, dict[int, dict[str, Any]]] = {}
    for concurrency in sorted({point["concurrency"] for point in found}):
        by[concurrency] = {}
        for value in sorted({point["gotenberg_concurrency"] for point in found}):
            mine = [
                point
                for point in found
                if point["concurrency"] == concurrency and point["gotenberg_concurrency"] == value
            ]
            if mine:
                by[concurrency][value] = _cell(mine)
    best = {
        concurrency: min(measured, key=lambda value: measured[value]["pdf_per_s"]["median"])
        for concurrency, cells in by.items()
        if (measured := {v: cell for v, cell in cells.items() if cell["pdf_per_s"] is not None})
    }
    lones = [r for report in reports if (r := report.get("lone", {}).get("ratio")) is not None]
    return {
        "points": found,
        "by_concurrency": {
            str(c): {str(v): cell for v, cell in cells.items()} for c, cells in by.items()
        },
        "best": {str(concurrency): value for concurrency, value in best.items()},
        "verdicts": verdicts(by, best, statistics.median(lones) if lones else None),
        "lone_ratio": statistics.median(lones) if lones else None,
        "targets": sync_reporting.TARGETS,
        "runs": len(reports),
    }


def _cell(mine: Sequence[dict[str, Any]]) -> dict[str, Any]:
    cell: dict[str, Any] = {"runs": len(mine)}
    for name in (*KEYS, "theirs_pdf_per_s", "theirs_cpu_ms_per_pdf", "theirs_peak_mib"):
        values = [point[name] for point in mine if point[name] is not None]
        cell[name] = (
            {"median": statistics.median(values), "min": min(values), "max": max(values)}
            if values
            else None
        )
    return cell


def verdicts(
    by: dict[int, dict[int, dict[str, Any]]], best: dict[int, int], lone: float | None
) -> dict[str, bool | None]:
    """The issue's targets as :func:`.sync_reporting.verdicts` holds them, the ratios taken at
    Gotenberg's best value at each concurrency (the median of that value's runs) and the lone
    request's ratio as the median over all runs (it does not involve Gotenberg); None where not
    measured."""
    ratios: dict[str, dict[str, float]] = {}
    for concurrency, cells in by.items():
        if concurrency not in best:
            continue
        cell = cells[best[concurrency]]
        ratios[str(concurrency)] = {
            key: cell[name]["median"] for name, key in KEYS.items() if cell[name] is not None
        }
    return sync_reporting.verdicts({"ratios": ratios, "lone": {"ratio": lone}})


def show(sweep: dict[str, Any], console: Console) -> None:
    table = Table(
        title="ours / Gotenberg's PDFs/s by Gotenberg's concurrency: median (range) over its "
        "runs; * its best value at that concurrency"
    )
    table.add_column("Gotenberg's concurrency", justify="right")
    levels = list(sweep["by_concurrency"])
    for concurrency in levels:
        table.add_column(f"at {concurrency}: ours / its", justify="right")
        table.add_column(f"its PDFs/s at {concurrency}", justify="right")
    values = sorted(
        {value for cells in sweep["by_concurrency"].values() for value in cells}, key=int
    )
    for value in values:
        row = [value]
        for concurrency in levels:
            cell = sweep["by_concurrency"][concurrency].get(value)
            mark = "*" if str(sweep["best"].get(concurrency)) == value else ""
            row += [_range(cell, "pdf_per_s", mark), _range(cell, "theirs_pdf_per_s", "")]
        table.add_row(*row)
    console.print(table)
    for name, met in sweep["verdicts"].items():
        mark = "-" if met is None else ("met" if met else "MISSED")
        console.print(f"target {name} ({sweep['targets'][name]}) against Gotenberg's best: {mark}")


def _range(cell: dict[str, Any] | None, name: str, mark: str) -> str:
    if cell is None or cell[name] is None:
        return "-"
    summary = cell[name]
    if cell["runs"] == 1:
        return f"{summary['median']:.2f}{mark}"
    return f"{summary['median']:.2f}{mark} ({summary['min']:.2f}-{summary['max']:.2f})"


def plot(sweep: dict[str, Any], path: Path) -> None:
    """Against Gotenberg's concurrency, one line per request concurrency through the medians,
    each run a dot: our PDFs/s over its, our p50 over its, our memory per PDF/s over its."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(1, 3, figsize=(16, 5))
    titles = {
        "pdf_per_s": "PDFs/s, ours / Gotenberg's (higher is better for us)",
        "p50": "client's p50 wait, ours / Gotenberg's (lower)",
        "mib_per_pdf_per_s": "MiB per PDF/s, ours / Gotenberg's (lower)",
    }
    targets = {"pdf_per_s": {2: 1.5, 8: 2.0}, "p50": {0: 0.7}, "mib_per_pdf_per_s": {0: 1.2}}
    for axes, name in zip(panels, KEYS, strict=True):
        for concurrency, cells in sweep["by_concurrency"].items():
            values = sorted(cells, key=int)
            medians = [(cells[v][name] or {}).get("median") for v in values]
            (line,) = axes.plot(
                [int(v) for v in values], medians, marker="o", label=f"{concurrency} at once"
            )
            dots = [p for p in sweep["points"] if p["concurrency"] == int(concurrency)]
            axes.scatter(
                [p["gotenberg_concurrency"] for p in dots],
                [p[name] for p in dots],
                color=line.get_color(),
                alpha=0.35,
                s=14,
            )
            target = targets[name].get(int(concurrency), targets[name].get(0))
            if target is not None:
                axes.axhline(target, color=line.get_color(), ls=":", lw=1)
        axes.set_title(titles[name])
        axes.set_xlabel("Gotenberg's --chromium-max-concurrency")
    panels[0].legend(title="requests")
    reporting.save_figure(
        figure,
        path,
        f"bench sync: Gotenberg's concurrency swept against the same side of ours, {sweep['runs']} "
        "runs (dotted: the issue's targets)",
    )
