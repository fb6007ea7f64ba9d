"""The renderer service: templates, browser pool, storage, queue worker and HTTP, started in that
order (each fails start-up clearly), stopped in reverse, draining on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from reportfarm import azurite, carrying, contract, loops, netpolicy
from reportfarm import settings as common
from reportfarm.storage import accounts
from reportfarm.storage.blobs import BlobStore
from reportfarm.storage.queueing import JobQueue
from reportfarm_renderer import browser, http, lag, network, starting, templates
from reportfarm_renderer import pool as pooling
from reportfarm_renderer.finishing import keys, processes, signers
from reportfarm_renderer.hints import DoneHints
from reportfarm_renderer.jobs import JobRunner
from reportfarm_renderer.metrics import RendererMetrics
from reportfarm_renderer.settings import RendererSettings
from reportfarm_renderer.worker import QueueWorker

logger = logging.getLogger(__name__)

MEMORY_SAMPLE_S = 10.0


@dataclasses.dataclass
class Renderer:
    """A running renderer, as the local farm, the benchmark and the tests drive it."""

    settings: RendererSettings
    parts: http.Parts
    pool: pooling.BrowserPool
    worker: QueueWorker
    lanes: list[JobQueue]
    """The interactive lane's queue, then the farm's own (bulk) queue."""
    blobs: BlobStore
    port: int


@contextlib.asynccontextmanager
async def running(
    settings: RendererSettings, *, timeline: starting.Timeline | None = None
) -> AsyncIterator[Renderer]:
    """Start everything; on exit, drain the worker within the grace period and stop.

    The first browser launches while storage is opened, and the renderer takes jobs as soon as it
    can print: the pool's other browsers launch in the background (the pool's resize)."""
    timeline = timeline or starting.Timeline.from_now()
    if not settings.storage.configured:
        raise SystemExit(
            f"neither {common.CONNECTION_STRING_VAR} nor {common.ACCOUNT_URL_VAR} is set (a worker "
            "needs storage; `reportfarm up` starts Azurite for you)"
        )
    catalog = templates.TemplateCatalog.load(settings.templates)
    logger.info("loaded %d template(s): %s", len(catalog.names), ", ".join(catalog.names))
    metrics = RendererMetrics()
    key = carrying.key_for(settings.storage.connection_string)
    parts = http.Parts(metrics=metrics, admin_token=settings.admin_token, handoff_key=key)
    async with contextlib.AsyncExitStack() as stack:
        launcher = browser.ChromiumLauncher(
            executable_path=settings.chromium_path,
            guard=network.NetworkGuard(
                policy=netpolicy.NetworkPolicy.for_documents(settings.allowed_hosts),
                events=metrics,
            ),
            launch_timeout=settings.launch_timeout,
            collect_every=settings.collect_every,
        )
        stack.push_async_callback(launcher.close)
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
        stack.push_async_callback(pool.close)
        first_browser = asyncio.create_task(_first_browser(launcher, pool), name="first-browser")
        stack.push_async_callback(_cancel, first_browser)  # start-up failed below: stop it
        # The signing key is read once, while the first browser launches: a key that cannot be used
        # stops the renderer here, with its reason, instead of failing every job that asks for a
        # signature.
        signer = await asyncio.to_thread(
            functools.partial(signers.load, settings.signing_dir, timestamp_url=settings.tsa_url)
        )
        if signer is None:
            logger.info("signing: off (no %s in %s)", keys.KEY_FILE, settings.signing_dir)
        else:
            logger.info("signing: on, %s", signer.describe())
        account = await stack.enter_async_context(accounts.opened(settings.storage))
        logger.info("storage: signed in with a %s", account.signed_in_with)
        name = settings.storage.queue
        lanes = [
            await stack.enter_async_context(JobQueue(account, contract.lane_queue_name(name, lane)))
            for lane in contract.LANES
        ]
        events = await stack.enter_async_context(
            JobQueue(account, contract.events_queue_name(name))
        )
        blobs = await stack.enter_async_context(BlobStore(account, settings.storage.container))
        with contextlib.suppress(Exception):  # unreachable storage: the worker loop says so
            for queue in (*lanes, events):
                await queue.ensure()
            await blobs.ensure()
        finishers = None
        if settings.finishers() > 0:
            finishers = processes.FinishingProcesses(
                size=settings.finishers(),
                signing_dir=settings.signing_dir if signer is not None else None,
                tsa_url=settings.tsa_url,
            )
            if signer is not None:  # a farm that signs finishes: its processes start now
                finishers.start()
            metrics.signature_cpu.set_function(lambda: finishers.signature_cpu_s() or 0.0)
            stack.push_async_callback(finishers.close)
        runner = JobRunner(
            settings=settings,
            catalog=catalog,
            pool=pool,
            blobs=blobs,
            metrics=metrics,
            events=events,
            signer=signer,
            hints=DoneHints(counter=metrics.hints, key=key),
            finishers=finishers,
        )
        stack.push_async_callback(runner.hints.close)
        await first_browser
        timeline.mark("browser_ready")
        parts.pool = pool
        await pool.resize(settings.pool_size)  # the others launch in the background
        logger.info("first browser ready, %d more launching", pool.launching)
        worker = QueueWorker(
            runner=runner,
            lanes=lanes,
            pool=pool,
            metrics=metrics,
            visibility_timeout=settings.visibility_timeout,
            poll_max_s=settings.poll_max_s,
            timeline=timeline,
        )
        parts.worker = worker
        app_runner = web.AppRunner(http.create_app(parts), access_log=None)
        await app_runner.setup()
        stack.push_async_callback(app_runner.cleanup)
        site = web.TCPSite(app_runner, host="0.0.0.0", port=settings.port)
        await site.start()
        port = _bound_port(app_runner, settings.port)
        logger.info("renderer listening on :%d, queues %s", port, [q.name for q in lanes])
        timeline.mark("listening")

        loop_task = asyncio.create_task(worker.run(), name="queue-worker")
        sampler = asyncio.create_task(_sample_memory(pool, metrics), name="memory-sampler")
        lagging = asyncio.create_task(lag.watch(metrics), name="loop-lag")
        try:
            yield Renderer(settings, parts, pool, worker, lanes, blobs, port)
        finally:
            parts.draining = True
            sampler.cancel()
            lagging.cancel()
            await worker.drain(timeout=settings.drain_timeout)
            # A receive in flight when the drain began ends by handing its messages back.
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(loop_task, timeout=15)


async def _first_browser(launcher: browser.ChromiumLauncher, pool: pooling.BrowserPool) -> None:
    await launcher.start()
    await pool.start()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def _bound_port(app_runner: web.AppRunner, fallback: int) -> int:
    for address in app_runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    return fallback


async def _sample_memory(pool: pooling.BrowserPool, metrics: RendererMetrics) -> None:
    while True:
        with contextlib.suppress(Exception):
            sizes = await pool.memory()
            if sizes:
                metrics.browser_memory.labels(stat="max").set(max(sizes))
                metrics.browser_memory.labels(stat="sum").set(sum(sizes))
        await asyncio.sleep(MEMORY_SAMPLE_S)


async def serve(settings: RendererSettings, *, timeline: starting.Timeline | None = None) -> None:
    """Run until SIGTERM or SIGINT, then drain."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with running(settings, timeline=timeline):
        await stop.wait()
        logger.info("stop signal received: draining")


STARTUP_ERRORS = (
    templates.TemplateLoadError,
    pooling.PoolError,
    azurite.AzuriteError,
    common.SettingsError,
    keys.SignerError,
)


def main(*, template_dir: Path | None, pool_size: int | None, port: int | None) -> int:
    timeline = starting.Timeline.begin()
    timeline.mark("imported")
    overrides: dict[str, object] = {}
    if template_dir is not None:
        overrides["templates"] = template_dir
    if pool_size is not None:
        overrides["pool_size"] = pool_size
    if port is not None:
        overrides["port"] = port
    settings = RendererSettings.from_env(**overrides)
    try:
        loops.run(serve(settings, timeline=timeline))
    except STARTUP_ERRORS as error:
        logger.error("start-up failed: %s", error)
        return 1
    return 0
