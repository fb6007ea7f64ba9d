"""Webhooks end to end: a local receiver checks each signature; one that fails twice still gets
the event; a batch announces its end once; callbacks to private addresses are refused."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from reportfarm_gateway import tenancy
from reportfarm_gateway.webhooks import delivering, signing
from reportfarm_gateway.webhooks.settings import WebhookSettings

from reportfarm import netpolicy
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from ..renderer.conftest import wait_for
from .conftest import SECRET, auth, farm, gateway_settings, running_gateway

pytestmark = [pytest.mark.azurite]


@dataclasses.dataclass
class Receiver:
    url: str
    fail_first: int = 0
    calls: int = 0
    received: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Verified deliveries: headers and payload."""

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        if self.calls <= self.fail_first:
            return web.Response(status=500, text="not today")
        body = await request.read()
        try:
            signing.verify(SECRET, request.headers.get(signing.SIGNATURE_HEADER), body)
        except signing.SignatureError as error:
            return web.Response(status=401, text=str(error))
        self.received.append({"headers": dict(request.headers), "payload": json.loads(body)})
        return web.Response(status=204)


@contextlib.asynccontextmanager
async def receiver(*, fail_first: int = 0) -> AsyncIterator[Receiver]:
    app = web.Application()
    hook = Receiver(url="", fail_first=fail_first)
    app.router.add_post("/hook", hook.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host="127.0.0.1", port=0).start()
    port = next(address[1] for address in runner.addresses if isinstance(address, tuple))
    hook.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield hook
    finally:
        await runner.cleanup()


@pytest.mark.chromium
async def test_a_job_webhook_is_signed_and_a_receiver_that_fails_twice_still_gets_it(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    async with receiver(fail_first=2) as hook, farm(storage, template_dir) as gateway:
        body = {"template": "plain", "data": {"name": "回调"}, "callback_url": hook.url}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth()
        ) as response:
            assert response.status == 200
            job_id = response.headers["X-Reportfarm-Job-Id"]
        await wait_for(lambda: _count(hook, 1), timeout=60)
    assert hook.calls == 3
    delivery = hook.received[0]
    assert delivery["headers"][signing.IDEMPOTENCY_HEADER] == f"{job_id}:succeeded"
    assert delivery["headers"][signing.EVENT_HEADER] == "job.finished"
    assert delivery["headers"][signing.ATTEMPT_HEADER] == "3"
    assert delivery["payload"]["job_id"] == job_id
    assert delivery["payload"]["state"] == "succeeded"
    assert delivery["payload"]["links"]["pdf"] == f"/v1/reports/{job_id}/pdf"
    log = await delivering.read_log(client.blobs, job_id)
    assert [entry["outcome"] for entry in log] == ["failed", "failed", "delivered"]
    assert [entry["status"] for entry in log] == [500, 500, 204]
    assert await client.events.depth() == 0


@pytest.mark.chromium
async def test_a_batch_announces_its_end_once(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    items = [{"template": "plain", "data": {"name": f"n{index}"}} for index in range(6)]
    items[4] = {"template": "nosuch", "data": {}}
    async with receiver() as hook, farm(storage, template_dir) as gateway:
        async with gateway.http.post(
            gateway.at("/v1/batches"),
            params={"batch_id": "hooked", "callback_url": hook.url},
            json=items,
            headers=auth(),
        ) as response:
            assert response.status == 202
        await wait_for(lambda: _count(hook, 1), timeout=60)
        await asyncio.sleep(3)  # time for a duplicate to show up, if there were one
    assert len(hook.received) == 1, hook.received
    delivery = hook.received[0]
    assert delivery["headers"][signing.IDEMPOTENCY_HEADER] == "batch-hooked:PARTIAL_FAILED:0"
    assert delivery["headers"][signing.EVENT_HEADER] == "batch.finished"
    payload = delivery["payload"]
    assert (payload["state"], payload["succeeded"], payload["failed"]) == ("PARTIAL_FAILED", 5, 1)
    assert payload["failed_items"][0]["index"] == 4
    stored = tenancy.stored_batch_id("acme", "hooked")  # the log is under the farm's id
    log = await delivering.read_log(client.blobs, f"batch-{stored}")
    assert [entry["outcome"] for entry in log] == ["delivered"]


@pytest.mark.chromium
async def test_a_receiver_that_never_answers_well_is_given_up_on_with_a_log(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    hooks = WebhookSettings(
        default_secret=SECRET,
        policy=netpolicy.NetworkPolicy(allow_private=True),
        max_attempts=2,
        backoff_s=1.0,
        poll_max_s=0.2,
    )
    async with (
        receiver(fail_first=1000) as hook,
        farm(storage, template_dir, webhooks=hooks) as gateway,
    ):
        body = {"template": "plain", "data": {"name": "x"}, "callback_url": hook.url}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth()
        ) as response:
            assert response.status == 200
            job_id = response.headers["X-Reportfarm-Job-Id"]
        await wait_for(lambda: client.events.poison_depth(), timeout=30)
    assert hook.calls == 2
    log = await delivering.read_log(client.blobs, job_id)
    assert [entry["outcome"] for entry in log] == ["failed", "gave_up"]
    assert await client.events.depth() == 0


async def test_a_callback_to_a_private_address_is_refused_unless_allowed(
    storage: StorageSettings,
) -> None:
    strict = WebhookSettings(default_secret=SECRET)
    settings = gateway_settings(storage, webhooks=strict, dispatcher=False)
    async with running_gateway(settings) as gateway:
        for url in ("http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "ftp://x.org/"):
            body = {"template": "plain", "data": {}, "callback_url": url, "wait_s": 0}
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=body, headers=auth()
            ) as response:
                assert response.status == 400, url
                assert "network policy" in (await response.json())["error"]


async def test_a_tenant_without_a_webhook_secret_cannot_ask_for_callbacks(
    storage: StorageSettings,
) -> None:
    hooks = WebhookSettings(
        secrets={"acme": "only-acme"}, policy=netpolicy.NetworkPolicy(allow_private=True)
    )
    settings = gateway_settings(storage, webhooks=hooks, dispatcher=False)
    async with running_gateway(settings) as gateway:
        body = {"template": "plain", "data": {}, "callback_url": "http://127.0.0.1:9/", "wait_s": 0}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth("globex")
        ) as response:
            assert response.status == 400
            assert "secret" in (await response.json())["error"]
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth("acme")
        ) as response:
            assert response.status == 202


async def _count(hook: Receiver, expected: int) -> bool:
    return len(hook.received) >= expected
