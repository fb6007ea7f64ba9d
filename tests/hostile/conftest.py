"""A renderer under attack: real Azurite, real Chromium, the real worker loop, one per module.

- :func:`farm`: an in-process renderer (``service.running``) on queues and a container of its
  own, with the client that feeds it; settings per module.
- :class:`Canary`: an aiohttp server on loopback that records every request it gets. Documents
  try to reach it; it must record none.
- :class:`Lab`: the "allowed public host" on 127.0.0.2 (the network guard's test hooks make that
  loopback address count as public), serving a page, an image, a slow image that keeps a page
  loading, and redirects to forbidden places.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import ipaddress
import json
import unicodedata
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pypdf
from aiohttp import web
from reportfarm_renderer import http, network, service
from reportfarm_renderer.settings import RendererSettings

from reportfarm import azurite, contract, netpolicy
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm.storage.queueing import JobQueue
from tests.harness import metrics

LAB_ADDRESS = "127.0.0.2"
"""The lab's "allowed public host": a loopback address the test guard treats as public."""
LOOPBACK_NAME = "loopback.test"
"""A host name the test resolver answers with 127.0.0.1 (as a hostile DNS record would)."""
METADATA = "169.254.169.254"


class Canary:
    """Records every HTTP request it receives, answering each with a page saying so."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.port = 0
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._hit)
        self._runner = web.AppRunner(app, access_log=None)

    async def _hit(self, request: web.Request) -> web.Response:
        self.hits.append(f"{request.method} {request.path_qs}")
        return web.Response(text="<p>CANARY-REACHED</p>", content_type="text/html")

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = _port(self._runner)

    async def close(self) -> None:
        await self._runner.cleanup()

    def url(self, path: str = "", *, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


class Lab:
    """The allowed host: pages, images, and redirects from here to forbidden places."""

    def __init__(self, canary: Canary) -> None:
        self.canary = canary
        self.hits: list[str] = []
        self.port = 0
        app = web.Application()
        app.router.add_get("/page", self._page)
        app.router.add_get("/img.gif", self._image)
        app.router.add_get("/slow", self._slow)
        app.router.add_get("/to/{where}", self._redirect)
        self._runner = web.AppRunner(app, access_log=None)

    async def _page(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        return web.Response(text="<p>ALLOWED-PAGE</p>", content_type="text/html")

    async def _image(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        return web.Response(body=_GIF, content_type="image/gif")

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("s", "0.8")))
        return web.Response(body=_GIF, content_type="image/gif")

    async def _redirect(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        port = self.canary.port
        targets = {
            "canary": f"http://127.0.0.1:{port}/redirected",
            "localhost": f"http://localhost:{port}/redirected",
            "loopback-name": f"http://{LOOPBACK_NAME}:{port}/redirected",
            "metadata": f"http://{METADATA}/latest/meta-data/",
            "file": "file:///etc/passwd",
        }
        raise web.HTTPFound(targets[request.match_info["where"]])

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, LAB_ADDRESS, 0)
        await site.start()
        self.port = _port(self._runner)

    async def close(self) -> None:
        await self._runner.cleanup()

    def url(self, path: str) -> str:
        return f"http://{LAB_ADDRESS}:{self.port}{path}"


_GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,"
    b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)


def _port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the server has no TCP address")


async def lab_resolver(host: str, port: int) -> list[netpolicy.IPAddress]:
    """Real DNS, except one name that answers with loopback (a hostile DNS record)."""
    if host == LOOPBACK_NAME:
        return [ipaddress.ip_address("127.0.0.1")]
    return await netpolicy.resolve_host(host, port)


_NetworkGuard = network.NetworkGuard


def lab_guard(**kwargs: Any) -> network.NetworkGuard:
    """The production guard, with two test hooks: the lab's 127.0.0.2 counts as public, and
    ``loopback.test`` resolves to 127.0.0.1. Everything else is decided as in production.
    (Installed as ``network.NetworkGuard`` while a renderer starts: see test_hostile_jobs.)"""
    policy = dataclasses.replace(
        kwargs.pop("policy"),
        allowed_networks=netpolicy.parse_networks([LAB_ADDRESS]),
        resolver=lab_resolver,
    )
    return _NetworkGuard(policy=policy, **kwargs)


@dataclasses.dataclass
class Farm:
    renderer: service.Renderer
    client: ReportFarmClient

    @property
    def queue(self) -> JobQueue:
        return self.client.queue

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        registry = self.renderer.parts.metrics.registry
        return registry.get_sample_value(name, dict(labels or {})) or 0.0

    def blocked(self) -> dict[str, float]:
        """reportfarm_blocked_requests_total by reason."""
        registry = self.renderer.parts.metrics.registry
        return metrics.by_label(registry, "reportfarm_blocked_requests", "reason")

    def worker_task(self) -> asyncio.Task[Any]:
        (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "queue-worker"]
        return task

    async def poison(self) -> list[dict[str, Any]]:
        """Every message of the poison queue (peek sees 32 at most: tests stay below)."""
        return [json.loads(text) for text in await self.queue.peek_poison()]

    async def wait_poison(self, count: int, *, timeout: float = 60.0) -> list[dict[str, Any]]:
        await wait_for(lambda: _at_least(self.queue, count), timeout=timeout)
        return await self.poison()

    async def poison_reason(self, job_id: str, *, timeout: float = 60.0) -> str:
        """The reason the poison queue holds for a job (waiting for it to arrive)."""

        async def found() -> str | None:
            return poison_reasons(await self.poison()).get(job_id)

        return str(await wait_for(found, timeout=timeout))

    async def serving(self) -> dict[str, int]:
        """After a bad job: a good one still renders; the pool is whole and nobody is stuck."""
        job_id = await self.client.submit(
            Submission(template="plain", data={"name": f"still serving {uuid.uuid4().hex[:6]}"})
        )
        record = (await self.client.wait([job_id], timeout_s=90))[job_id]
        assert record is not None and record.state == "succeeded", record
        pool = self.renderer.pool

        async def whole() -> bool:
            return pool.live == pool.size and pool.busy == 0

        await wait_for(whole, timeout=60)
        assert not self.worker_task().done(), "the queue worker's task ended"
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.renderer.port}/readyz") as response,
        ):
            assert response.status == 200, await response.text()
        return http.pool_state(self.renderer.parts)


async def _at_least(queue: JobQueue, count: int) -> bool:
    return await queue.poison_depth() >= count


async def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 60.0, every: float = 0.2
) -> Any:
    """Poll an async predicate until it returns something truthy (a bounded deadline)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(every)


def write_templates(folder: Path, sources: Mapping[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        (folder / name).write_text(source, encoding="utf-8")
    return folder


@contextlib.asynccontextmanager
async def farm(
    server: azurite.Azurite, templates: Path, **overrides: object
) -> AsyncIterator[Farm]:
    """A renderer and its client on fresh queues; ``overrides`` go to the renderer's settings."""
    suffix = uuid.uuid4().hex[:10]
    storage = StorageSettings(
        connection_string=server.connection_string, queue=f"h{suffix}", container=f"h{suffix}"
    )
    values: dict[str, object] = {
        "templates": templates,
        "pool_size": 1,
        "port": 0,
        "storage": storage,
        "visibility_timeout": 30,
        "poll_max_s": 0.2,
        "drain_timeout": 5.0,
        "render_timeout": 20.0,
        "max_dequeue_count": 2,
    }
    values.update(overrides)
    settings = RendererSettings.from_env({}, **values)
    assert storage.connection_string
    async with ReportFarmClient(
        storage.connection_string, queue=storage.queue, container=storage.container
    ) as client:
        await client.ensure()
        async with service.running(settings) as renderer:
            yield Farm(renderer, client)


def pdf_text(data: bytes) -> str:
    assert data.startswith(b"%PDF")
    reader = pypdf.PdfReader(io.BytesIO(data))
    text = "".join(page.extract_text() or "" for page in reader.pages)
    return unicodedata.normalize("NFKC", text)


def poison_reasons(poison: list[dict[str, Any]]) -> dict[str | None, str]:
    return {item["job_id"]: item["reason"] for item in poison}


def record_of(results: Mapping[str, contract.ResultRecord | None], job_id: str) -> Any:
    record = results[job_id]
    assert record is not None, f"no result record for {job_id}"
    return record
