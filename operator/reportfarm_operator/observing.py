"""What the scaling loop sees: the queue's depth and each renderer's own load, and its one lever
inside a pod, the pool resize.

- The queue: ``JobQueue.depth()`` (Azure's approximate count: it includes in-flight messages),
  the connection string read from the ReportPool's Secret at each tick (a rotated key is picked
  up), or, for a ``queue.accountUrl`` pool, the operator's own DefaultAzureCredential (workload
  identity: the operator's service account needs a queue reader role on that account).
  Each lane (the bulk queue ``<queue>`` and ``<queue>-interactive``) is read on its own: a lane
  that does not exist yet reads as empty and is listed in ``missing_lanes`` (a sender creates only
  the lane it uses; the other lanes' work still counts). ``missing`` when no lane exists (a new
  pool waits for its first job). Any other failure is a reading with
  ``depth=None`` and a one-line reason (never Azure's XML body), never an exception: the policy
  then keeps the current size.
- The renderers: their ``/metrics`` (pool size, busy browsers, the ``pdf_generation`` histogram),
  over HTTP with a short timeout. A pod that does not answer (starting, a NetworkPolicy, a fake
  pod in tests) reads as the short reason why: the loop then runs blind (busy browsers unknown).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import typing
from collections.abc import Mapping

import aiohttp
from azure.core import exceptions as azure_errors
from azure.core.credentials_async import AsyncTokenCredential
from prometheus_client import parser

from reportfarm import capacity, contract, renderer_api
from reportfarm import settings as common
from reportfarm.storage import accounts
from reportfarm.storage.queueing import JobQueue
from reportfarm_operator import k8s, specs

logger = logging.getLogger(__name__)

_FORGET_PODS_AFTER_S = 600.0


@dataclasses.dataclass(frozen=True)
class QueueReading:
    depth: int | None
    """Approximate message count; None when the queue could not be read."""
    poison_depth: int | None = None
    error: str | None = None
    interactive_depth: int | None = None
    """The part of ``depth`` on the interactive lane (``<queue>-interactive``)."""
    missing_lanes: tuple[str, ...] = ()
    """The lanes' queues that do not exist yet (read as empty), by queue name."""
    lanes: int = 2
    """How many lanes were read."""

    @property
    def missing(self) -> bool:
        """No lane's queue exists yet (no job was ever sent): depth 0, not an outage."""
        return self.depth is not None and len(self.missing_lanes) >= self.lanes


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
    finish_cpu_seconds: float = 0.0
    """CPU seconds its finishing stages took since the previous reading."""
    lifetime_finish_cpu_seconds: float = 0.0
    jobs_ended: float = 0.0
    """Jobs it ended (any outcome) since the previous reading."""
    lifetime_jobs_ended: float = 0.0
    finishing: int = 0
    """Jobs in its finishing processes now: out of their browsers, still on its CPU."""
    signature_cpu_s: float = 0.0
    """CPU seconds its finishing processes' start-up signature took (0: unknown, or none)."""
    first_reading: bool = False
    """No previous reading of this pod: ``renders`` is its lifetime count, not the interval's."""
    oldest_s: float | None = None
    """Seconds its longest-running job has run (None: not said)."""


def busy(load: PodLoad) -> int:
    """Browsers a pod's jobs hold: those rendering and those finishing (out of their browsers,
    still on the pod's CPU), at most its pool's size (``capacity.busy_browsers``)."""
    return capacity.busy_browsers(size=load.size, busy=load.busy, finishing=load.finishing)


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


def signature_cpu_s(loads: Mapping[str, PodLoad | None]) -> float | None:
    """The renderers' start-up signature's CPU seconds, the most over the pods that answered
    (``Observation.signature_cpu_s``); None when none reports one (no key, or no finishing
    process up yet)."""
    return max((load.signature_cpu_s for load in loads.values() if load), default=0.0) or None


def finish_cpu_s(loads: Mapping[str, PodLoad | None]) -> float | None:
    """CPU seconds of a job's finishing stages, over every pod that answered, per job ended
    (``capacity.finish_cpu_s``: recent when ``capacity.JOB_CPU_MIN_JOBS`` ended since the last
    reading, else lifetime); before any job ended, their start-up signature's CPU while jobs are
    in their finishing processes, else None. The print's CPU is not measured: the policy takes
    the spec's ``browser.cpu`` for it."""
    answered = [load for load in loads.values() if load is not None]
    return capacity.finish_cpu_s(
        recent=(
            sum(load.finish_cpu_seconds for load in answered),
            sum(load.jobs_ended for load in answered),
        ),
        lifetime=(
            sum(load.lifetime_finish_cpu_seconds for load in answered),
            sum(load.lifetime_jobs_ended for load in answered),
        ),
        finishing=sum(load.finishing for load in answered),
        signature_cpu_s=max((load.signature_cpu_s for load in answered), default=0.0),
    )


class Reading(typing.NamedTuple):
    """What the operator reads from one renderer's /metrics."""

    size: int
    busy: int
    renders: float
    """Render count (lifetime)."""
    render_seconds: float
    oldest_s: float | None
    """Seconds its longest-running job has run (None: a renderer too old to say)."""
    finish_cpu_seconds: float = 0.0
    """CPU seconds of all its finishing stages (lifetime)."""
    jobs_ended: float = 0.0
    """Jobs it ended, any outcome (lifetime)."""
    finishing: int = 0
    """Jobs in its finishing processes now."""
    signature_cpu_s: float = 0.0
    """CPU seconds its finishing processes' start-up signature took (0: unknown, or none)."""


def parse_metrics(text: str) -> Reading:
    """Pool size, busy browsers, render count and seconds, the oldest job's age, the finishing
    stages' CPU, the jobs ended and those in finishing now, from a renderer's /metrics."""
    api = renderer_api
    values: dict[str, float] = {}
    finish_cpu = jobs_ended = 0.0
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{api.STAGE_CPU_METRIC}_total":
                finish_cpu += sample.value
            elif sample.name == f"{api.JOBS_METRIC}_total":
                jobs_ended += sample.value
            if sample.name in (
                api.POOL_SIZE_METRIC,
                api.POOL_BUSY_METRIC,
                api.OLDEST_JOB_METRIC,
                api.FINISHING_BUSY_METRIC,
                api.SIGNATURE_CPU_METRIC,
            ):
                values[sample.name] = sample.value
            elif sample.labels.get("stage") == api.RENDER_STAGE and sample.name in (
                f"{api.STAGE_SECONDS_METRIC}_count",
                f"{api.STAGE_SECONDS_METRIC}_sum",
            ):
                values[sample.name.rsplit("_", 1)[1]] = sample.value
    if api.POOL_SIZE_METRIC not in values or api.POOL_BUSY_METRIC not in values:
        raise ValueError(f"no {api.POOL_SIZE_METRIC} / {api.POOL_BUSY_METRIC} in /metrics")
    return Reading(
        size=int(values[api.POOL_SIZE_METRIC]),
        busy=int(values[api.POOL_BUSY_METRIC]),
        renders=values.get("count", 0.0),
        render_seconds=values.get("sum", 0.0),
        oldest_s=values.get(api.OLDEST_JOB_METRIC),
        finish_cpu_seconds=finish_cpu,
        jobs_ended=jobs_ended,
        finishing=int(values.get(api.FINISHING_BUSY_METRIC, 0.0)),
        signature_cpu_s=max(0.0, values.get(api.SIGNATURE_CPU_METRIC, 0.0)),
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
        port: int = renderer_api.PORT,
    ) -> None:
        self.kube = kube
        self.session = session
        self.queue_timeout = queue_timeout
        self.port = port
        self._credential: AsyncTokenCredential | None = None
        """DefaultAzureCredential for ``queue.accountUrl`` pools, made at the first one's read and
        kept (its tokens are cached across ticks); closed by :meth:`close`."""
        self._previous: dict[str, tuple[Reading, float]] = {}  # pod uid -> (reading, at)

    async def queue(self, namespace: str, queue: specs.QueueSpec) -> QueueReading:
        try:
            async with asyncio.timeout(self.queue_timeout):
                return await self._read_queue(namespace, queue)
        except TimeoutError:
            return QueueReading(
                depth=None, error=f"no answer within {self.queue_timeout:g} s (queue timeout)"
            )
        except Exception as error:  # any failure means "unknown depth", which the policy handles
            return QueueReading(depth=None, error=short_reason(error))

    async def close(self) -> None:
        if self._credential is not None:
            await self._credential.close()
            self._credential = None

    async def _read_queue(self, namespace: str, queue: specs.QueueSpec) -> QueueReading:
        if queue.connection_secret is None:
            if self._credential is None:
                self._credential = accounts.default_credential()
            storage = common.StorageSettings(
                connection_string=None, account_url=queue.account_url, blob_url=queue.blob_url
            )
        else:
            storage = common.StorageSettings(
                connection_string=await self.kube.secret_value(namespace, *queue.connection_secret)
            )
        async with accounts.opened(storage, credential=self._credential) as account:
            return await _read_depths(account, queue.name)

    async def admin_token(self, namespace: str, spec: specs.ReportPoolSpec) -> str | None:
        ref = spec.admin_token_secret
        return None if ref is None else await self.kube.secret_value(namespace, *ref)

    async def pod_loads(self, pods: Mapping[str, tuple[str, str]]) -> dict[str, PodLoad | str]:
        """Pod name -> its load, or why it did not answer. ``pods``: name -> (uid, IP)."""
        now = time.monotonic()
        names = list(pods)
        answers = await asyncio.gather(*(self._pod_load(*pods[name], now=now) for name in names))
        self._previous = {
            uid: seen
            for uid, seen in self._previous.items()
            if now - seen[1] < _FORGET_PODS_AFTER_S
        }
        return dict(zip(names, answers, strict=True))

    async def _pod_load(self, uid: str, ip: str, *, now: float) -> PodLoad | str:
        try:
            async with self.session.get(
                f"{_base_url(ip, self.port)}{renderer_api.METRICS_PATH}"
            ) as response:
                if response.status >= 300:
                    return f"/metrics answered HTTP {response.status}"
                reading = parse_metrics(await response.text())
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            logger.debug("renderer %s did not answer /metrics: %s", ip, error)
            return self.pod_reason(error)
        first = uid not in self._previous
        last = self._previous[uid][0] if not first else None
        if last is None or reading.renders < last.renders:  # new, or restarted: counters too
            last = Reading(size=0, busy=0, renders=0.0, render_seconds=0.0, oldest_s=None)
        self._previous[uid] = (reading, now)
        return PodLoad(
            size=reading.size,
            busy=reading.busy,
            renders=reading.renders - last.renders,
            render_seconds=reading.render_seconds - last.render_seconds,
            lifetime_renders=reading.renders,
            lifetime_render_seconds=reading.render_seconds,
            finish_cpu_seconds=max(0.0, reading.finish_cpu_seconds - last.finish_cpu_seconds),
            lifetime_finish_cpu_seconds=reading.finish_cpu_seconds,
            jobs_ended=max(0.0, reading.jobs_ended - last.jobs_ended),
            lifetime_jobs_ended=reading.jobs_ended,
            finishing=reading.finishing,
            signature_cpu_s=reading.signature_cpu_s,
            first_reading=first,
            oldest_s=reading.oldest_s,
        )

    async def resize(self, ip: str, size: int, *, token: str | None) -> str | None:
        """PUT /pool on one renderer; returns an error message, or None on success."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with self.session.put(
                f"{_base_url(ip, self.port)}{renderer_api.POOL_PATH}",
                json=renderer_api.pool_body(size),
                headers=headers,
            ) as response:
                if response.status >= 300:
                    return f"HTTP {response.status}: {(await response.text())[:200]}"
        except (aiohttp.ClientError, TimeoutError) as error:
            return self.pod_reason(error)
        return None

    def pod_reason(self, error: BaseException) -> str:
        """A few words for one pod's failure, the same for every pod that fails the same way
        (no address, no OS text): they are grouped in a message, one clause per reason."""
        if isinstance(error, TimeoutError):
            timeout = self.session.timeout.total
            return f"no answer within {timeout:g} s (pod timeout)" if timeout else "timed out"
        if isinstance(error, aiohttp.ClientConnectorError):
            return (
                "connection refused"
                if isinstance(error.os_error, ConnectionRefusedError)
                else "cannot connect"
            )
        if isinstance(error, aiohttp.ServerDisconnectedError):
            return "disconnected"
        return short_reason(error)


def short_reason(error: BaseException) -> str:
    """One line for a status message: the error's type and first line, never a response body.

    Azure's errors carry the service's XML and a new request id on every call: only the status
    code and the error code are kept, so the message stays the same while the fault does.
    """
    if isinstance(error, azure_errors.HttpResponseError):
        return f"HTTP {error.status_code} {error_code(error) or error.reason or ''}".strip()
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    first = text.strip().splitlines()[0] if text.strip() else ""
    name = type(error).__name__
    return (f"{name}: {first}" if first else name)[:200]


def error_code(error: BaseException) -> str | None:
    """Azure's own error code (``AuthenticationFailed``), not the SDK's enum member's name
    (``StorageErrorCode.AUTHENTICATION_FAILED``)."""
    code = getattr(error, "error_code", None)
    if code is None:
        return None
    return str(getattr(code, "value", code))


async def _read_depths(account: accounts.Account, name: str) -> QueueReading:
    """Each lane on its own: a lane whose queue does not exist holds nothing, and says so."""
    names = (name, contract.lane_queue_name(name, "interactive"))
    lanes = [await _read_lane(account, lane) for lane in names]
    return QueueReading(
        depth=sum(depth for depth, _ in filter(None, lanes)),
        poison_depth=sum(poison for _, poison in filter(None, lanes)),
        interactive_depth=lanes[1][0] if lanes[1] else 0,
        missing_lanes=tuple(lane for lane, read in zip(names, lanes, strict=True) if not read),
        lanes=len(names),
    )


async def _read_lane(account: accounts.Account, name: str) -> tuple[int, int] | None:
    """(depth, poison depth) of one lane; None when its queue does not exist yet."""
    async with JobQueue(account, name) as queue:
        try:
            depth = await queue.depth()
        except azure_errors.ResourceNotFoundError as error:
            if error_code(error) == "QueueNotFound":
                return None
            raise
        return depth, await queue.poison_depth()
