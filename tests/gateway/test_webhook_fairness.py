"""One tenant's slow webhook receiver delays only its own tenant's webhooks (issue 25).

A real dispatcher (in the gateway, on real Azurite) gets a burst of completion events of tenant
acme, whose receiver never answers within the POST timeout, then one event of tenant globex,
whose receiver answers at once. globex's webhook must arrive about as soon as when it is alone.
The records are written directly (no renderer): the dispatcher only reads records and events.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from reportfarm_gateway.webhooks.settings import WebhookSettings

from reportfarm import contract, netpolicy
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from .conftest import SECRET, gateway_settings, running_gateway

pytestmark = [pytest.mark.azurite]


@contextlib.asynccontextmanager
async def receiver(*, answer_after_s: float) -> AsyncIterator[tuple[str, list[float]]]:
    """A webhook receiver on loopback; yields its URL and the times it got each POST."""
    arrivals: list[float] = []

    async def hit(request: web.Request) -> web.Response:
        await request.read()
        arrivals.append(time.monotonic())
        await asyncio.sleep(answer_after_s)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", hit)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    try:
        yield f"http://127.0.0.1:{port}/hook", arrivals
    finally:
        await runner.cleanup()


async def finished(client: ReportFarmClient, tenant: str, url: str) -> None:
    """A job of ``tenant`` that ended and asked for a webhook: its record, then its event."""
    record = contract.ResultRecord(
        job_id=contract.new_job_id(), state="succeeded", tenant=tenant, callback_url=url
    )
    await client.blobs.put_result(record)
    await client.events.send(contract.completion_event(record))


async def globex_delay(client: ReportFarmClient, url: str, arrivals: list[float]) -> float:
    before = len(arrivals)
    sent = time.monotonic()
    await finished(client, "globex", url)
    for _ in range(600):
        if len(arrivals) > before:
            return arrivals[before] - sent
        await asyncio.sleep(0.02)
    raise AssertionError("globex's webhook never arrived")


async def test_a_receiver_that_never_answers_delays_only_its_own_tenant(
    storage: StorageSettings, client: ReportFarmClient
) -> None:
    hooks = WebhookSettings(
        default_secret=SECRET,
        policy=netpolicy.NetworkPolicy(allow_private=True),
        timeout_s=2.0,
        concurrency=8,
        per_tenant=2,
        poll_max_s=0.1,
        backoff_s=1.0,
    )
    settings = gateway_settings(storage, webhooks=hooks)
    async with (
        receiver(answer_after_s=60) as (slow_url, slow),
        receiver(answer_after_s=0) as (fast_url, fast),
        running_gateway(settings),
    ):
        idle = [await globex_delay(client, fast_url, fast) for _ in range(3)]
        for _ in range(30):  # a burst: many more than the dispatcher's concurrency
            await finished(client, "acme", slow_url)
        await asyncio.sleep(1.0)  # acme's POSTs are hanging now
        loaded = [await globex_delay(client, fast_url, fast) for _ in range(3)]
        hanging = len(slow)
    print(
        f"\nglobex webhook delay alone: {[round(s, 2) for s in idle]} s; during acme's burst "
        f"of 30 to a receiver that never answers: {[round(s, 2) for s in loaded]} s "
        f"(acme POSTs seen by its receiver by then: {hanging})"
    )
    assert 0 < hanging <= 2 * 3, hanging  # acme had at most its share of POSTs at a time
    assert max(loaded) <= 2 * max(max(idle), 0.5)
