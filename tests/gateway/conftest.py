"""Fixtures for the gateway: the real aiohttp app on a loopback port, real Azurite, and (for the
tests that render) a real renderer with Chromium, all in this process."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from aiohttp import web
from reportfarm_gateway import app as gateway_app
from reportfarm_gateway import protocol
from reportfarm_gateway.settings import GatewaySettings
from reportfarm_gateway.webhooks.settings import WebhookSettings
from reportfarm_renderer import service

from reportfarm import netpolicy
from reportfarm.settings import StorageSettings

from ..renderer.conftest import (  # noqa: F401
    client,
    renderer_settings,
    storage,
    template_dir,
    worker_process,
)

TOKENS = {"acme": "acme-token", "globex": "globex-token"}
SECRET = "whsec-test"


def auth(tenant: str = "acme") -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[tenant]}"}


def gateway_settings(store: StorageSettings, **overrides: object) -> GatewaySettings:
    values: dict[str, object] = {
        "storage": store,
        "tokens": TOKENS,
        "port": 0,
        "rate_per_s": 1000.0,
        "burst": 1000,
        "in_flight": 64,
        "poll_s": 0.05,
        "webhooks": WebhookSettings(
            default_secret=SECRET,
            policy=netpolicy.NetworkPolicy(allow_private=True),
            backoff_s=1.0,
            poll_max_s=0.2,
        ),
    }
    values.update(overrides)
    return GatewaySettings(**values)  # type: ignore[arg-type]


@dataclasses.dataclass
class Gateway:
    url: str
    app: web.Application
    http: aiohttp.ClientSession

    def at(self, path: str) -> str:
        return f"{self.url}{path}"


def free_port() -> int:
    """A loopback port nothing listens on now (a gateway that must know its own port before it
    starts: the done hints name it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def gateway_on_port(
    store: StorageSettings, *, port: int, **overrides: object
) -> AsyncIterator[Gateway]:
    """A gateway on ``port`` (:func:`gateway_settings` with ``overrides``)."""
    application = gateway_app.create_app(gateway_settings(store, port=port, **overrides))
    runner = protocol.AppRunner(application, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host="127.0.0.1", port=port).start()
    try:
        async with aiohttp.ClientSession() as http:
            yield Gateway(f"http://127.0.0.1:{port}", application, http)
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def hinting_gateway(
    store: StorageSettings, *, renderer_port: int, handoff_s: int, poll_s: float | None = None
) -> AsyncIterator[Gateway]:
    """A gateway on a free port that wakes the renderer at ``renderer_port`` (and hands it its
    synchronous reports, ``handoff_s`` > 0) and is told when they are done; ``poll_s``: its
    polling, hinted or not (None: the defaults)."""
    port = free_port()
    polls = {} if poll_s is None else {"poll_s": poll_s, "hinted_poll_s": poll_s}
    async with gateway_on_port(
        store,
        port=port,
        wake=(f"localhost:{renderer_port}",),
        notify_address=f"127.0.0.1:{port}",
        handoff_s=handoff_s,
        **polls,
    ) as gateway:
        yield gateway


@contextlib.asynccontextmanager
async def running_gateway(settings: GatewaySettings) -> AsyncIterator[Gateway]:
    application = gateway_app.create_app(settings)
    runner = protocol.AppRunner(application, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host="127.0.0.1", port=0)
    await site.start()
    port = next(address[1] for address in runner.addresses if isinstance(address, tuple))
    try:
        async with aiohttp.ClientSession() as http:
            yield Gateway(f"http://127.0.0.1:{port}", application, http)
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def farm(
    store: StorageSettings,
    templates: Path,
    *,
    renderer: dict[str, object] | None = None,
    **gateway: object,
) -> AsyncIterator[Gateway]:
    """A renderer (pool of 2) and a gateway on the same storage."""
    async with service.running(renderer_settings(store, templates, **(renderer or {}))):
        async with running_gateway(gateway_settings(store, **gateway)) as front:
            yield front
