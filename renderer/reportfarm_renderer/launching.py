"""``reportfarm worker``'s start: the first browser launches while the rest of the renderer imports.

A renderer's start is CPU-bound (docs/node/pod-start.md): Python's imports, Playwright's driver
(Node) and Chromium's launch each take a few tenths of a second of CPU. This module imports only
what a launch needs (Playwright, the pool, the settings, the metrics), starts the driver and the
pool's first browser on the event loop, and imports the rest of the renderer (storage, templates,
HTTP, finishing: :mod:`.service`) in a thread meanwhile, on a pod of at least
:data:`OVERLAP_CPUS` CPUs. There the two overlap (the driver and Chromium are other processes):
on the real node with a limit of 2 CPUs, container start to first PDF went 1.19 -> 0.95 s with
this and the image's other start changes together (docs/node/pod-start.md, "Latest round").
On one CPU they can only take turns, and the thread's switches cost more than they save (1.45 ->
1.51 s, 0.06 s more CPU): there the service imports first and the browser launches after, as
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib
import logging
from pathlib import Path

from reportfarm import loops, netpolicy
from reportfarm_renderer import browser, cpus, network, starting
from reportfarm_renderer import pool as pooling
from reportfarm_renderer.metrics import RendererMetrics
from reportfarm_renderer.settings import RendererSettings

logger = logging.getLogger(__name__)

SERVICE = "reportfarm_renderer.service"
OVERLAP_CPUS = 2.0
"""The pod's CPUs (its limit, :func:`reportfarm_renderer.cpus.pod_cpus`) from which the first
browser launches while the service imports. Measured at 1 and 2; a pod in between starts in turn."""


@dataclasses.dataclass
class FirstBrowser:
    """The launcher, the pool (of one browser, launching) and its metrics, started before the
    service; :func:`reportfarm_renderer.service.running` takes them over."""

    launcher: browser.ChromiumLauncher
    pool: pooling.BrowserPool
    metrics: RendererMetrics
    launching: asyncio.Task[None]
    """Starts the driver, then the pool's first browser."""

    @classmethod
    def launch(cls, settings: RendererSettings, metrics: RendererMetrics) -> FirstBrowser:
        """Start launching (on the running loop); the caller closes it (:meth:`close`) or hands it
        to the service."""
        launcher = browser.ChromiumLauncher(
            executable_path=settings.chromium_path,
            guard=network.NetworkGuard(
                policy=netpolicy.NetworkPolicy.for_documents(settings.allowed_hosts),
                events=metrics,
            ),
            launch_timeout=settings.launch_timeout,
            collect_every=settings.collect_every,
            hide_screen=settings.hide_screen,
        )
        pool = pooling.BrowserPool(
            functools.partial(launcher.new_worker, pages=settings.pages_per_browser),
            size=min(settings.pool_size, 1),
            pages_per_worker=settings.pages_per_browser,
            borrow_timeout=settings.borrow_timeout,
            launch_timeout=settings.launch_timeout,
            render_timeout=settings.render_timeout,
            recycle_after_jobs=settings.recycle_after_jobs,
            recycle_rss_bytes=settings.recycle_rss_bytes,
            events=metrics,
        )
        launching = asyncio.create_task(_launch(launcher, pool), name="first-browser")
        return cls(launcher, pool, metrics, launching)

    async def close(self) -> None:
        """Stop the launch if it still runs, then the pool and the driver."""
        self.launching.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.launching
        await self.pool.close()
        await self.launcher.close()


async def _launch(launcher: browser.ChromiumLauncher, pool: pooling.BrowserPool) -> None:
    await launcher.start()
    await pool.start()


def main(*, template_dir: Path | None, pool_size: int | None, port: int | None) -> int:
    """``reportfarm worker``: run until SIGTERM or SIGINT, then drain; 1 if the start failed."""
    timeline = starting.Timeline.begin()
    overrides: dict[str, object] = {}
    if template_dir is not None:
        overrides["templates"] = template_dir
    if pool_size is not None:
        overrides["pool_size"] = pool_size
    if port is not None:
        overrides["port"] = port
    settings = RendererSettings.from_env(**overrides)
    return loops.run(_serve(settings, timeline, overlap=cpus.pod_cpus() >= OVERLAP_CPUS))


async def _serve(settings: RendererSettings, timeline: starting.Timeline, *, overlap: bool) -> int:
    first: FirstBrowser | None = None
    if overlap:
        logger.info("start: the first browser launches while the renderer imports")
        first = FirstBrowser.launch(settings, RendererMetrics())
        try:
            service = await asyncio.to_thread(importlib.import_module, SERVICE)
        except BaseException:
            await first.close()
            raise
    else:
        logger.info("start: the renderer imports, then its first browser launches (one CPU)")
        service = importlib.import_module(SERVICE)
    timeline.mark("imported")
    try:
        await service.serve(settings, timeline=timeline, first=first)
    except service.STARTUP_ERRORS as error:
        logger.error("start-up failed: %s", error)
        return 1
    return 0
