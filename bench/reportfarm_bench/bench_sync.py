"""``reportfarm bench sync``: the synchronous path as a client meets it, side by side with
Gotenberg given the same Chromium.

One client (this process) calls every side over HTTP and waits for each PDF, at 1, 2, 8 and 20
concurrent requests (``--concurrency``), in interleaved rounds (forward, then backward), one side
at a time:

- ``gateway``: ``POST /v1/reports`` to our gateway process, in front of a renderer process
  (``--pool-size`` browsers of ``--pages-per-browser`` pages: by default one browser of 2 pages,
  the shape Gotenberg runs, one browser of 2 tabs) and Azurite, with the hints on (the gateway
  wakes the renderer; the renderer tells the gateway when the record is stored):
  :mod:`.synchronous`.
- ``gateway_polling`` (``--polling``): the same path without the hints, as it was before them.
- ``gotenberg``: Gotenberg (``--gotenberg-bin``) given the same Chromium binary as our renderer,
  its concurrency our pool size, the document's rendered HTML posted to its Chromium route.

Per side and concurrency: PDFs/s, p50/p95 of the client's wait, CPU per PDF of the side's whole
process tree (ours: gateway with its checking processes, renderer with its browsers; theirs:
Gotenberg with its browser), and the peak memory of that tree as if alone on its node per PDF/s.
Azurite stands in for Azure Storage, a service outside the user's pods billed by request: it is
left out of our side and shown apart, as a part of our path. The lone request
(concurrency 1) is also held against a warm print plus its upload (the renderer's own stages for
the same jobs). The machine's load is recorded with every chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reportfarm_renderer import browser, printing
from rich.console import Console
from rich.progress import Progress

from reportfarm import loops, renderer_api
from reportfarm_bench import documents as documenting
from reportfarm_bench import footprint, idling, measuring, reporting, sync_reporting, sync_sweep
from reportfarm_bench import gotenberg as gotenberging
from reportfarm_bench import synchronous as sync

CONCURRENCIES = (1, 2, 8, 20)
STORAGE = "azurite"
"""The part of our path that is not ours to run: Azure Storage in production (a side's figures
leave it out; its own are shown beside them)."""
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
    count_requests: bool = False,
    gotenberg_hidden: bool = False,
    gotenberg_concurrency: int | None = None,
) -> dict[str, Any]:
    """``gotenberg_concurrency``: Gotenberg's ``--chromium-max-concurrency``; None gives it our
    lanes (browsers x pages), the same number of documents printing at once."""
    _, documents = documenting.load()
    gotenberg_lanes = (
        pool_size * pages_per_browser if gotenberg_concurrency is None else gotenberg_concurrency
    )
    load_before = _load()
    async with contextlib.AsyncExitStack() as stack:
        chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
        async with browser.ChromiumLauncher(executable_path=chromium_path) as launcher:
            chromium = launcher.executable_path or launcher.playwright.chromium.executable_path
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sync-")))
        sides, paths, clients = await _our_sides(
            stack,
            logs,
            pool_size=pool_size,
            pages=pages_per_browser,
            polling=polling,
            count_requests=count_requests,
        )
        requests = _Requests(logs, sides=list(paths) if count_requests else [])
        for name, ours in paths.items():
            console.log(
                f"{name}: gateway {ours.url}, renderer of {pool_size} browser(s) x "
                f"{pages_per_browser} page(s)"
            )
        server = await stack.enter_async_context(
            gotenberging.serving(
                gotenberg_bin,
                concurrency=gotenberg_lanes,
                restart_after=100,
                chromium=chromium,
            )
        )
        theirs = await stack.enter_async_context(gotenberging.Client(server.url))

        async def convert(lane: int, document: documenting.Document) -> bytes:
            return await theirs.convert(_given(document, gotenberg_hidden), document.pdf)

        assert server.pid is not None
        sides["gotenberg"] = _Side("gotenberg", convert, {"gotenberg": server.pid})
        console.log(f"gotenberg {server.version} at {server.url}, Chromium {chromium}")
        for name, side in sides.items():
            lanes = gotenberg_lanes if name == "gotenberg" else pool_size * pages_per_browser
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
        trees = {name: sync.TreeCpu(side.roots) for name, side in sides.items()}
        part_trees = {
            part: sync.TreeCpu({part: pid}) for part, pid in paths["gateway"].pids.items()
        }
        part_cpu_s = {c: dict.fromkeys(part_trees, 0.0) for c in concurrencies}
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
                        before = await asyncio.to_thread(trees[name].total_s)
                        parts_before = {p: t.total_s() for p, t in part_trees.items()}
                        known = len(clients["gateway"].job_ids)
                        log_start = requests.mark(name)
                        sampled: list[footprint.Peak | sync.TreeCpu] = [
                            peaks[concurrency][name],
                            trees[name],
                            *(parts[concurrency].values() if name == "gateway" else ()),
                            *(part_trees.values() if name == "gateway" else ()),
                        ]
                        async with contextlib.AsyncExitStack() as sampling:
                            for sampler in sampled:
                                await sampling.enter_async_context(sampler.sampling())
                            await measuring.closed_loop(
                                side.convert,
                                documents,
                                run=runs[concurrency][name],
                                count=count,
                                concurrency=concurrency,
                                offset=index * count,
                            )
                        after = await asyncio.to_thread(trees[name].total_s)
                        cpu_s[concurrency][name] += after - before
                        requests.add(concurrency, name, start=log_start)
                        if name == "gateway":
                            for part, tree in part_trees.items():
                                spent = tree.total_s() - parts_before[part]
                                part_cpu_s[concurrency][part] += spent
                        if concurrency == 1 and name == "gateway":
                            lone_ids += clients["gateway"].job_ids[known:]
                        progress.advance(task, count)
        lone = await sync.lone_breakdown(
            paths["gateway"].client, clients["gateway"].timings, lone_ids
        )
    report = sync_reporting.build(
        runs=runs,
        cpu_s=cpu_s,
        peaks=peaks,
        print_upload=lone["print_and_upload_s"],
        parameters={
            "concurrencies": list(concurrencies),
            "documents_per_chunk": counts,
            "rounds": rounds,
            "pool_size": pool_size,
            "pages_per_browser": pages_per_browser,
            "gotenberg_concurrency": gotenberg_lanes,
            "gotenberg_given_the_screen_style": gotenberg_hidden,
            "documents": len(documents),
            "cores": len(os.sched_getaffinity(0)),
            "chromium_path": chromium,
            "gotenberg": {"version": server.version, "flags": server.flags},
            "python": platform.python_version(),
            "load_before": load_before,
            "load_after": _load(),
            "memory": "peak memory of each side's process tree while it served, as if alone "
            "on its node (footprint.alone: anonymous PSS plus every distinct file page once; "
            "PSS beside it), ours: the gateway process and its checking processes, the renderer "
            "process, its driver and browsers; theirs: Gotenberg and its browser; sampled every "
            f"{footprint.INTERVAL_S} s. Azurite (Azure Storage in production, not in a pod) is "
            "left out of the side and shown as a part; the client (this process) is neither's",
            "cpu": "CPU seconds of the same trees during each side's chunks, per PDF: each "
            "process's own time, sampled every 0.5 s (synchronous.TreeCpu); Azurite's is "
            "shown as a part",
        },
    )
    report["lone"]["phases_p50_ms"] = lone["phases_p50_ms"]
    report["lone"]["stages_p50_ms"] = lone["stages_p50_ms"]
    report["lone"]["phases"] = sync.PHASES
    for concurrency, peaked in parts.items():
        row = report["by_concurrency"][str(concurrency)]["gateway"]
        row["peak_mib_by_part"] = {
            part: peak.alone_peak_mib or peak.peak_mib for part, peak in peaked.items()
        }
        done = runs[concurrency]["gateway"].count
        row["cpu_ms_per_pdf_by_part"] = {
            part: round(spent * 1000 / done, 1) if done else None
            for part, spent in part_cpu_s[concurrency].items()
        }
    requests.report(report, runs)
    return report


class _Requests:
    """Our sides' storage requests during their chunks, from each side's Azurite debug log
    (``--count-requests``; ``sides`` empty: none counted)."""

    def __init__(self, logs: Path, *, sides: list[str]) -> None:
        self.logs = {name: _debug_log(logs, name) for name in sides}
        self.counted: dict[tuple[int, str], collections.Counter[str]] = {}

    def mark(self, side: str) -> int:
        """Where ``side``'s log ends now (0: not counted, or nothing logged yet)."""
        log = self.logs.get(side)
        return log.stat().st_size if log is not None and log.exists() else 0

    def add(self, concurrency: int, side: str, *, start: int) -> None:
        """Count what ``side``'s log says past ``start`` as its requests at ``concurrency``."""
        log = self.logs.get(side)
        if log is not None and log.exists():
            found = self.counted.setdefault((concurrency, side), collections.Counter())
            found.update(idling.count(log, start=start))

    def report(self, report: dict[str, Any], runs: dict[int, dict[str, measuring.Run]]) -> None:
        """Each counted row's ``storage_requests_per_pdf`` (``requests_per_pdf``)."""
        for (concurrency, side), counted in self.counted.items():
            row = report["by_concurrency"][str(concurrency)][side]
            row["storage_requests_per_pdf"] = requests_per_pdf(
                counted, pdfs=runs[concurrency][side].count
            )


def requests_per_pdf(counted: collections.Counter[str], *, pdfs: int) -> dict[str, float] | None:
    """Storage requests a PDF by kind (``idling.kind``), with ``all`` and ``receives`` (queue
    GETs of messages); None without PDFs."""
    if not pdfs:
        return None
    receives = sum(n for kind, n in counted.items() if kind.startswith("queue GET") and
                   kind.endswith(" messages"))  # fmt: skip
    per = {kind: round(n / pdfs, 2) for kind, n in sorted(counted.items())}
    return {"all": round(sum(counted.values()) / pdfs, 2), "receives": round(receives / pdfs, 2),
            **per}  # fmt: skip


def _debug_log(logs: Path, name: str) -> Path:
    """Where a side's Azurite logs every request (``--count-requests``)."""
    return logs / name / "azurite-debug.log"


GOTENBERG_MAX_CONCURRENCY = 6
"""The most Gotenberg 8.36 accepts (its Chromium module's validation refuses more)."""


def main(
    *,
    as_json: bool,
    gotenberg_bin: Path,
    concurrencies: Sequence[int] = CONCURRENCIES,
    jobs: int = 24,
    rounds: int = 3,
    pool_size: int = 1,
    polling: bool = False,
    plot_path: Path | None = None,
    idle_s: float = 0.0,
    pages_per_browser: int = 2,
    count_requests: bool = False,
    gotenberg_hidden: bool = False,
    gotenberg_concurrency: Sequence[int] = (),
) -> int:
    """Run it; 0 when every target was met, 1 when one was missed, 2 on bad arguments.

    ``gotenberg_concurrency``: Gotenberg's ``--chromium-max-concurrency``, by default our lanes;
    several values (repeats allowed) run one benchmark each, in that order, against the same side
    of ours, and report the sweep (:mod:`.sync_sweep`): the targets are then held against
    Gotenberg's best value at each concurrency."""
    problem = _refused(
        jobs=jobs,
        rounds=rounds,
        pool_size=pool_size,
        pages_per_browser=pages_per_browser,
        concurrencies=concurrencies,
        gotenberg_concurrency=gotenberg_concurrency,
        gotenberg_bin=gotenberg_bin,
        idle_s=idle_s,
    )
    if problem:
        print(f"reportfarm bench sync: {problem}", file=sys.stderr)
        return 2
    console = reporting.bench_console(as_json, width=160)
    measure = functools.partial(
        _measure,
        concurrencies=concurrencies,
        jobs=jobs,
        rounds=rounds,
        pool_size=pool_size,
        gotenberg_bin=gotenberg_bin,
        polling=polling,
        console=console,
        pages_per_browser=pages_per_browser,
        count_requests=count_requests,
        gotenberg_hidden=gotenberg_hidden,
    )
    if len(gotenberg_concurrency) > 1:
        return sync_sweep.main(
            measure, gotenberg_concurrency, console=console, as_json=as_json, plot_path=plot_path
        )
    report = measure(gotenberg_concurrency[0] if gotenberg_concurrency else None)
    if idle_s > 0:
        console.log(f"idle farm: counting storage requests for {idle_s:.0f} s")
        report["idle"] = loops.run(idling.idle_requests(seconds=idle_s, pool_size=pool_size))
        sync_reporting.show_idle(report["idle"], console)
    sync_reporting.show(report, console)
    if plot_path is not None:
        sync_reporting.plot(report, plot_path)
        console.log(f"plot: {plot_path}")
    if as_json:
        print(json.dumps(report, indent=2))
    return 1 if False in report["verdicts"].values() else 0


def _refused(
    *,
    jobs: int,
    rounds: int,
    pool_size: int,
    pages_per_browser: int,
    concurrencies: Sequence[int],
    gotenberg_concurrency: Sequence[int],
    gotenberg_bin: Path,
    idle_s: float = 0.0,
) -> str | None:
    """Why these arguments cannot run, before anything starts; None when they can."""
    sizes = (jobs, rounds, pool_size, pages_per_browser, *gotenberg_concurrency)
    if min(*sizes, *concurrencies, 1) < 1 or not concurrencies:
        return (
            "--jobs, --rounds, --pool-size, --pages-per-browser, --gotenberg-concurrency and each "
            "concurrency >= 1"
        )
    over = [value for value in gotenberg_concurrency if value > GOTENBERG_MAX_CONCURRENCY]
    if over:
        return (
            f"Gotenberg takes --chromium-max-concurrency 1 to {GOTENBERG_MAX_CONCURRENCY}, "
            f"not {over[0]}"
        )
    if idle_s > 0 and len(gotenberg_concurrency) > 1:
        return (
            "--idle-s counts an idle farm once, which a sweep of Gotenberg's concurrency does not "
            "change: run it without the sweep (one --gotenberg-concurrency value)"
        )
    if not (gotenberg_bin.is_file() and os.access(gotenberg_bin, os.X_OK)):
        return f"{gotenberg_bin} is not an executable Gotenberg"
    return None


def _measure(gotenberg_concurrency: int | None, **given: Any) -> dict[str, Any]:
    """One benchmark's report, its verdicts and its duration in."""
    started = time.monotonic()
    report = loops.run(run(gotenberg_concurrency=gotenberg_concurrency, **given))
    report["verdicts"] = sync_reporting.verdicts(report)
    report["parameters"]["seconds"] = round(time.monotonic() - started, 1)
    return report


async def _our_sides(
    stack: contextlib.AsyncExitStack,
    logs: Path,
    *,
    pool_size: int,
    pages: int,
    polling: bool,
    count_requests: bool = False,
) -> tuple[dict[Side, _Side], dict[Side, sync.OurPath], dict[Side, sync.SyncClient]]:
    """Our path with the hints (``gateway``) and, with ``polling``, without them; with
    ``count_requests``, each side's Azurite logs every request (``_debug_log``)."""
    sides: dict[Side, _Side] = {}
    paths: dict[Side, sync.OurPath] = {}
    clients: dict[Side, sync.SyncClient] = {}
    for name, hints in (("gateway", True), ("gateway_polling", False))[: 2 if polling else 1]:
        folder = logs / name
        folder.mkdir()
        ours = await stack.enter_async_context(
            sync.our_path(
                pool_size=pool_size,
                logs=folder,
                hints=hints,
                pages_per_browser=pages,
                debug_log=_debug_log(logs, name) if count_requests else None,
            )
        )
        client = await stack.enter_async_context(sync.SyncClient(ours.url))
        sides[name] = _Side(name, client.convert, pod(ours.pids))
        paths[name], clients[name] = ours, client
    return sides, paths, clients


def pod(parts: dict[str, int]) -> dict[str, int]:
    """The parts of our path a side counts: what runs in its user's pods. Azurite stands in for
    Azure Storage, a service billed by request, not by the pod's memory or CPU (it is measured
    apart, as a part of our path)."""
    return {part: pid for part, pid in parts.items() if part != STORAGE}


def _given(document: documenting.Document, hidden: bool) -> str:
    """The HTML Gotenberg is given: the document as a user brings it, or with the style our warm
    page adds (``printing.hidden_from_screen``) when ``hidden``."""
    return printing.hidden_from_screen(document.html) if hidden else document.html


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gotenberg-bin", type=Path, required=True, help="a binary from scripts/gotenberg/build.sh"
    )
    parser.add_argument(
        "--concurrency",
        type=_levels,
        default=[1, 2, 8, 20],
        help="concurrent requests, comma-separated (default 1,2,8,20)",
    )
    parser.add_argument("--jobs", type=int, default=24, help="documents per chunk (>= 2x c)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--pool-size", type=int, default=1, help="our browsers (Gotenberg runs one)"
    )
    parser.add_argument(
        "--pages-per-browser", type=int, default=2, help="our pages per browser (its tabs: all)"
    )
    parser.add_argument(
        "--polling", action="store_true", help="also the gateway path without the hints"
    )
    parser.add_argument(
        "--idle-s", type=float, default=0.0, help="then count an idle farm's storage requests"
    )
    parser.add_argument(
        "--count-requests",
        action="store_true",
        help="count our path's storage requests a PDF from Azurite's debug log (which costs "
        "Azurite CPU: leave it off for the CPU and throughput figures)",
    )
    parser.add_argument(
        "--gotenberg-hidden",
        action="store_true",
        help="give Gotenberg each document with the style that hides it from the screen, as our "
        "warm page prints it (REPORTFARM_HIDE_SCREEN)",
    )
    parser.add_argument(
        "--gotenberg-concurrency",
        type=_levels,
        default=[],
        help="Gotenberg's --chromium-max-concurrency (default: our browsers x pages); several, "
        "comma-separated (e.g. 1,2,3,4,6,6,4,3,2,1), sweep its knob against our same side",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--plot", type=Path, default=Path("out/bench-sync.png"), help="PNG plot path"
    )


def _levels(text: str) -> list[int]:
    try:
        return [int(word) for word in text.split(",") if word.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("whole numbers, comma-separated") from None


def command(args: argparse.Namespace) -> int:
    return main(
        as_json=args.json,
        gotenberg_bin=args.gotenberg_bin,
        concurrencies=args.concurrency,
        jobs=args.jobs,
        rounds=args.rounds,
        pool_size=args.pool_size,
        polling=args.polling,
        plot_path=args.plot,
        idle_s=args.idle_s,
        count_requests=args.count_requests,
        pages_per_browser=args.pages_per_browser,
        gotenberg_hidden=args.gotenberg_hidden,
        gotenberg_concurrency=args.gotenberg_concurrency,
    )
