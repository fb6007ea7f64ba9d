"""``reportfarm bench-sync``: the synchronous path as a client meets it, side by side with
Gotenberg given the same Chromium.

One client (this process) calls every side over HTTP and waits for each PDF, at 1, 2, 8 and 20
concurrent requests (``--concurrency``), in interleaved rounds (forward, then backward), one side
at a time:

- ``gateway``: ``POST /v1/reports`` to our gateway process, in front of a renderer process
  (``--pool-size`` browsers) and Azurite, with the hints on (the gateway wakes the renderer; the
  renderer tells the gateway when the record is stored): :mod:`.benchmarking.synchronous`.
- ``gateway_polling`` (``--polling``): the same path without the hints, as it was before them.
- ``gotenberg``: Gotenberg (``--gotenberg-bin``) given the same Chromium binary as our renderer,
  its concurrency our pool size, the document's rendered HTML posted to its Chromium route.

Per side and concurrency: PDFs/s, p50/p95 of the client's wait, CPU per PDF of the side's whole
process tree (ours: gateway with its checking processes, renderer with its browsers, Azurite;
theirs: Gotenberg with its browser), and peak PSS of that tree per PDF/s. The lone request
(concurrency 1) is also held against a warm print plus its upload (the renderer's own stages for
the same jobs). The machine's load is recorded with every chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from reportfarm import loops, renderer_api
from reportfarm.quantiles import quantile
from reportfarm_renderer import browser
from reportfarm_renderer.benchmarking import documents as documenting
from reportfarm_renderer.benchmarking import footprint, idling, measuring, reporting
from reportfarm_renderer.benchmarking import gotenberg as gotenberging
from reportfarm_renderer.benchmarking import synchronous as sync

CONCURRENCIES = (1, 2, 8, 20)
TARGETS = {
    "pdf_per_s_at_2": 1.5,
    "pdf_per_s_at_8": 2.0,
    "p50_at_most": 0.7,
    "mib_per_pdf_per_s_at_most": 1.2,
    "lone_vs_print_and_upload_at_most": 1.3,
}
"""Issue 28's targets: ours / Gotenberg's (PDFs/s at least; p50 and memory at most), and a lone
request's p50 / the p50 of its warm print plus upload."""

Side = str


class _Side:
    def __init__(self, name: Side, convert: measuring.Job, roots: dict[str, int]) -> None:
        self.name, self.convert, self.roots = name, convert, roots


async def run(
    *,
    concurrencies: Sequence[int],
    jobs: int,
    rounds: int,
    pool_size: int,
    gotenberg_bin: Path,
    polling: bool,
    console: Console,
    pages_per_browser: int = 1,
) -> dict[str, Any]:
    _, documents = documenting.load()
    load_before = _load()
    async with contextlib.AsyncExitStack() as stack:
        chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
        async with browser.ChromiumLauncher(executable_path=chromium_path) as launcher:
            chromium = launcher.executable_path or launcher.playwright.chromium.executable_path
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sync-")))
        sides: dict[Side, _Side] = {}
        paths: dict[Side, sync.OurPath] = {}
        clients: dict[Side, sync.SyncClient] = {}
        for name, hints in (("gateway", True), ("gateway_polling", False)):
            if name == "gateway_polling" and not polling:
                continue
            folder = logs / name
            folder.mkdir()
            ours = await stack.enter_async_context(
                sync.our_path(
                    pool_size=pool_size,
                    logs=folder,
                    hints=hints,
                    pages_per_browser=pages_per_browser,
                )
            )
            client = await stack.enter_async_context(sync.SyncClient(ours.url))
            sides[name], paths[name], clients[name] = (
                _Side(name, client.convert, ours.pids),
                ours,
                client,
            )
            console.log(
                f"{name}: gateway {ours.url}, renderer of {pool_size} browser(s) x "
                f"{pages_per_browser} page(s)"
            )
        server = await stack.enter_async_context(
            gotenberging.serving(
                gotenberg_bin,
                concurrency=pool_size * pages_per_browser,
                restart_after=100,
                chromium=chromium,
            )
        )
        theirs = await stack.enter_async_context(gotenberging.Client(server.url))

        async def convert(lane: int, document: documenting.Document) -> bytes:
            return await theirs.convert(document.html, document.pdf)

        assert server.pid is not None
        sides["gotenberg"] = _Side("gotenberg", convert, {"gotenberg": server.pid})
        console.log(f"gotenberg {server.version} at {server.url}, Chromium {chromium}")
        for side in sides.values():
            lanes = pool_size * pages_per_browser
            await measuring.warm_up(side.convert, documents, count=2 * lanes, concurrency=lanes)
        runs = {c: {name: measuring.Run(name) for name in sides} for c in concurrencies}
        cpu_s = {c: dict.fromkeys(sides, 0.0) for c in concurrencies}
        peaks = {
            c: {name: footprint.Peak(sync.members(side.roots)) for name, side in sides.items()}
            for c in concurrencies
        }
        parts = {  # each part of our path apart: where the memory is
            c: {
                part: footprint.Peak(sync.members({part: pid}))
                for part, pid in paths["gateway"].pids.items()
            }
            for c in concurrencies
        }
        lone_ids: list[str] = []
        counts = {c: max(jobs, 2 * c) for c in concurrencies}
        total = rounds * len(sides) * sum(counts.values())
        order = list(sides)
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("documents", total=total)
            for index in range(rounds):
                for concurrency in concurrencies:
                    count = counts[concurrency]
                    for name in order if index % 2 == 0 else reversed(order):
                        side = sides[name]
                        progress.update(
                            task, description=f"round {index + 1}: {name} x{concurrency}"
                        )
                        before = await asyncio.to_thread(sync.tree_cpu_s, side.roots)
                        known = len(clients["gateway"].job_ids)
                        sampled = [peaks[concurrency][name]]
                        if name == "gateway":
                            sampled += parts[concurrency].values()
                        async with contextlib.AsyncExitStack() as sampling:
                            for peak in sampled:
                                await sampling.enter_async_context(peak.sampling())
                            await measuring.closed_loop(
                                side.convert,
                                documents,
                                run=runs[concurrency][name],
                                count=count,
                                concurrency=concurrency,
                                offset=index * count,
                            )
                        after = await asyncio.to_thread(sync.tree_cpu_s, side.roots)
                        cpu_s[concurrency][name] += after - before
                        if concurrency == 1 and name == "gateway":
                            lone_ids += clients["gateway"].job_ids[known:]
                        progress.advance(task, count)
        print_upload = await sync.print_and_upload_s(paths["gateway"].client, lone_ids)
    report = _report(
        runs=runs,
        cpu_s=cpu_s,
        peaks=peaks,
        print_upload=print_upload,
        parameters={
            "concurrencies": list(concurrencies),
            "documents_per_chunk": counts,
            "rounds": rounds,
            "pool_size": pool_size,
            "pages_per_browser": pages_per_browser,
            "gotenberg_concurrency": pool_size * pages_per_browser,
            "documents": len(documents),
            "cores": len(os.sched_getaffinity(0)),
            "chromium_path": chromium,
            "gotenberg": {"version": server.version, "flags": server.flags},
            "python": platform.python_version(),
            "load_before": load_before,
            "load_after": _load(),
            "memory": "peak PSS of each side's whole process tree while it served (ours: the "
            "gateway process and its checking processes, the renderer process, its driver and "
            f"browsers, Azurite; theirs: Gotenberg and its browser), sampled every "
            f"{footprint.INTERVAL_S} s; the client (this process) is neither's",
            "cpu": "CPU seconds of the same trees during each side's chunks, per PDF",
        },
    )
    for concurrency, peaked in parts.items():
        report["by_concurrency"][str(concurrency)]["gateway"]["peak_pss_mib_by_part"] = {
            part: peak.peak_mib for part, peak in peaked.items()
        }
    return report


def _report(
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
            peak = peaks[concurrency][name].peak_mib
            rate = measured.pdf_per_s
            rows[name] = {
                **summary,
                "cpu_ms_per_pdf": round(cpu_s[concurrency][name] * 1000 / measured.count, 1)
                if measured.count
                else None,
                "peak_pss_mib": peak,
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


def show(report: dict[str, Any], console: Console) -> None:
    table = Table(title="the synchronous path, as a client meets it")
    for column in ("concurrency", "side", "PDFs/s", "p50 ms", "p95 ms", "CPU ms/PDF"):
        table.add_column(column, justify="right")
    for column in ("peak MiB", "MiB per PDF/s", "load"):
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
                _cell(row["peak_pss_mib"], ".0f"),
                _cell(row["mib_per_pdf_per_s"], ".0f"),
                _cell(row["load1"], ".1f"),
            )
    console.print(table)
    for concurrency, rows in report["by_concurrency"].items():
        split = rows["gateway"].get("peak_pss_mib_by_part", {})
        shown = ", ".join(f"{part} {_cell(mib, '.0f')}" for part, mib in split.items())
        console.print(f"our path's peak MiB by part at {concurrency} concurrent: {shown}")
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
    memory.set_title("peak MiB (PSS) per PDF/s (lower is better)")
    for axes in (rate, latency, memory):
        axes.set_xscale("log")
        axes.set_xticks(levels, [str(c) for c in levels])
        axes.set_xlabel("concurrent requests")
    params = report["parameters"]
    reporting.save_figure(
        figure,
        path,
        f"synchronous path vs Gotenberg {params['gotenberg']['version']} (same Chromium), pool "
        f"{params['pool_size']}, {params['rounds']} rounds, {params['cores']} shared cores, "
        f"load {params['load_before'][0]} -> {params['load_after'][0]}",
    )


def main(
    *,
    as_json: bool,
    gotenberg_bin: Path,
    concurrencies: Sequence[int] = CONCURRENCIES,
    jobs: int = 24,
    rounds: int = 3,
    pool_size: int = 2,
    polling: bool = False,
    plot_path: Path | None = None,
    idle_s: float = 0.0,
    pages_per_browser: int = 1,
) -> int:
    """Run it; 0 when every target was met, 1 when one was missed, 2 on bad arguments."""
    if min(jobs, rounds, pool_size, pages_per_browser, *concurrencies, 1) < 1 or not concurrencies:
        print(
            "bench-sync: --jobs, --rounds, --pool-size and each concurrency >= 1", file=sys.stderr
        )
        return 2
    if not (gotenberg_bin.is_file() and os.access(gotenberg_bin, os.X_OK)):
        print(f"bench-sync: {gotenberg_bin} is not an executable Gotenberg", file=sys.stderr)
        return 2
    console = reporting.bench_console(as_json, width=160)
    started = time.monotonic()
    report = loops.run(
        run(
            concurrencies=concurrencies,
            jobs=jobs,
            rounds=rounds,
            pool_size=pool_size,
            gotenberg_bin=gotenberg_bin,
            polling=polling,
            console=console,
            pages_per_browser=pages_per_browser,
        )
    )
    if idle_s > 0:
        console.log(f"idle farm: counting storage requests for {idle_s:.0f} s")
        report["idle"] = loops.run(idling.idle_requests(seconds=idle_s, pool_size=pool_size))
        show_idle(report["idle"], console)
    report["verdicts"] = verdicts(report)
    report["parameters"]["seconds"] = round(time.monotonic() - started, 1)
    show(report, console)
    if plot_path is not None:
        plot(report, plot_path)
        console.log(f"plot: {plot_path}")
    if as_json:
        print(json.dumps(report, indent=2))
    return 1 if False in report["verdicts"].values() else 0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]
