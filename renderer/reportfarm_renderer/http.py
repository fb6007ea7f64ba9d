"""The renderer's HTTP surface (aiohttp): health, readiness, metrics and the pool-size control.
Its port, paths and ``/pool`` body are the renderer's contract, ``reportfarm.renderer_api``.

- ``GET /healthz``: 200 while the process and its event loop answer. It never depends on load, so
  a liveness probe does not kill a pod that is merely busy.
- ``GET /readyz``: 200 when the pool has live browsers, the queue answered the last receive,
  the worker is not draining and what its jobs need besides a browser is warm (a farm that
  signs: its finishing processes; one that checks invoices: EN 16931's rules); else 503 with
  the reasons.
- ``GET /metrics``: Prometheus text, the renderer's own registry.
- ``GET /pool``: the pool's state as JSON (size, live, busy, idle, running jobs).
- ``PUT /pool`` with ``{"size": N}`` (``renderer_api.pool_body``): resize the pool now, without
  a restart. This is how the operator changes browsers per pod within seconds. With an admin
  token set, it needs ``Authorization: Bearer <token>``.
- ``POST /wake``: a job may be waiting on the queue (the gateway's hint, see
  ``reportfarm_gateway.hinting``): an idle worker ends its idle pause and receives now. 204; no
  effect on a busy or draining worker.
- ``POST /handoff``: a job handed over by the gateway (``renderer_api.HANDOFF_PATH``): its message,
  sent invisible, and the pop receipt the put answered, signed with the key the gateway and the
  renderers derive from the storage account's secret (``reportfarm.carrying``). 200 when the
  worker runs it now (as if received: ``QueueWorker.take``); 409 when it does not (no room,
  draining, no key, a signature or body that does not check out, too little of its hold left):
  the gateway then makes the message visible at once, and a receive finds it (an offer taken
  too late to be answered in time is left to its hold, and received when it ends).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import hmac
import json
import logging
import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reportfarm import carrying, logs, renderer_api
from reportfarm.storage.queueing import Delivery
from reportfarm_renderer import pool as pooling
from reportfarm_renderer.metrics import RendererMetrics
from reportfarm_renderer.worker import HANDOFF_MIN_LEFT_S, QueueWorker

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Parts:
    """What the HTTP handlers look at; filled in as the service starts."""

    metrics: RendererMetrics
    admin_token: str | None = None
    pool: pooling.BrowserPool | None = None
    worker: QueueWorker | None = None
    draining: bool = False
    handoff_key: bytes | None = None
    """Checks hand-offs (``reportfarm.carrying.key_for``); None: every one is declined
    (counted as ``unkeyed``, not as ``refused``: nothing is wrong with the offer)."""
    handoffs_refused: int = 0
    handoffs_unkeyed: bool = False
    """Whether a hand-off came to a renderer without a key (logged once)."""
    warming: list[Callable[[], tuple[str, bool] | None]] = dataclasses.field(default_factory=list)
    """What else a job needs before the pod counts as ready (a farm that signs: its finishing
    processes up; one that checks invoices: EN 16931's rules compiled): each says why it is
    not done yet and whether for good, or None once done. Within :data:`WARMING_BOUND_S` of the
    start, or for good, a reason is a readiness problem."""
    started: float = dataclasses.field(default_factory=time.monotonic)
    warming_overdue: set[str] = dataclasses.field(default_factory=set)
    """Warm-ups past the bound, each logged once."""


PARTS = web.AppKey("parts", Parts)

WARMING_BOUND_S = 120.0
"""How long readiness waits for a warm-up (:attr:`Parts.warming`) that is merely slow: past it,
the pod is ready once it can print (a slow start must not keep a pod out of the count forever;
its jobs still wait for the warm-up where they need it), and the delay is logged."""


def create_app(parts: Parts) -> web.Application:
    app = web.Application()
    app[PARTS] = parts
    app.router.add_get(renderer_api.HEALTHZ_PATH, healthz)
    app.router.add_get(renderer_api.READYZ_PATH, readyz)
    app.router.add_get(renderer_api.METRICS_PATH, metrics)
    app.router.add_get(renderer_api.POOL_PATH, get_pool)
    app.router.add_put(renderer_api.POOL_PATH, put_pool)
    app.router.add_post(renderer_api.WAKE_PATH, wake)
    app.router.add_post(renderer_api.HANDOFF_PATH, handoff)
    return app


async def handoff(request: web.Request) -> web.Response:
    parts = request.app[PARTS]
    size = request.content_length
    outcome = "refused"  # no length, too long, or cut short: not read, not taken
    if size is not None and 0 < size <= renderer_api.MAX_HANDOFF_BYTES:
        try:
            outcome = _take(parts, await request.content.readexactly(size), request)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
    parts.metrics.hints.labels(kind="handoff", outcome=outcome).inc()
    if outcome == "refused":
        parts.handoffs_refused += 1
        if logs.worth_logging(parts.handoffs_refused):
            logger.warning(
                "a hand-off did not check out (%d so far; its job goes on the lane and is "
                "received): do the gateway and the renderers share one storage connection string?",
                parts.handoffs_refused,
            )
    elif outcome == "unkeyed" and not parts.handoffs_unkeyed:
        parts.handoffs_unkeyed = True
        logger.warning(
            "a hand-off came, but this renderer has no key to check one (its storage is not "
            "reached with a connection string): hand-offs go on the lane and are received"
        )
    return web.Response(status=200 if outcome == "taken" else 409)


def _take(parts: Parts, body: bytes, request: web.Request) -> str:
    if parts.handoff_key is None:
        return "unkeyed"
    signature = request.headers.get(carrying.HANDOFF_SIGNATURE_HEADER)
    if signature is None:
        return "refused"
    if not carrying.verify_handoff(parts.handoff_key, body, signature):
        return "refused"
    handed = renderer_api.parse_handoff(body)
    if handed is None:
        return "refused"
    if parts.worker is None or parts.draining:
        return "busy"
    try:
        inserted_on: datetime.datetime | None = datetime.datetime.fromisoformat(handed.inserted_on)
    except ValueError:
        inserted_on = None
    delivery = Delivery(
        message_id=handed.message_id,
        pop_receipt=handed.pop_receipt,
        dequeue_count=1,
        content=handed.content,
        inserted_on=inserted_on,
    )
    taken = parts.worker.take(handed.queue, delivery, held_s=handed.held_s)
    if taken == "late" and logs.worth_logging(parts.worker.handoffs_late):
        logger.warning(
            "a hand-off came with less than %.0f s of its %d s hold left (%d so far): refused, "
            "its message is received when the hold ends; this renderer's event loop lags, or "
            "its clock is ahead of storage's",
            HANDOFF_MIN_LEFT_S,
            handed.held_s,
            parts.worker.handoffs_late,
        )
    return taken


async def wake(request: web.Request) -> web.Response:
    parts = request.app[PARTS]
    idle = parts.worker is not None and parts.worker.wake()
    parts.metrics.hints.labels(kind="wake", outcome="idle" if idle else "busy").inc()
    return web.Response(status=204)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def readiness_problems(parts: Parts) -> list[str]:
    problems = []
    if parts.draining:
        problems.append("draining")
    if parts.pool is None:
        problems.append("pool not started")
    elif parts.pool.size > 0 and parts.pool.live == 0:
        problems.append("no live browser")
    if parts.worker is None:
        problems.append("worker not started")
    elif not parts.worker.queue_ready:
        problems.append(f"queue not reachable: {parts.worker.last_error or 'no receive yet'}")
    within = time.monotonic() - parts.started < WARMING_BOUND_S
    for check in parts.warming:
        if (unready := check()) is None:
            continue
        reason, lasting = unready
        if lasting or within:
            problems.append(reason)
        elif reason not in parts.warming_overdue:
            parts.warming_overdue.add(reason)
            logger.warning("ready without it after %.0f s: %s", WARMING_BOUND_S, reason)
    return problems


async def readyz(request: web.Request) -> web.Response:
    problems = readiness_problems(request.app[PARTS])
    if problems:
        return web.json_response({"status": "not ready", "problems": problems}, status=503)
    return web.json_response({"status": "ready"})


def pool_state(parts: Parts) -> dict[str, int]:
    pool, worker = parts.pool, parts.worker
    if pool is None:
        return {"size": 0, "live": 0, "busy": 0, "idle": 0, "running_jobs": 0}
    return {
        "size": pool.size,
        "live": pool.live,
        "busy": pool.busy,
        "idle": pool.idle,
        "running_jobs": worker.running if worker else 0,
    }


async def metrics(request: web.Request) -> web.Response:
    parts = request.app[PARTS]
    state = pool_state(parts)
    parts.metrics.pool_size.set(state["size"])
    parts.metrics.pool_live.set(state["live"])
    parts.metrics.pool_busy.set(state["busy"])
    body = generate_latest(parts.metrics.registry)
    response = web.Response(body=body)
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    return response


async def get_pool(request: web.Request) -> web.Response:
    return web.json_response(pool_state(request.app[PARTS]))


async def put_pool(request: web.Request) -> web.Response:
    parts = request.app[PARTS]
    if parts.admin_token is not None:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given, parts.admin_token):
            return web.json_response({"error": "unauthorized"}, status=401)
    try:
        size = renderer_api.parse_pool_body(await request.json())
    except ValueError as error:  # json.JSONDecodeError is one too
        message = 'body must be {"size": N}' if isinstance(error, json.JSONDecodeError) else error
        return web.json_response({"error": str(message)}, status=400)
    if parts.pool is None or parts.draining:
        return web.json_response({"error": "pool not running"}, status=503)
    await parts.pool.resize(size)
    return web.json_response(pool_state(parts))
