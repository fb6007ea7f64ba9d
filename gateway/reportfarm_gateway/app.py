"""The gateway's aiohttp application: resources, middleware, health and metrics.

- ``GET /healthz``: 200 while the process answers. ``GET /readyz``: 200 when storage answered
  the last depth read and the dispatcher (if on) receives events; else 503 with the reasons.
- ``GET /metrics``: Prometheus text of the gateway's own registry. ``GET /openapi.json``.
- Every ``/v1`` route needs ``Authorization: Bearer <token>`` (REPORTFARM_TOKENS names the
  tenant), then passes the tenant's quotas: token bucket and in-flight cap (429 + Retry-After).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reportfarm import carrying, loops
from reportfarm import settings as common
from reportfarm.client import ReportFarmClient
from reportfarm.storage import accounts
from reportfarm_gateway import batching, hinting, openapi, protocol, queries, reports
from reportfarm_gateway.backpressure import QueueDepths
from reportfarm_gateway.bodies import BodyBudget
from reportfarm_gateway.context import (
    BODIES,
    CLIENT,
    DEPTHS,
    DISPATCHER,
    METRICS,
    OFFLOADER,
    QUOTAS,
    SETTINGS,
    TENANT,
    problem,
)
from reportfarm_gateway.metrics import GatewayMetrics
from reportfarm_gateway.offloading import Offloader
from reportfarm_gateway.quotas import TenantQuotas
from reportfarm_gateway.settings import GatewaySettings
from reportfarm_gateway.webhooks.dispatching import Dispatcher

logger = logging.getLogger(__name__)

STOPPING = web.AppKey("stopping", asyncio.Event)
"""Set on SIGTERM: /readyz answers 503 from then on, while the listener still serves."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def create_app(settings: GatewaySettings) -> web.Application:
    if not settings.storage.configured:
        raise ValueError(
            f"the gateway needs {common.CONNECTION_STRING_VAR} or {common.ACCOUNT_URL_VAR}"
        )
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[_observe, _as_json, _authorize, _check_query],
    )
    app[SETTINGS] = settings
    app[STOPPING] = asyncio.Event()
    app[METRICS] = GatewayMetrics()
    app[BODIES] = BodyBudget(
        limit_bytes=settings.body_budget_bytes,
        tenant_bytes=settings.tenant_body_budget_bytes,
        wait_s=settings.body_wait_s,
        read_s=settings.body_read_s,
    )
    app[QUOTAS] = TenantQuotas(
        rate_per_s=settings.rate_per_s, burst=settings.burst, in_flight=settings.in_flight
    )
    key = carrying.key_of(settings.storage)
    app[hinting.WAITERS] = hinting.Waiters(address=settings.notify_address, key=key)  # or why not
    app[hinting.WAKER] = hinting.Waker(
        targets=settings.wake,
        fanout=settings.wake_fanout,
        counter=app[METRICS].hints,
        key=key,
        handoff_s=settings.handoff_s,
    )
    app.cleanup_ctx.append(_storage)
    app.cleanup_ctx.append(_offloader)
    app.cleanup_ctx.append(_waker)
    if settings.dispatcher:
        app.cleanup_ctx.append(_dispatcher)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi_document)
    reports.add_routes(app.router)
    batching.add_routes(app.router)
    hinting.add_routes(app.router)
    return app


async def _waker(app: web.Application) -> AsyncIterator[None]:
    await app[hinting.WAKER].start()
    yield
    await app[hinting.WAKER].close()


async def _storage(app: web.Application) -> AsyncIterator[None]:
    storage = app[SETTINGS].storage
    account = accounts.from_settings(storage)
    logger.info("storage: signed in with a %s", account.signed_in_with)
    client = ReportFarmClient(account, queue=storage.queue, container=storage.container)
    try:
        await client.ensure()
    except Exception as error:  # unreachable storage at start: /readyz says so until it is back
        logger.warning("could not create queues and container: %s", error)
    app[CLIENT] = client
    app[DEPTHS] = QueueDepths(client, ttl_s=app[SETTINGS].depth_cache_s)
    yield
    await client.close()


async def _offloader(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    offloader = Offloader(workers=settings.check_workers, inline_bytes=settings.inline_check_bytes)
    if not settings.inline_check_bytes:  # every body goes to a worker: start them now
        await asyncio.to_thread(offloader.start)
    app[OFFLOADER] = offloader
    yield
    offloader.close()


async def _dispatcher(app: web.Application) -> AsyncIterator[None]:
    dispatcher = Dispatcher(
        client=app[CLIENT], settings=app[SETTINGS].webhooks, registry=app[METRICS].registry
    )
    app[DISPATCHER] = dispatcher
    task = asyncio.create_task(dispatcher.run(), name="webhook-dispatcher")
    yield
    dispatcher.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def tenant_of(tokens: Mapping[str, str], header: str) -> str | None:
    """The tenant whose token this Authorization header carries (constant-time comparisons)."""
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    # aiohttp reads header bytes that are not UTF-8 as lone surrogates: such a token is nobody's.
    presented = given.strip().encode("utf-8", errors="surrogateescape")
    found = None
    for tenant, token in tokens.items():
        if hmac.compare_digest(presented, token.encode()):
            found = tenant
    return found


@web.middleware
async def _observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    metrics = request.app[METRICS]
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    started = time.monotonic()
    metrics.in_flight.inc()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as error:
        status = error.status
        raise
    finally:
        metrics.in_flight.dec()
        metrics.requests.labels(route=route, method=request.method, status=str(status)).inc()
        metrics.seconds.labels(route=route).observe(time.monotonic() - started)


@web.middleware
async def _as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error is JSON, aiohttp's own (404, 405, 413) included; anything unforeseen is a JSON
    500 that is logged with its traceback."""
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        answer = problem(error.status, error.reason)
        for name in ("Allow", "Retry-After"):
            if name in error.headers:
                answer.headers[name] = error.headers[name]
        return answer
    except Exception:
        logger.exception("%s %s failed", request.method, request.path)
        return problem(500, "the gateway failed on this request (it is logged)")


@web.middleware
async def _authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith("/v1/"):
        return await handler(request)
    app = request.app
    tenant = tenant_of(app[SETTINGS].tokens, request.headers.get("Authorization", ""))
    if tenant is None:
        app[METRICS].rejected.labels(reason="unauthorized").inc()
        response = problem(401, "a bearer token of a tenant is required")
        response.headers["WWW-Authenticate"] = 'Bearer realm="reportfarm"'
        return response
    quotas = app[QUOTAS]
    refusal = quotas.admit(tenant, time.monotonic())
    if refusal is not None:
        app[METRICS].rejected.labels(reason=refusal.reason).inc()
        detail = "rate limit" if refusal.reason == "rate" else "too many requests in flight"
        return problem(429, f"{detail} of tenant {tenant}", retry_after=refusal.retry_after_s)
    request[TENANT] = tenant
    try:
        return await handler(request)
    finally:
        quotas.release(tenant)


_QUERY_RULES = queries.rules_of(openapi.document())


@web.middleware
async def _check_query(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A /v1 call's query string holds only what its operation declares, each once, valid."""
    resource = request.match_info.route.resource
    if resource is None:
        return await handler(request)
    rules = _QUERY_RULES.get((request.method, resource.canonical))
    if rules is None:
        return await handler(request)
    found = queries.problems(request.query, rules)
    if found:
        request.app[METRICS].rejected.labels(reason="query").inc()
        return problem(400, "; ".join(found))
    return await handler(request)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    app = request.app
    if app[STOPPING].is_set():
        return web.json_response({"status": "stopping", "problems": ["shutting down"]}, status=503)
    problems = []
    depths = app[DEPTHS]
    await depths.depth("interactive")
    if depths.last_error:
        problems.append(f"queue not reachable: {depths.last_error}")
    dispatcher = app.get(DISPATCHER)
    if dispatcher is not None and not dispatcher.ready:
        problems.append("webhook dispatcher has not reached the events queue")
    if problems:
        return web.json_response({"status": "not ready", "problems": problems}, status=503)
    return web.json_response({"status": "ready"})


async def metrics(request: web.Request) -> web.Response:
    app = request.app
    for lane, depth in app[DEPTHS].known().items():
        app[METRICS].queue_depth.labels(lane=lane).set(depth)
    response = web.Response(body=generate_latest(app[METRICS].registry))
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    return response


async def openapi_document(request: web.Request) -> web.Response:
    return web.json_response(openapi.document())


async def serve(settings: GatewaySettings, *, ready: asyncio.Event | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop without dropping a request: /readyz turns 503 at
    once, the listener keeps serving for ``settings.shutdown_delay_s`` (load balancers and
    endpoint lists catch up), then closes, and requests in flight get up to
    ``settings.shutdown_timeout_s`` to finish. ``ready`` is set once the listener is up."""
    app = create_app(settings)
    stop = app[STOPPING]
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runner = protocol.AppRunner(app, access_log=None, shutdown_timeout=settings.shutdown_timeout_s)
    await runner.setup()
    try:
        await web.TCPSite(runner, host="0.0.0.0", port=settings.port).start()
        logger.info("gateway listening on :%d, queue %s", settings.port, settings.storage.queue)
        if ready is not None:
            ready.set()
        await stop.wait()
        logger.info(
            "stopping: not ready; serving %.1f s more, then up to %.0f s for requests in flight",
            settings.shutdown_delay_s,
            settings.shutdown_timeout_s,
        )
        await asyncio.sleep(settings.shutdown_delay_s)
    finally:
        await runner.cleanup()


def main(*, port: int | None) -> int:
    overrides: dict[str, object] = {"port": port} if port is not None else {}
    settings = GatewaySettings.from_env(None, **overrides)
    if not settings.tokens:
        logger.error("REPORTFARM_TOKENS is empty: no tenant could call the gateway")
        return 2
    if not settings.storage.configured:
        logger.error(
            "neither %s nor %s is set", common.CONNECTION_STRING_VAR, common.ACCOUNT_URL_VAR
        )
        return 2
    try:
        loops.run(serve(settings))
    except common.SettingsError as error:  # e.g. an account URL whose blob endpoint is unknown
        logger.error("start-up failed: %s", error)
        return 2
    return 0
