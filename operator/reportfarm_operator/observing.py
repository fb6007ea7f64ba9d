"""What the scaling loop sees: the queue's depth and each renderer's own load, and its one lever
inside a pod, the pool resize.

- The queue: ``JobQueue.depth()`` (Azure's approximate count: it includes in-flight messages),
  the connection string read from the ReportPool's Secret at each tick (a rotated key is picked
  up). Any failure is a reading with ``depth=None``, never an exception: the policy then keeps the
  current size.
- The renderers: their ``/metrics`` (pool size, busy browsers, the ``pdf_generation`` histogram),
  over HTTP with a short timeout. A pod that does not answer (starting, or a fake pod in tests)
  reads as ``None``: the loop falls back to the queue depth alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from azure.core import exceptions as azure_errors
from prometheus_client import parser

from reportfarm import contract
from reportfarm.storage.queueing import JobQueue
from reportfarm_operator import k8s, specs

logger = logging.getLogger(__name__)

RENDER_STAGE = "pdf_generation"
_FORGET_PODS_AFTER_S = 600.0


@dataclasses.dataclass(frozen=True)
class QueueReading:
    depth: int | None
    """Approximate message count; None when the queue could not be read."""
    poison_depth: int | None = None
    error: str | None = None
    interactive_depth: int | None = None
    """The part of ``depth`` on the interactive lane (``<queue>-interactive``)."""


@dataclasses.dataclass(frozen=True)
class PodLoad:
    """One renderer's answer."""

    size: int
    """Browsers its pool is asked to hold."""
    busy: int
    """Browsers rendering now."""
    renders: float = 0.0
    """PDFs rendered since the previous reading (all of them at the first reading)."""
    render_seconds: float = 0.0
    """Their total render time."""
    lifetime_renders: float = 0.0
    lifetime_render_seconds: float = 0.0


def mean_render_s(loads: Mapping[str, PodLoad | None]) -> float | None:
    """The recent mean render time over every pod that answered; else their lifetime mean."""
    answered = [load for load in loads.values() if load is not None]
    for count, seconds in (
        ("renders", "render_seconds"),
        ("lifetime_renders", "lifetime_render_seconds"),
    ):
        total = sum(getattr(load, count) for load in answered)
        if total > 0:
            return float(sum(getattr(load, seconds) for load in answered) / total)
    return None


def parse_metrics(text: str) -> tuple[int, int, float, float]:
    """(pool size, busy browsers, render count, render seconds) from a renderer's /metrics."""
    values: dict[str, float] = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("reportfarm_pool_size", "reportfarm_pool_busy"):
                values[sample.name] = sample.value
            elif sample.labels.get("stage") == RENDER_STAGE and sample.name in (
                "reportfarm_stage_duration_seconds_count",
                "reportfarm_stage_duration_seconds_sum",
            ):
                values[sample.name.rsplit("_", 1)[1]] = sample.value
    if "reportfarm_pool_size" not in values or "reportfarm_pool_busy" not in values:
        raise ValueError("no reportfarm_pool_size / reportfarm_pool_busy in /metrics")
    return (
        int(values["reportfarm_pool_size"]),
        int(values["reportfarm_pool_busy"]),
        values.get("count", 0.0),
        values.get("sum", 0.0),
    )


def _base_url(ip: str, port: int) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}"


class Observer:
    """Reads queues and renderers; resizes renderers' pools."""

    def __init__(
        self,
        *,
        kube: k8s.Kube,
        session: aiohttp.ClientSession,
        queue_timeout: float,
        port: int = specs.RENDERER_PORT,
    ) -> None:
        self.kube = kube
        self.session = session
        self.queue_timeout = queue_timeout
        self.port = port
        self._previous: dict[str, tuple[float, float, float]] = {}  # pod uid -> (count, sum, at)

    async def queue(self, namespace: str, spec: Mapping[str, Any]) -> QueueReading:
        try:
            async with asyncio.timeout(self.queue_timeout):
                return await self._read_queue(namespace, spec)
        except Exception as error:  # any failure means "unknown depth", which the policy handles
            message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            logger.warning("queue of %s unreadable: %s", namespace, message)
            return QueueReading(depth=None, error=message)

    async def _read_queue(self, namespace: str, spec: Mapping[str, Any]) -> QueueReading:
        name = str(spec["queue"]["name"])
        ref = specs.secret_ref(spec, "connectionSecretRef")
        if ref is None:
            return await _read_queue_with_identity(str(spec["queue"]["accountUrl"]), name)
        connection = await self.kube.secret_value(namespace, *ref)
        interactive_name = contract.lane_queue_name(name, "interactive")
        async with (
            JobQueue(connection, name) as queue,
            JobQueue(connection, interactive_name) as interactive,
        ):
            depth = await queue.depth()
            poison = await queue.poison_depth()
            fast = await _depth_or_zero(interactive)
            poison += await interactive.poison_depth()
        return QueueReading(depth=depth + fast, poison_depth=poison, interactive_depth=fast)

    async def admin_token(self, namespace: str, spec: Mapping[str, Any]) -> str | None:
        ref = specs.secret_ref(spec, "adminTokenSecretRef")
        return None if ref is None else await self.kube.secret_value(namespace, *ref)

    async def pod_loads(self, pods: Mapping[str, tuple[str, str]]) -> dict[str, PodLoad | None]:
        """Pod name -> its load, or None if it did not answer. ``pods``: name -> (uid, IP)."""
        now = time.monotonic()
        names = list(pods)
        answers = await asyncio.gather(*(self._pod_load(*pods[name], now=now) for name in names))
        self._previous = {
            uid: seen
            for uid, seen in self._previous.items()
            if now - seen[2] < _FORGET_PODS_AFTER_S
        }
        return dict(zip(names, answers, strict=True))

    async def _pod_load(self, uid: str, ip: str, *, now: float) -> PodLoad | None:
        try:
            async with self.session.get(f"{_base_url(ip, self.port)}/metrics") as response:
                response.raise_for_status()
                size, busy, count, seconds = parse_metrics(await response.text())
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            logger.debug("renderer %s did not answer /metrics: %s", ip, error)
            return None
        last_count, last_seconds, _ = self._previous.get(uid, (0.0, 0.0, now))
        if count < last_count:  # the renderer restarted: its counters too
            last_count, last_seconds = 0.0, 0.0
        self._previous[uid] = (count, seconds, now)
        return PodLoad(
            size=size,
            busy=busy,
            renders=count - last_count,
            render_seconds=seconds - last_seconds,
            lifetime_renders=count,
            lifetime_render_seconds=seconds,
        )

    async def resize(self, ip: str, size: int, *, token: str | None) -> str | None:
        """PUT /pool on one renderer; returns an error message, or None on success."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with self.session.put(
                f"{_base_url(ip, self.port)}/pool", json={"size": size}, headers=headers
            ) as response:
                if response.status >= 300:
                    return f"HTTP {response.status}: {(await response.text())[:200]}"
        except (aiohttp.ClientError, TimeoutError) as error:
            return f"{type(error).__name__}: {error}"
        return None


async def _read_queue_with_identity(account_url: str, name: str) -> QueueReading:
    """Workload identity: Azure's DefaultAzureCredential (needs the azure-identity package)."""
    try:
        from azure.identity.aio import DefaultAzureCredential
    except ImportError:
        return QueueReading(
            depth=None, error="queue.accountUrl needs the azure-identity package in the operator"
        )
    from azure.storage.queue.aio import QueueClient

    async with (
        DefaultAzureCredential() as credential,
        QueueClient(account_url, name, credential=credential) as client,
    ):
        properties = await client.get_queue_properties()
    return QueueReading(depth=int(properties.approximate_message_count or 0))


async def _depth_or_zero(queue: JobQueue) -> int:
    """A lane that was never created (a farm without a gateway) holds nothing."""
    try:
        return await queue.depth()
    except azure_errors.ResourceNotFoundError:
        return 0
