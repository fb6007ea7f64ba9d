"""``reportfarm bench-gotenberg``: the same documents through Gotenberg and through us, in one run.

The documents are ``bench``'s (the example reports and the batch lines, rendered to HTML once).
Three sides print them at the same concurrency N (our pool size = Gotenberg's
``--chromium-max-concurrency``) on the same cores:

- ``gotenberg``: N clients post the rendered HTML (index.html, our paper size and margins mapped to
  its form fields) to ``/forms/chromium/convert/html``; latency is the HTTP round trip.
- ``reportfarm``: our pool's print path (``bench``'s ``reportfarm`` strategy: the template
  rendered per job, a warm page, the network guard).
- ``end_to_end``: jobs through the queue (an embedded Azurite) to an in-process renderer and its
  PDFs to blobs (``bench``'s Farm); its latency is the worker's, from taking a job to its PDF
  stored (a client's wait would add its polling interval).

Rounds interleave the sides (forward, then backward) so the shared machine's drift weighs on all
alike. While a side prints, the PSS of its whole process tree is sampled (:mod:`.footprint`).
Then each document goes once through our pool and once through Gotenberg and the two PDFs must
have the same pages and text (:mod:`.sameness`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import platform
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rich.console import Console

from reportfarm import azurite, renderer_api
from reportfarm.quantiles import quantile
from reportfarm.settings import StorageSettings
from reportfarm_renderer import bench, browser
from reportfarm_renderer.benchmarking import documents as documenting
from reportfarm_renderer.benchmarking import (
    end_to_end,
    footprint,
    measuring,
    sameness,
    strategies,
    versus,
)
from reportfarm_renderer.benchmarking import gotenberg as gotenberging
from reportfarm_renderer.benchmarking.documents import Document
from reportfarm_renderer.settings import RendererSettings

ORDER = ("gotenberg", "reportfarm", "end_to_end")


class Target:
    """Which Gotenberg: a binary we start (``binary``) or a running one (``url``, and ``pid``,
    the root of its process tree, if its memory should be sampled)."""

    def __init__(
        self, *, binary: Path | None = None, url: str | None = None, pid: int | None = None
    ) -> None:
        if (binary is None) == (url is None):
            raise ValueError("give a Gotenberg binary or a URL, not both")
        self.binary, self.url, self.pid = binary, url, pid

    @contextlib.asynccontextmanager
    async def running(
        self, *, concurrency: int, restart_after: int, chromium: str
    ) -> AsyncIterator[gotenberging.Server]:
        if self.binary is not None:
            async with gotenberging.serving(
                self.binary, concurrency=concurrency, restart_after=restart_after, chromium=chromium
            ) as server:
                yield server
        else:
            assert self.url is not None
            url = self.url.rstrip("/")
            yield gotenberging.Server(url, self.pid, await gotenberging.version(url))


async def run(
    *, jobs: int, pool_size: int, chromium_path: str | None, target: Target, console: Console
) -> tuple[versus.Report, dict[str, bytes]]:
    """Measure the three sides; returns the report and one sample PDF per side."""
    catalog, documents = documenting.load()
    settings = RendererSettings.from_env(
        {},
        storage=StorageSettings(connection_string=None),
        templates=documenting.TEMPLATES,
        pool_size=pool_size,
        port=0,
        chromium_path=chromium_path,
    )
    load_before, chunks = _load(), bench.rounds(jobs)
    me = os.getpid()
    runs = {name: measuring.Run(name) for name in ORDER[:2]}
    async with contextlib.AsyncExitStack() as stack:
        before = footprint.children(me, footprint.parents())
        launcher = await stack.enter_async_context(
            browser.ChromiumLauncher(
                executable_path=chromium_path, launch_timeout=settings.launch_timeout
            )
        )
        drivers = footprint.children(me, footprint.parents()) - before
        chromium = launcher.executable_path or launcher.playwright.chromium.executable_path
        server = await stack.enter_async_context(
            target.running(
                concurrency=pool_size, restart_after=settings.recycle_after_jobs, chromium=chromium
            )
        )
        console.log(f"Gotenberg {server.version} at {server.url}; our pool size {pool_size}")
        client = await stack.enter_async_context(gotenberging.Client(server.url))
        lab = strategies.Lab(launcher, catalog=catalog, settings=settings)
        ours = await stack.enter_async_context(strategies.reportfarm(lab, pool_size))

        async def theirs(lane: int, document: Document) -> bytes:
            return await client.convert(document.html, document.pdf)

        farm = await stack.enter_async_context(
            end_to_end.running(documents, settings=settings, rng=random.Random(bench.SEED))
        )
        peaks = _peaks(me, server=server.pid, drivers=drivers)
        printers = {"gotenberg": theirs, "reportfarm": ours}
        for job in printers.values():
            await measuring.warm_up(job, documents, count=2 * pool_size, concurrency=pool_size)
        await farm.warm_up(2 * pool_size)
        for index, count in enumerate(chunks):
            offset = sum(chunks[:index])
            console.log(f"round {index + 1}/{len(chunks)}: {count} documents per side")
            for name in ORDER if index % 2 == 0 else reversed(ORDER):
                async with peaks[name].sampling():
                    if name == "end_to_end":
                        await farm.throughput(count, offset=offset)
                    else:
                        await measuring.closed_loop(
                            printers[name],
                            documents,
                            run=runs[name],
                            count=count,
                            concurrency=pool_size,
                            offset=offset,
                        )
        await farm.check_pdfs()
        console.log(f"comparing {len(documents)} documents' PDFs, ours and Gotenberg's")
        verdicts, samples = await _compare(documents, ours=ours, theirs=theirs)
        peaks["azurite"].sample()
    cores = len(os.sched_getaffinity(0))
    report: versus.Report = {
        name: versus.side(
            **runs[name].summary(),  # type: ignore[arg-type]
            cores=cores,
            peak_mib=peaks[name].peak_mib,
        )
        for name in runs
    }
    report["end_to_end"] = _end_to_end(farm.result, cores=cores, peak=peaks["end_to_end"])
    report["ratios"] = versus.ratios(report)
    report["targets"] = versus.targets(report["ratios"])
    report["sameness"] = sameness.summary(verdicts)
    report["parameters"] = {
        "pool_size": pool_size,
        "jobs": jobs,
        "rounds": chunks,
        "documents": len(documents),
        "warmup": 2 * pool_size,
        "cores": cores,
        "cores_counted": "the CPUs this process may run on (sched_getaffinity); Gotenberg, "
        "started here, inherits them: both sides share the same cores",
        "chromium": await asyncio.to_thread(_version_of, chromium),
        "chromium_path": chromium,
        "python": platform.python_version(),
        "gotenberg": {
            "version": server.version,
            "url": server.url,
            "how": "started here from the binary, in its own PID namespace"
            if target.binary
            else "running already (given by URL)",
            "flags": server.flags,
            "unknown_to_this_version": server.dropped,
        },
        "memory": "peak PSS of each side's process tree, sampled every "
        f"{footprint.INTERVAL_S} s during its timed chunks: gotenberg = unshare + gotenberg + "
        "its Chromium; reportfarm = this Python process + its Playwright driver + its Chromiums; "
        "end_to_end = this Python process + the renderer's driver + its Chromiums. Azurite stands "
        f"in for Azure Storage and is not counted ({peaks['azurite'].peak_mib} MiB)",
        "load_before": load_before,
        "load_after": _load(),
    }
    return report, samples


def _peaks(me: int, *, server: int | None, drivers: set[int]) -> dict[str, footprint.Peak]:
    """Who is who among the processes: Gotenberg's tree; the launcher's driver (our print path);
    every other child of ours but Azurite (the end-to-end renderer's driver)."""

    def ours(tree: dict[int, int], *, print_path: bool) -> set[int]:
        members = {me}
        for child in footprint.children(me, tree) - {server}:
            if (child in drivers) == print_path and not _is_azurite(child):
                members |= footprint.descendants(child, tree)
        return members

    def azurites(tree: dict[int, int]) -> set[int]:
        found = {c for c in footprint.children(me, tree) if _is_azurite(c)}
        return set().union(*(footprint.descendants(c, tree) for c in found))

    return {
        "gotenberg": footprint.Peak(
            lambda tree: footprint.descendants(server, tree) if server else set()
        ),
        "reportfarm": footprint.Peak(lambda tree: ours(tree, print_path=True)),
        "end_to_end": footprint.Peak(lambda tree: ours(tree, print_path=False)),
        "azurite": footprint.Peak(azurites),
    }


def _is_azurite(pid: int) -> bool:
    return "azurite" in footprint.command_line(pid)


async def _compare(
    documents: list[Document], *, ours: measuring.Job, theirs: measuring.Job
) -> tuple[list[sameness.Verdict], dict[str, bytes]]:
    verdicts: list[sameness.Verdict] = []
    samples: dict[str, bytes] = {}
    for index, document in enumerate(documents):
        mine, their = await ours(0, document), await theirs(0, document)
        samples = samples or {"reportfarm": mine, "gotenberg": their}
        name = f"{index}:{document.template}"
        verdicts.append(await asyncio.to_thread(sameness.compare, name, mine, their))
    return verdicts, samples


def _end_to_end(result: end_to_end.EndToEnd, *, cores: int, peak: footprint.Peak) -> dict[str, Any]:
    """The throughput chunks' jobs; latency: the worker's, taking a job to its PDF stored."""
    spent = [
        sum(r.stages_ms.get(stage, 0.0) for stage in end_to_end.STAGES) / 1000
        for r in result.throughput
    ]
    return versus.side(
        pdf_per_s=result.pdf_per_s,
        p50_ms=(quantile(spent, 0.50) or 0.0) * 1000,
        p95_ms=(quantile(spent, 0.95) or 0.0) * 1000,
        cores=cores,
        peak_mib=peak.peak_mib,
        jobs=len(result.throughput),
        pdfs=len(result.outputs),
        valid_pdfs=result.check.valid,
        load1=round(sum(result.loads) / len(result.loads), 2) if result.loads else None,
    )


def _version_of(chromium: str) -> str:
    """``chromium --version``: both sides run this binary."""
    done = subprocess.run([chromium, "--version"], capture_output=True, timeout=30, check=False)
    return done.stdout.decode(errors="replace").strip() or "unknown"


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def main(
    *,
    as_json: bool,
    jobs: int,
    pool_size: int,
    target: Target,
    plot: Path | None,
    samples: Path | None = None,
) -> int:
    """Run the comparison; 0 when every PDF was valid and both sides printed the same pages and
    text, 1 otherwise. The tables go to stdout, or to stderr with ``as_json``."""
    if jobs < 1 or pool_size < 1:
        print("bench-gotenberg: --jobs and --pool-size must be at least 1", file=sys.stderr)
        return 2
    console = Console(stderr=as_json)
    if not console.is_terminal:
        console.width = 140
    for name in ("reportfarm", "reportfarm_renderer"):
        logging.getLogger(name).setLevel(logging.WARNING)
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    try:
        report, pdfs = asyncio.run(
            run(
                jobs=jobs,
                pool_size=pool_size,
                chromium_path=chromium_path,
                target=target,
                console=console,
            )
        )
    except (azurite.AzuriteError, end_to_end.JobsFailed, gotenberging.GotenbergError) as error:
        console.print(f"[red]bench-gotenberg failed:[/red] {error}")
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
    valid = all(report[n]["valid_pdfs"] == report[n]["pdfs"] > 0 for n in versus.SIDES)
    return 0 if valid and report["sameness"]["all_same"] else 1
