"""``reportfarm bench pages``: the month-end statement at 2, 50 and 500 pages, through the real
print path, side by side.

Each document goes the way a job's goes, minus the queue: the template renders the statement's
data (:mod:`.statements`), a pool of one browser prints it with the production defaults (render
timeout, size limit, recycling) and its PDF goes to an embedded Azurite through
:class:`~reportfarm_renderer.output.PdfOutput`: whole in one request when it fits in a chunk,
else streamed into blocks while it prints. Sizes are interleaved in rounds (forward, then
backward), so the machine's drifting load weighs on each alike; the small sizes print several
times a round (``--repeat``). Per size: seconds per page (median), the peaks of the Python
process, the Playwright driver and the browser (:mod:`.sampling`), and ratios against the
smaller sizes. The stored PDFs are checked (page count, a line of the last page's text).

Only ``REPORTFARM_CHROMIUM_PATH`` is read from the environment; every other renderer setting is
the production default.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pypdf
from reportfarm_renderer import browser, output, printing, templates
from reportfarm_renderer import pool as pooling
from reportfarm_renderer.settings import RendererSettings
from rich.console import Console

from reportfarm import azurite, loops, renderer_api
from reportfarm.storage import blobs as storing
from reportfarm_bench import (
    documents,
    pages_report,
    reporting,
    sampling,
    statements,
)

CONTAINER = "bench-pages"
Report = dict[str, Any]


class Printer:
    """One browser, an Azurite container, and the statement's template: prints one size."""

    def __init__(
        self,
        pool: pooling.BrowserPool,
        store: storing.BlobStore,
        catalog: templates.TemplateCatalog,
        settings: RendererSettings,
    ) -> None:
        self.pool, self.store, self.catalog, self.settings = pool, store, catalog, settings
        self.data: dict[int, dict[str, Any]] = {}
        self.printed = 0

    def data_for(self, pages: int) -> dict[str, Any]:
        if pages not in self.data:
            self.data[pages] = statements.statement(statements.lines_for(pages))
        return self.data[pages]

    async def print(self, pages: int) -> dict[str, Any]:
        """Print the ``pages``-page statement once; its seconds, size, blocks and memory peaks."""
        await self._ready()
        self.printed += 1
        name = f"pdf/statement-{pages}-{self.printed}.pdf"
        async with sampling.peaks(self.pool) as peaks:
            started = time.perf_counter()
            html = await asyncio.to_thread(
                self.catalog.render, statements.TEMPLATE, self.data_for(pages)
            )
            sink = output.PdfOutput(self.store, name, limit=self.settings.max_pdf_bytes)
            pdf = await self.pool.render(html, statements.pdf_options(), sink=sink)
            size = await sink.store(pdf)
            seconds = time.perf_counter() - started
        return {
            "blob": name,
            "seconds": seconds,
            "bytes": size,
            "streamed": sink.streamed,
            "blocks": sink.blocks,
            "python": peaks.python,
            "driver": peaks.driver,
            "chromium": peaks.chromium,
        }

    async def _ready(self) -> None:
        """Wait out a browser's replacement (recycled above the memory cap after a big print):
        a print's time never includes a launch."""
        while self.pool.idle < self.pool.size or self.pool.launching:  # noqa: ASYNC110
            await asyncio.sleep(0.1)

    async def page_count(self, blob: str) -> tuple[int, str]:
        """The stored PDF's pages and the text of its last page."""
        data = await self.store.get(blob)
        reader = pypdf.PdfReader(io.BytesIO(data))
        return len(reader.pages), reader.pages[-1].extract_text() or ""


async def run(
    *, sizes: list[int], rounds: int, repeat: int, chromium_path: str | None, console: Console
) -> Report:
    catalog = templates.TemplateCatalog.load(documents.TEMPLATES)
    settings = documents.settings(pool_size=1, chromium_path=chromium_path)
    load_before = _load()
    results: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
    server = azurite.Azurite()
    await asyncio.to_thread(server.start)
    try:
        async with contextlib.AsyncExitStack() as stack:
            store = await stack.enter_async_context(
                storing.BlobStore(server.connection_string, CONTAINER)
            )
            await store.ensure()
            launcher = await stack.enter_async_context(
                browser.ChromiumLauncher(
                    executable_path=chromium_path, launch_timeout=settings.launch_timeout
                )
            )
            pool = await stack.enter_async_context(
                pooling.BrowserPool(
                    launcher.new_worker,
                    size=1,
                    borrow_timeout=settings.borrow_timeout,
                    launch_timeout=settings.launch_timeout,
                    render_timeout=settings.render_timeout,
                    recycle_after_jobs=settings.recycle_after_jobs,
                    recycle_rss_bytes=settings.recycle_rss_bytes,
                )
            )
            printer = Printer(pool, store, catalog, settings)
            await printer.print(min(sizes))  # untimed: a first print warms fonts and layout
            for index in range(rounds):
                order = sizes if index % 2 == 0 else list(reversed(sizes))
                console.log(f"round {index + 1}/{rounds}: {order} pages")
                for size in order:
                    for _ in range(repeat if size < max(sizes) else 1):
                        measured = await printer.print(size)
                        measured["load1"] = os.getloadavg()[0]
                        results[size].append(measured)
                        console.log(
                            f"  {size} pages: {measured['seconds']:.1f} s, "
                            f"{measured['bytes'] / sampling.MIB:.1f} MiB PDF, "
                            f"{measured['blocks']} blocks"
                        )
            checks = {size: await printer.page_count(results[size][-1]["blob"]) for size in sizes}
    finally:
        await asyncio.to_thread(server.stop)
    report: Report = {
        "sizes": {str(size): _summary(results[size], *checks[size], size=size) for size in sizes},
        "parameters": {
            "rounds": rounds,
            "repeat_small": repeat,
            "pool_size": 1,
            "chunk_bytes": printing.CHUNK_BYTES,
            "block_bytes": storing.BLOCK_BYTES,
            "render_timeout": settings.render_timeout,
            "max_pdf_bytes": settings.max_pdf_bytes,
            "cpu_count": os.cpu_count(),
            "load_before": load_before,
            "load_after": _load(),
        },
    }
    report["ratios"] = pages_report.ratios(report["sizes"], sizes)
    return report


def _summary(runs: list[dict[str, Any]], pages: int, last_text: str, *, size: int) -> Report:
    expected_last_line = statements.report_no(statements.lines_for(size))
    return {
        "pages": pages,
        "prints": len(runs),
        "s_per_page": round(statistics.median(run["seconds"] for run in runs) / pages, 4),
        "seconds_median": round(statistics.median(run["seconds"] for run in runs), 2),
        "pdf_mib": round(runs[-1]["bytes"] / sampling.MIB, 2),
        "streamed": runs[-1]["streamed"],
        "blocks": runs[-1]["blocks"],
        "python_mib": round(max(run["python"] for run in runs) / sampling.MIB, 1),
        "driver_mib": round(max(run["driver"] for run in runs) / sampling.MIB, 1),
        "chromium_mib": round(max(run["chromium"] for run in runs) / sampling.MIB, 1),
        "load1": round(statistics.fmean(run["load1"] for run in runs), 2),
        "complete": expected_last_line in last_text,
    }


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def main(*, sizes: list[int], rounds: int, repeat: int, as_json: bool, plot: Path | None) -> int:
    """Run it; 0 when every size printed whole (its last line on its last page), else 1."""
    if not sizes or min(sizes) < 1 or rounds < 1 or repeat < 1:
        print(
            "reportfarm bench pages: sizes, --rounds and --repeat must be at least 1",
            file=sys.stderr,
        )
        return 2
    console = reporting.bench_console(as_json)
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    try:
        report = loops.run(
            run(
                sizes=sorted(set(sizes)),
                rounds=rounds,
                repeat=repeat,
                chromium_path=chromium_path,
                console=console,
            )
        )
    except (azurite.AzuriteError, pooling.PoolError) as error:
        console.print(f"[red]reportfarm bench pages failed:[/red] {error!r}")
        return 1
    pages_report.show(report, console)
    if plot is not None:
        pages_report.plot(report, plot)
        console.print(f"plot: {plot}")
    if as_json:
        print(json.dumps(report, indent=2))
    return 0 if all(row["complete"] for row in report["sizes"].values()) else 1
