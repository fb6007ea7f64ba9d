"""What every handler shares: the typed application and request keys, and the error answer."""

from __future__ import annotations

from aiohttp import web

from reportfarm.client import ReportFarmClient
from reportfarm_gateway.backpressure import QueueDepths
from reportfarm_gateway.bodies import BodyBudget, BodyError
from reportfarm_gateway.metrics import GatewayMetrics
from reportfarm_gateway.offloading import Offloader
from reportfarm_gateway.quotas import TenantQuotas
from reportfarm_gateway.settings import GatewaySettings
from reportfarm_gateway.webhooks.dispatching import Dispatcher

SETTINGS = web.AppKey("settings", GatewaySettings)
METRICS = web.AppKey("metrics", GatewayMetrics)
QUOTAS = web.AppKey("quotas", TenantQuotas)
CLIENT = web.AppKey("client", ReportFarmClient)
"""Set by the storage cleanup context: present only while the app runs."""
DEPTHS = web.AppKey("depths", QueueDepths)
DISPATCHER = web.AppKey("dispatcher", Dispatcher)
BODIES = web.AppKey("bodies", BodyBudget)
"""The budget of request bodies read and processed at once (see gateway.bodies)."""
OFFLOADER = web.AppKey("offloader", Offloader)
"""The worker processes that parse and check request bodies (see gateway.offloading)."""
TENANT = web.RequestKey("tenant", str)
"""The authenticated tenant of a /v1 request."""


def problem(
    status: int, detail: str, *, retry_after: int | None = None, **extra: object
) -> web.Response:
    """An error answer: ``{"error": <detail>, ...}``, with Retry-After when given."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return web.json_response({"error": detail, **extra}, status=status, headers=headers)


def refused(error: BodyError) -> web.Response:
    """The answer to a body the gateway refuses (400, 413 or 503)."""
    answer = problem(error.status, str(error), retry_after=error.retry_after)
    if error.unread:
        answer.force_close()
    return answer


async def backpressure(request: web.Request, lane: str) -> web.Response | None:
    """503 + Retry-After when the lane's queue is past its bound (the depth read is cached)."""
    settings = request.app[SETTINGS]
    bound = settings.max_interactive_depth if lane == "interactive" else settings.max_bulk_depth
    depth = await request.app[DEPTHS].depth("interactive" if lane == "interactive" else "bulk")
    if depth < bound:
        return None
    request.app[METRICS].rejected.labels(reason="backpressure").inc()
    return problem(
        503,
        f"the {lane} lane holds {depth} jobs, past its bound of {bound}: try again later",
        retry_after=settings.backpressure_retry_s,
    )
