"""The observer against the renderer's real HTTP surface and a real Azurite queue.

The renderer app is ``reportfarm_renderer.http.create_app`` (the very handlers a pod serves), with
a stand-in browser pool: the operator-renderer contract (/metrics names, PUT /pool, the bearer
token) is tested end to end without launching Chromium.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reportfarm_operator import observing, specs
from reportfarm_renderer import http
from reportfarm_renderer.metrics import RendererMetrics

from reportfarm import azurite, capacity, contract
from reportfarm.storage.queueing import JobQueue


@dataclasses.dataclass
class StandInPool:
    size: int = 2
    busy: int = 1

    @property
    def live(self) -> int:
        return self.size

    @property
    def idle(self) -> int:
        return self.size - self.busy

    async def resize(self, size: int) -> None:
        self.size = size


@dataclasses.dataclass
class Renderer:
    port: int
    pool: StandInPool
    metrics: RendererMetrics


async def serve(parts: http.Parts) -> AsyncIterator[int]:
    runner = web.AppRunner(http.create_app(parts))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


@pytest.fixture
async def renderer() -> AsyncIterator[Renderer]:
    pool, metrics = StandInPool(), RendererMetrics()
    parts = http.Parts(metrics=metrics, admin_token="s3cret", pool=pool)  # type: ignore[arg-type]
    async for port in serve(parts):
        yield Renderer(port, pool, metrics)


class SecretsOnly:
    """The observer's only Kubernetes need here: a Secret's value."""

    def __init__(self, values: Mapping[tuple[str, str, str], str]) -> None:
        self.values = dict(values)

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        return self.values[(namespace, name, key)]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as client:
        yield client


def observer(session: aiohttp.ClientSession, *, port: int, kube: Any = None) -> observing.Observer:
    return observing.Observer(kube=kube, session=session, queue_timeout=2, port=port)


def render(metrics: RendererMetrics, *seconds: float) -> None:
    for value in seconds:
        metrics.stage_seconds.labels(stage="pdf_generation").observe(value)


async def test_pod_loads_come_from_the_renderers_metrics(
    renderer: Renderer, session: aiohttp.ClientSession
) -> None:
    watcher = observer(session, port=renderer.port)
    render(renderer.metrics, 0.2, 0.4)
    renderer.metrics.oldest_job.set(12.5)
    first = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert first["pod-a"] == observing.PodLoad(
        size=2,
        busy=1,
        renders=2,
        render_seconds=pytest.approx(0.6),
        lifetime_renders=2,
        lifetime_render_seconds=pytest.approx(0.6),
        first_reading=True,
        oldest_s=12.5,
    )
    render(renderer.metrics, 1.0)
    second = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert isinstance(load := second["pod-a"], observing.PodLoad)
    assert (load.renders, load.first_reading) == (1, False)
    assert observing.mean_render_s(second) == pytest.approx(1.0)  # the last interval only
    quiet = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert observing.mean_render_s(quiet) == pytest.approx(1.6 / 3)  # no new renders: lifetime


def end_jobs(metrics: RendererMetrics, count: int, *, outcome: str = "succeeded") -> None:
    metrics.jobs.labels(outcome=outcome, template="invoice").inc(count)


async def test_the_finishing_stages_cpu_reaches_the_observation(
    renderer: Renderer, session: aiohttp.ClientSession
) -> None:
    """The renderer's ``reportfarm_stage_cpu_seconds`` (every finish_* stage) per job ended: over
    the last interval when enough jobs ended in it, else over the pod's life; unknown (not 0)
    while renders have ended but no job yet, as in a signing farm's first seconds."""
    watcher = observer(session, port=renderer.port)
    enough = capacity.JOB_CPU_MIN_JOBS
    render(renderer.metrics, *[0.05] * enough)  # printed, still finishing: no job ended yet
    started = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert observing.finish_cpu_s(started) is None
    # The finishing processes' start-up signature: taken while jobs are in finishing, none ended
    renderer.metrics.signature_cpu.set(0.3)
    signing = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert isinstance(load := signing["pod-a"], observing.PodLoad)
    assert load.signature_cpu_s == pytest.approx(0.3)
    assert observing.finish_cpu_s(signing) is None  # no job in finishing: it may not sign
    renderer.metrics.finishing_busy.inc(2)
    finishing = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert observing.finish_cpu_s(finishing) == pytest.approx(0.3)
    renderer.metrics.finishing_busy.dec(2)
    for stage, cpu in (("finish_pdfa", 1.0), ("finish_sign", 3.0), ("finish_facturx", 2.0)):
        renderer.metrics.stage_cpu.labels(stage=stage).inc(cpu)
    end_jobs(renderer.metrics, enough - 2)
    end_jobs(renderer.metrics, 2, outcome="retried")  # any outcome ends a job's finishing
    first = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert isinstance(load := first["pod-a"], observing.PodLoad)
    assert (load.finish_cpu_seconds, load.jobs_ended) == (pytest.approx(6.0), enough)
    assert observing.finish_cpu_s(first) == pytest.approx(6.0 / enough)
    render(renderer.metrics, *[1.0] * (2 * enough))  # more renders than jobs: not the measure
    renderer.metrics.stage_cpu.labels(stage="finish_sign").inc(enough * 0.4)
    end_jobs(renderer.metrics, enough)
    second = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert observing.finish_cpu_s(second) == pytest.approx(0.4)  # the recent interval
    renderer.metrics.stage_cpu.labels(stage="finish_sign").inc(5.0)  # a few: the lifetime's
    end_jobs(renderer.metrics, 1)
    few = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    lifetime = (6.0 + enough * 0.4 + 5.0) / (2 * enough + 1)
    assert observing.finish_cpu_s(few) == pytest.approx(lifetime)
    assert observing.finish_cpu_s({}) is None  # nothing read: unknown


async def test_a_job_in_finishing_holds_its_pod_busy(
    renderer: Renderer, session: aiohttp.ClientSession
) -> None:
    """A job in a finishing process has left its browser but takes the pod's CPU: the pod reads
    busy by it, up to its pool's size."""
    watcher = observer(session, port=renderer.port)
    renderer.pool.size, renderer.pool.busy = 2, 0
    renderer.metrics.finishing_busy.set(1)
    loads = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert isinstance(load := loads["pod-a"], observing.PodLoad)
    assert (load.busy, load.finishing, observing.busy(load)) == (0, 1, 1)
    renderer.metrics.finishing_busy.set(4)
    loads = await watcher.pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    assert isinstance(load := loads["pod-a"], observing.PodLoad)
    assert observing.busy(load) == 2  # at most the pool's size
    assert observing.busy(dataclasses.replace(load, size=1, busy=3)) == 3  # busy as said


async def test_a_renderer_that_does_not_answer_reads_as_the_reason_why(
    session: aiohttp.ClientSession,
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    loads = await observer(session, port=port).pod_loads({"pod-a": ("uid-a", "127.0.0.1")})
    reason = loads["pod-a"]
    assert isinstance(reason, str)
    assert reason == "connection refused", reason  # a few words, no address: pods group by it
    assert "\n" not in reason


async def test_resize_reaches_the_pool_with_the_token(
    renderer: Renderer, session: aiohttp.ClientSession
) -> None:
    watcher = observer(session, port=renderer.port)
    assert await watcher.resize("127.0.0.1", 4, token="s3cret") is None
    assert renderer.pool.size == 4
    refused = await watcher.resize("127.0.0.1", 1, token="wrong")
    assert refused is not None and refused.startswith("HTTP 401")
    assert renderer.pool.size == 4


def test_a_renderer_too_old_to_say_its_oldest_job_reads_as_none() -> None:
    text = "reportfarm_pool_size 2\nreportfarm_pool_busy 1\n"
    assert observing.parse_metrics(text).oldest_s is None
    assert (
        observing.parse_metrics(f"{text}reportfarm_job_oldest_running_seconds 3.5\n").oldest_s
        == 3.5
    )


def test_metrics_without_pool_gauges_are_rejected() -> None:
    with pytest.raises(ValueError, match="reportfarm_pool_size"):
        observing.parse_metrics("# nothing here\n")


@pytest.mark.azurite
def queue_of(spec: dict[str, Any]) -> specs.QueueSpec:
    """The queue part of a parsed spec (these tests give only the queue)."""
    return specs.QueueSpec(
        name=spec["queue"]["name"],
        connection_secret=specs.secret_ref(spec, "connectionSecretRef"),
        account_url=None,
        blob_url=None,
    )


async def test_queue_depth_is_read_with_the_secret(
    azurite_server: azurite.Azurite, session: aiohttp.ClientSession
) -> None:
    name = f"q{uuid.uuid4().hex[:10]}"
    async with JobQueue(azurite_server.connection_string, name) as queue:
        await queue.ensure()
        for index in range(3):
            await queue.send(f"job {index}")
    kube = SecretsOnly({("ns", "storage", "connection-string"): azurite_server.connection_string})
    spec = {"queue": {"name": name, "connectionSecretRef": {"name": "storage"}}}
    reading = await observer(session, port=1, kube=kube).queue("ns", queue_of(spec))
    # No interactive lane yet (no gateway ever sent to it): it holds nothing.
    lane = contract.lane_queue_name(name, "interactive")
    assert reading == observing.QueueReading(
        depth=3, poison_depth=0, interactive_depth=0, missing_lanes=(lane,)
    )
    assert not reading.missing
    async with JobQueue(azurite_server.connection_string, lane) as interactive:
        await interactive.ensure()
        await interactive.send("urgent")
    reading = await observer(session, port=1, kube=kube).queue("ns", queue_of(spec))
    assert reading == observing.QueueReading(depth=4, poison_depth=0, interactive_depth=1)


@pytest.mark.parametrize(
    "secrets",
    [
        pytest.param({}, id="secret missing"),
        pytest.param(
            {("ns", "storage", "connection-string"): azurite.connection_string(1, 1)},
            id="queue unreachable",
        ),
    ],
)
async def test_an_unreadable_queue_is_a_reading_not_an_exception(
    session: aiohttp.ClientSession, secrets: dict[tuple[str, str, str], str]
) -> None:
    spec = {"queue": {"name": "jobs", "connectionSecretRef": {"name": "storage"}}}
    reading = await observer(session, port=1, kube=SecretsOnly(secrets)).queue("ns", queue_of(spec))
    assert reading.depth is None
    assert reading.error
    assert "\n" not in reading.error and "<?xml" not in reading.error
    assert len(reading.error) <= 200


@pytest.mark.azurite
async def test_a_queue_not_created_yet_is_empty_not_an_outage(
    azurite_server: azurite.Azurite, session: aiohttp.ClientSession
) -> None:
    kube = SecretsOnly({("ns", "storage", "connection-string"): azurite_server.connection_string})
    spec = {
        "queue": {"name": f"q{uuid.uuid4().hex[:10]}", "connectionSecretRef": {"name": "storage"}}
    }
    reading = await observer(session, port=1, kube=kube).queue("ns", queue_of(spec))
    assert reading.depth == 0 and reading.interactive_depth == 0
    assert reading.missing and len(reading.missing_lanes) == 2


@pytest.mark.azurite
async def test_each_lane_is_read_on_its_own_an_interactive_only_queue_has_work(
    azurite_server: azurite.Azurite, session: aiohttp.ClientSession
) -> None:
    """A sender that creates only the interactive lane: the bulk queue's absence is a fact
    about that lane, the interactive jobs still count."""
    name = f"q{uuid.uuid4().hex[:10]}"
    lane = contract.lane_queue_name(name, "interactive")
    async with JobQueue(azurite_server.connection_string, lane) as interactive:
        await interactive.ensure()
        for index in range(10):
            await interactive.send(f"urgent {index}")
    kube = SecretsOnly({("ns", "storage", "connection-string"): azurite_server.connection_string})
    spec = {"queue": {"name": name, "connectionSecretRef": {"name": "storage"}}}
    reading = await observer(session, port=1, kube=kube).queue("ns", queue_of(spec))
    assert reading == observing.QueueReading(
        depth=10, poison_depth=0, interactive_depth=10, missing_lanes=(name,)
    )
    assert not reading.missing and reading.error is None


@pytest.mark.azurite
async def test_an_http_error_reads_as_its_status_and_code_not_the_xml(
    azurite_server: azurite.Azurite,
) -> None:
    from azure.core import exceptions as azure_errors

    wrong = azurite_server.connection_string.replace("AccountKey=", "AccountKey=AAAA")
    async with JobQueue(wrong, "jobs") as queue:
        with pytest.raises(azure_errors.HttpResponseError) as caught:
            await queue.depth()
    reason = observing.short_reason(caught.value)
    assert reason == "HTTP 403 AuthenticationFailed", reason  # Azure's code, not the enum's name
    assert "<" not in reason and "RequestId" not in reason
