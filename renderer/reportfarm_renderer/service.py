"""The renderer service: the first browser (launching from the start), templates, storage, queue
worker and HTTP, started in that order (each fails start-up clearly), stopped in reverse, draining
on SIGTERM. ``reportfarm worker`` starts here through :mod:`.launching`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from reportfarm import azurite, carrying, contract
from reportfarm import settings as common
from reportfarm.storage import accounts
from reportfarm.storage.blobs import BlobStore
from reportfarm.storage.queueing import JobQueue
from reportfarm_renderer import cpus, http, lag, launching, starting, templates
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
    settings: RendererSettings,
    *,
    timeline: starting.Timeline | None = None,
    first: launching.FirstBrowser | None = None,
) -> AsyncIterator[Renderer]:
    """Start everything; on exit, drain the worker within the grace period and stop.

    The first browser launches while storage is opened (or, given ``first``, it was launched
    while this module imported: ``reportfarm worker``), and the renderer takes jobs as soon as it
    can print: the pool's other browsers launch in the background (the pool's resize)."""
    timeline = timeline or starting.Timeline.from_now()
    async with contextlib.AsyncExitStack() as stack:
        if first is not None:
            stack.push_async_callback(first.close)
        if not settings.storage.configured:
            raise SystemExit(
                f"neither {common.CONNECTION_STRING_VAR} nor {common.ACCOUNT_URL_VAR} is set (a "
                "worker needs storage; `reportfarm up` starts Azurite for you)"
            )
        catalog = templates.TemplateCatalog.load(settings.templates)
        logger.info("loaded %d template(s): %s", len(catalog.names), ", ".join(catalog.names))
        metrics = first.metrics if first is not None else RendererMetrics()
        key = carrying.key_of(settings.storage)
        parts = http.Parts(metrics=metrics, admin_token=settings.admin_token, handoff_key=key)
        if first is None:
            first = launching.FirstBrowser.launch(settings, metrics)
            stack.push_async_callback(first.close)
        pool = first.pool
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
                at_once=cpus.whole(cpus.pod_cpus()),
                signing_dir=settings.signing_dir if signer is not None else None,
                tsa_url=settings.tsa_url,
            )
            if signer is not None:  # a farm that signs finishes: its processes start now,
                finishers.start()  # and the pod is ready once they are all up
                parts.warming.append(finishers.unable)
                if settings.en16931_xslt is not None:  # and checks its invoices' rules
                    rules = _warm_rules(settings.en16931_xslt)
                    parts.warming.append(
                        lambda: None if rules.done() else ("EN 16931's rules compiling", False)
                    )
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
        await first.launching
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


def _warm_rules(xslt: Path) -> concurrent.futures.Future[tuple[bool, str]]:
    """EN 16931's Saxon process started and its stylesheet compiled now, in the background
    (readiness waits for it, see :func:`running`): without it the first invoice paid the spawn
    and the compile, and on a 1-CPU pod starting its browsers and finishing processes the first
    invoices of a burst waited 4-8 s each in line behind it (docs/benchmarks/einvoice.md).
    ~160 MiB more from the start in a pod that signs but never checks an invoice."""
    from reportfarm_renderer.finishing import en16931

    started = time.monotonic()

    def said(done: concurrent.futures.Future[tuple[bool, str]]) -> None:
        error = done.exception()
        ok, why = (False, repr(error)) if error is not None else done.result()
        if ok:
            logger.info("EN 16931's rules compiled in %.1f s", time.monotonic() - started)
        else:
            logger.warning("EN 16931's rules could not be prepared: %s", why)

    warming = en16931.warm(xslt)
    warming.add_done_callback(said)
    return warming


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


async def serve(
    settings: RendererSettings,
    *,
    timeline: starting.Timeline | None = None,
    first: launching.FirstBrowser | None = None,
) -> None:
    """Run until SIGTERM or SIGINT, then drain."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with running(settings, timeline=timeline, first=first):
        await stop.wait()
        logger.info("stop signal received: draining")


STARTUP_ERRORS = (
    templates.TemplateLoadError,
    pooling.PoolError,
    azurite.AzuriteError,
    common.SettingsError,
    keys.SignerError,
)
