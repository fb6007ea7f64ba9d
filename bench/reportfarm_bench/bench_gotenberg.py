"""``reportfarm bench gotenberg``: the same documents through Gotenberg and through us, in one run.

The documents are ``bench``'s (the example reports and the batch lines, rendered to HTML once).
The sides print them at the same concurrency N (our pool size = Gotenberg's
``--chromium-max-concurrency``) on the same cores:

- one Gotenberg side per Chromium it is given (``--gotenberg-chromium``; by default both):
  ``gotenberg``, the same Chromium binary as ours (the same parts), and ``gotenberg_full``,
  Debian's full ``chromium``, as Gotenberg's official image runs it. Each is its own Gotenberg
  process (in its own PID namespace). N clients post the rendered HTML (index.html, our paper
  size and margins mapped to its form fields) to ``/forms/chromium/convert/html``; latency is the
  HTTP round trip.
- ``reportfarm``: our pool's print path (``bench``'s ``reportfarm`` strategy: the template
  rendered per job, a warm page, the network guard).
- ``end_to_end``: jobs through the queue (an embedded Azurite) to an in-process renderer and its
  PDFs to blobs (``bench``'s Farm); its latency is the worker's, from taking a job to its PDF
  stored (a client's wait would add its polling interval).

Rounds interleave the sides (forward, then backward) so the shared machine's drift weighs on all
alike; one side prints at a time. While a side prints, the PSS of its whole process tree is
sampled (:mod:`.footprint`); a Gotenberg that is not printing keeps its idle browser, counted for
no side, and the CPU its tree spends meanwhile is reported (it should be next to nothing). Then
each document goes once through our pool and once through every Gotenberg side, and each of
their PDFs must have the same pages and text as ours (:mod:`.sameness`).

A Gotenberg side that cannot run (Gotenberg does not start with that Chromium, or its warm-up
conversions fail) is reported as failed, with why, and the run goes on with the others; the exit
code is then 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from reportfarm_renderer import browser
from rich.console import Console

from reportfarm import azurite, loops, renderer_api
from reportfarm.quantiles import quantile
from reportfarm_bench import (
    bench_strategies,
    cpu,
    end_to_end,
    footprint,
    measuring,
    reporting,
    sameness,
    strategies,
    versus,
)
from reportfarm_bench import documents as documenting
from reportfarm_bench import gotenberg as gotenberging
from reportfarm_bench.documents import Document

OURS = tuple(versus.OURS)
DEFAULT_CHROMIUMS = (gotenberging.SAME, gotenberging.IMAGE)


class Target:
    """Which Gotenberg: a binary we start (``binary``, once per Chromium it is given) or a running
    one (``url``, and ``pid``, the root of its process tree, if its memory should be sampled)."""

    def __init__(
        self, *, binary: Path | None = None, url: str | None = None, pid: int | None = None
    ) -> None:
        if (binary is None) == (url is None):
            raise ValueError("give a Gotenberg binary or a URL, not both")
        self.binary, self.url, self.pid = binary, url, pid

    def choose(self, words: Sequence[str], *, ours: str) -> list[gotenberging.Choice]:
        if self.binary is None:
            return [gotenberging.Choice("gotenberg", None, "its own (a running Gotenberg)")]
        return gotenberging.choose(list(words), ours=ours, image=gotenberging.image_chromium())

    @contextlib.asynccontextmanager
    async def running(
        self, *, concurrency: int, restart_after: int, chromium: str | None
    ) -> AsyncIterator[gotenberging.Server]:
        if self.binary is not None:
            assert chromium is not None
            async with gotenberging.serving(
                self.binary, concurrency=concurrency, restart_after=restart_after, chromium=chromium
            ) as server:
                yield server
        else:
            assert self.url is not None
            url = self.url.rstrip("/")
            yield gotenberging.Server(url, self.pid, await gotenberging.version(url))


@dataclasses.dataclass
class _Gotenberg:
    """One Gotenberg side while it runs."""

    choice: gotenberging.Choice
    server: gotenberging.Server
    client: gotenberging.Client
    run: measuring.Run
    busy_cpu_s: float = 0.0
    idle_cpu_s: float = 0.0
    idle_wall_s: float = 0.0

    async def convert(self, lane: int, document: Document) -> bytes:
        return await self.client.convert(document.html, document.pdf)


async def run(
    *,
    jobs: int,
    pool_size: int,
    chromium_path: str | None,
    target: Target,
    console: Console,
    gotenberg_chromium: Sequence[str] = DEFAULT_CHROMIUMS,
) -> tuple[versus.Report, dict[str, bytes]]:
    """Measure the sides; returns the report and one sample PDF per side."""
    catalog, documents = documenting.load()
    settings = documenting.settings(pool_size=pool_size, chromium_path=chromium_path)
    load_before, chunks = _load(), bench_strategies.rounds(jobs)
    me = os.getpid()
    runs = {"reportfarm": measuring.Run("reportfarm")}
    async with contextlib.AsyncExitStack() as stack:
        before = footprint.children(me, footprint.parents())
        launcher = await stack.enter_async_context(
            browser.ChromiumLauncher(
                executable_path=chromium_path, launch_timeout=settings.launch_timeout
            )
        )
        drivers = footprint.children(me, footprint.parents()) - before
        chromium = launcher.executable_path or launcher.playwright.chromium.executable_path
        sides: dict[str, dict[str, Any]] = {}
        gotenbergs: dict[str, _Gotenberg] = {}
        version = "?"
        for choice in target.choose(gotenberg_chromium, ours=chromium):
            about = sides[choice.name] = {
                "chromium_path": choice.chromium,
                "chromium": await asyncio.to_thread(_version_of, choice.chromium),
                "which": choice.which,
                "status": "skipped" if choice.skipped else "ran",
                "reason": choice.skipped,
            }
            if choice.skipped:
                console.log(f"{choice.name}: not run: {choice.skipped}")
                continue
            side_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
            try:
                server = await side_stack.enter_async_context(
                    target.running(
                        concurrency=pool_size,
                        restart_after=settings.recycle_after_jobs,
                        chromium=choice.chromium,
                    )
                )
                client = await side_stack.enter_async_context(gotenberging.Client(server.url))
                side = _Gotenberg(choice, server, client, measuring.Run(choice.name))
                version = server.version
                about.update(
                    url=server.url,
                    flags=server.flags,
                    unknown_to_this_version=server.dropped,
                )
                console.log(
                    f"{choice.name}: Gotenberg {server.version} at {server.url}, Chromium "
                    f"{choice.chromium or '(its own)'}; our pool size {pool_size}"
                )
                await measuring.warm_up(
                    side.convert, documents, count=2 * pool_size, concurrency=pool_size
                )
            except gotenberging.GotenbergError as error:
                about.update(status="failed", reason=f"Gotenberg with this Chromium: {error}")
                console.log(f"[red]{choice.name} failed:[/red] {error}")
                await side_stack.aclose()
                continue
            gotenbergs[choice.name] = side
        if not gotenbergs:
            reasons = "; ".join(f"{name}: {about['reason']}" for name, about in sides.items())
            raise gotenberging.GotenbergError(f"no Gotenberg side could run ({reasons})")
        lab = strategies.Lab(launcher, catalog=catalog, settings=settings)
        ours = await stack.enter_async_context(strategies.reportfarm(lab, pool_size))
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="reportfarm-bench-"))
        farm = await stack.enter_async_context(
            end_to_end.running_process(
                documents,
                pool_size=pool_size,
                rng=random.Random(bench_strategies.SEED),
                log=Path(scratch, "worker.log"),
            )
        )
        assert farm.worker is not None
        worker = farm.worker.pid
        servers = {name: side.server.pid for name, side in gotenbergs.items()}
        peaks = _peaks(me, servers=servers, drivers=drivers, worker=worker)
        worker_cpu_s = 0.0
        await measuring.warm_up(ours, documents, count=2 * pool_size, concurrency=pool_size)
        await farm.warm_up(2 * pool_size)
        order = [*gotenbergs, *OURS]
        for index, count in enumerate(chunks):
            offset = sum(chunks[:index])
            console.log(f"round {index + 1}/{len(chunks)}: {count} documents per side")
            for name in order if index % 2 == 0 else reversed(order):
                cpu_before = await asyncio.to_thread(_tree_cpu, servers)
                worker_before = sum(cpu.sample(worker).values())
                started = time.monotonic()
                async with peaks[name].sampling():
                    if name == "end_to_end":
                        await farm.throughput(count, offset=offset)
                        worker_cpu_s += sum(cpu.sample(worker).values()) - worker_before
                    else:
                        job = gotenbergs[name].convert if name in gotenbergs else ours
                        await measuring.closed_loop(
                            job,
                            documents,
                            run=gotenbergs[name].run if name in gotenbergs else runs[name],
                            count=count,
                            concurrency=pool_size,
                            offset=offset,
                        )
                wall = time.monotonic() - started
                cpu_after = await asyncio.to_thread(_tree_cpu, servers)
                for their, side in gotenbergs.items():
                    used = cpu_after[their] - cpu_before[their]
                    if their == name:
                        side.busy_cpu_s += used
                    else:
                        side.idle_cpu_s += used
                        side.idle_wall_s += wall
        await farm.check_pdfs()
        console.log(
            f"comparing {len(documents)} documents' PDFs, ours and {', '.join(gotenbergs)}'s"
        )
        verdicts, samples = await _compare(documents, ours=ours, theirs=gotenbergs)
        peaks["azurite"].sample()
    cores = len(os.sched_getaffinity(0))
    report: versus.Report = {}
    for name, side in gotenbergs.items():
        report[name] = versus.side(
            **side.run.summary(),  # type: ignore[arg-type]
            cores=cores,
            peak_mib=peaks[name].peak_mib,
            alone_mib=peaks[name].alone_peak_mib,
            cpu_ms_per_pdf=round(side.busy_cpu_s * 1000 / side.run.count, 1)
            if side.server.pid and side.run.count
            else None,
            idle={
                "cpu_s": round(side.idle_cpu_s, 2),
                "wall_s": round(side.idle_wall_s, 1),
                "cores": round(side.idle_cpu_s / side.idle_wall_s, 4) if side.idle_wall_s else 0,
            }
            if side.server.pid
            else None,
        )
    report["reportfarm"] = versus.side(
        **runs["reportfarm"].summary(),  # type: ignore[arg-type]
        cores=cores,
        peak_mib=peaks["reportfarm"].peak_mib,
        alone_mib=peaks["reportfarm"].alone_peak_mib,
    )
    report["end_to_end"] = _end_to_end(
        farm.result, cores=cores, peak=peaks["end_to_end"], cpu_s=worker_cpu_s
    )
    report["sides"] = {
        **{
            name: f"{versus.GOTENBERG_WHAT}; Chromium: {_short(side.choice)}"
            for name, side in gotenbergs.items()
        },
        **versus.OURS,
    }
    report["ratios"] = versus.ratios(report)
    report["targets"] = versus.targets(report["ratios"], list(gotenbergs))
    report["sameness"] = {name: sameness.summary(found) for name, found in verdicts.items()}
    report["parameters"] = {
        "pool_size": pool_size,
        "jobs": jobs,
        "rounds": chunks,
        "documents": len(documents),
        "warmup": 2 * pool_size,
        "cores": cores,
        "cores_counted": "the CPUs this process may run on (sched_getaffinity); Gotenberg, "
        "started here, inherits them: all sides share the same cores",
        "chromium": await asyncio.to_thread(_version_of, chromium),
        "chromium_path": chromium,
        "python": platform.python_version(),
        "gotenberg": {
            "version": version,
            "how": "started here from the binary, one process per side, each in its own PID "
            "namespace; one side prints at a time"
            if target.binary
            else "running already (given by URL)",
            "sides": sides,
        },
        "memory": "peak PSS of each side's process tree, sampled every "
        f"{footprint.INTERVAL_S} s during its timed chunks: each gotenberg side = unshare + "
        "gotenberg + its Chromium (a Gotenberg not printing keeps its idle browser, counted for "
        "no side); reportfarm = this Python process + its Playwright driver + its Chromiums; "
        "end_to_end = the renderer as its pod runs it, a `reportfarm worker` process + its "
        "driver + its Chromiums (the client submitting and waiting is this process, as Gotenberg's "
        "clients are, counted for neither). Azurite stands "
        f"in for Azure Storage and is not counted ({peaks['azurite'].peak_mib} MiB). PSS splits "
        "a page among every process mapping it, other sides' too (Gotenberg given our Chromium "
        "binary, our two sides' browsers, other work on the machine): 'alone' is the tree's "
        "anonymous PSS plus its distinct file and shared-memory pages counted whole, as if "
        "nothing else ran (file pages re-read every "
        f"{footprint.FILES_EVERY * footprint.INTERVAL_S:g} s)",
        "load_before": load_before,
        "load_after": _load(),
    }
    return report, samples


def _short(choice: gotenberging.Choice) -> str:
    return choice.which if choice.chromium is None else Path(choice.chromium).name


def _tree_cpu(servers: dict[str, int | None]) -> dict[str, float]:
    """CPU seconds so far of each Gotenberg's process tree (0 for one we did not start)."""
    return {name: sum(cpu.sample(pid).values()) if pid else 0.0 for name, pid in servers.items()}


def _peaks(
    me: int, *, servers: dict[str, int | None], drivers: set[int], worker: int
) -> dict[str, footprint.Peak]:
    """Who is who among the processes: each Gotenberg's tree; this process and the launcher's
    driver (our print path); the renderer process's tree (end to end, as in its pod)."""

    def print_path(tree: dict[int, int]) -> set[int]:
        members = {me}
        for child in footprint.children(me, tree) & drivers:
            members |= footprint.descendants(child, tree)
        return members

    def azurites(tree: dict[int, int]) -> set[int]:
        found = {c for c in footprint.children(me, tree) if _is_azurite(c)}
        return set().union(*(footprint.descendants(c, tree) for c in found))

    def gotenberg(pid: int | None) -> footprint.Members:
        return lambda tree: footprint.descendants(pid, tree) if pid else set()

    return {
        **{name: footprint.Peak(gotenberg(pid)) for name, pid in servers.items()},
        "reportfarm": footprint.Peak(print_path),
        "end_to_end": footprint.Peak(lambda tree: footprint.descendants(worker, tree)),
        "azurite": footprint.Peak(azurites),
    }


def _is_azurite(pid: int) -> bool:
    return "azurite" in footprint.command_line(pid)


async def _compare(
    documents: list[Document], *, ours: measuring.Job, theirs: dict[str, _Gotenberg]
) -> tuple[dict[str, list[sameness.Verdict]], dict[str, bytes]]:
    """Each document once through our pool and once through every Gotenberg side; each of their
    PDFs against ours."""
    verdicts: dict[str, list[sameness.Verdict]] = {name: [] for name in theirs}
    samples: dict[str, bytes] = {}
    for index, document in enumerate(documents):
        mine = await ours(0, document)
        samples.setdefault("reportfarm", mine)
        for name, side in theirs.items():
            their = await side.convert(0, document)
            samples.setdefault(name, their)
            label = f"{index}:{document.template}"
            verdicts[name].append(await asyncio.to_thread(sameness.compare, label, mine, their))
    return verdicts, samples


def _end_to_end(
    result: end_to_end.EndToEnd, *, cores: int, peak: footprint.Peak, cpu_s: float
) -> dict[str, Any]:
    """The throughput chunks' jobs; latency: the worker's, taking a job to its PDF stored; CPU:
    the renderer process's tree (Python, its driver, its Chromiums) while they ran."""
    spent = [end_to_end.worker_side_s(record) for record in result.throughput]
    return versus.side(
        pdf_per_s=result.pdf_per_s,
        p50_ms=(quantile(spent, 0.50) or 0.0) * 1000,
        p95_ms=(quantile(spent, 0.95) or 0.0) * 1000,
        cores=cores,
        peak_mib=peak.peak_mib,
        alone_mib=peak.alone_peak_mib,
        cpu_ms_per_pdf=round(cpu_s * 1000 / len(result.throughput), 1)
        if result.throughput
        else None,
        jobs=len(result.throughput),
        pdfs=len(result.outputs),
        valid_pdfs=result.check.valid,
        load1=round(sum(result.loads) / len(result.loads), 2) if result.loads else None,
    )


def _version_of(chromium: str | None) -> str:
    """The first line ``chromium --version`` prints (Debian's wrapper script may complain, on
    stderr)."""
    if chromium is None:
        return "unknown"
    try:
        done = subprocess.run([chromium, "--version"], capture_output=True, timeout=30, check=False)
    except OSError as error:
        return f"unknown ({error})"
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def chromium_words(value: str | None) -> list[str]:
    """``--gotenberg-chromium``: comma-separated ``same``, ``image`` or paths (default both
    words)."""
    if value is None:
        return list(DEFAULT_CHROMIUMS)
    return [word.strip() for word in value.split(",") if word.strip()]


def main(
    *,
    as_json: bool,
    jobs: int,
    pool_size: int,
    target: Target,
    plot: Path | None,
    samples: Path | None = None,
    gotenberg_chromium: str | None = None,
) -> int:
    """Run the comparison; 0 when every Gotenberg side ran, every PDF was valid and every
    Gotenberg side printed the same pages and text as ours, 1 otherwise. The tables go to stdout,
    or to stderr with ``as_json``."""
    if jobs < 1 or pool_size < 1:
        print(
            "reportfarm bench gotenberg: --jobs and --pool-size must be at least 1", file=sys.stderr
        )
        return 2
    words = chromium_words(gotenberg_chromium)
    if gotenberg_chromium is not None and target.binary is None:
        print(
            "reportfarm bench gotenberg: --gotenberg-chromium needs --gotenberg-bin (a running "
            "Gotenberg has its own Chromium)",
            file=sys.stderr,
        )
        return 2
    paths = [w for w in words if w not in (gotenberging.SAME, gotenberging.IMAGE)]
    missing = [w for w in paths if not (os.path.isfile(w) and os.access(w, os.X_OK))]
    if not words or missing:
        print(
            "reportfarm bench gotenberg: --gotenberg-chromium takes same, image or executable paths"
            + (f"; not executable: {', '.join(missing)}" if missing else ""),
            file=sys.stderr,
        )
        return 2
    console = reporting.bench_console(as_json, width=160)
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    try:
        report, pdfs = loops.run(
            run(
                jobs=jobs,
                pool_size=pool_size,
                chromium_path=chromium_path,
                target=target,
                console=console,
                gotenberg_chromium=words,
            )
        )
    except (azurite.AzuriteError, end_to_end.JobsFailed, gotenberging.GotenbergError) as error:
        console.print(f"[red]reportfarm bench gotenberg failed:[/red] {error}")
        return 1
    if samples is not None:
        samples.mkdir(parents=True, exist_ok=True)
        for name, pdf in pdfs.items():
            (samples / f"{name}.pdf").write_bytes(pdf)
    if plot is not None:
        versus.plot(report, plot)
    versus.show(report, console)
    if plot is not None:
        console.print(f"plot: {plot}")
    if as_json:
        print(json.dumps(report, indent=2))
    return 0 if passed(report) else 1


def passed(report: versus.Report) -> bool:
    """No Gotenberg side failed, every PDF was valid, every side's PDFs were the same as ours."""
    sides = report["parameters"]["gotenberg"]["sides"].values()
    ran = all(about["status"] != "failed" for about in sides)
    valid = all(report[n]["valid_pdfs"] == report[n]["pdfs"] > 0 for n in versus.measured(report))
    same = bool(report["sameness"]) and all(s["all_same"] for s in report["sameness"].values())
    return ran and valid and same


def arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--gotenberg-bin", type=Path, help="a binary from scripts/gotenberg/build.sh: started here"
    )
    where.add_argument("--gotenberg-url", help="a running Gotenberg (same concurrency, please)")
    parser.add_argument(
        "--gotenberg-pid", type=int, help="with --gotenberg-url: its root pid, to sample memory"
    )
    parser.add_argument(
        "--gotenberg-chromium",
        metavar="WHICH[,WHICH]",
        help="with --gotenberg-bin: the Chromium each Gotenberg side is given, one Gotenberg per "
        "entry: 'same' (the binary our pool runs: side gotenberg), 'image' (Debian's full "
        "chromium on PATH, as Gotenberg's image runs it: side gotenberg_full) or a path "
        "(default: same,image)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--jobs", type=int, default=60, help="documents per side")
    parser.add_argument("--pool-size", type=int, default=2, help="our browsers = its tabs")
    parser.add_argument(
        "--plot", type=Path, default=Path("out/bench-gotenberg.png"), help="PNG plot path"
    )
    parser.add_argument("--samples", type=Path, default=None, help="folder for one PDF per side")


def command(args: argparse.Namespace) -> int:
    return main(
        as_json=args.json,
        jobs=args.jobs,
        pool_size=args.pool_size,
        target=Target(binary=args.gotenberg_bin, url=args.gotenberg_url, pid=args.gotenberg_pid),
        plot=args.plot,
        samples=args.samples,
        gotenberg_chromium=args.gotenberg_chromium,
    )
