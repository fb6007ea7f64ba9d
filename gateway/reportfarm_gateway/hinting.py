"""Hints that shorten a synchronous report's wait; the queue and the result record stay the truth.

- Wake: once a job is on the interactive lane, the gateway POSTs the renderers' wake path
  (``renderer_api.WAKE_PATH``) at up to ``wake_fanout`` addresses picked at random among those
  ``REPORTFARM_GATEWAY_WAKE`` resolves to (in the chart: the pool's headless Service, one address
  per ready renderer). An idle renderer then receives at once, not at the end of its idle pause
  (up to ``REPORTFARM_POLL_MAX_S``, 1 s).
- Done: the job names this replica (``contract.Job.notify``); the renderer that stored its record
  POSTs ``contract.DONE_PATH`` here, and the waiting request reads the record at once, not at its
  next poll (:class:`Waiters`).

Both are sent without waiting for them, with a short timeout. A lost, late or forged hint costs
what it would have saved (the idle pause, the polling interval) or one more read: no job depends
on one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import socket
import time
from collections.abc import Iterator

import aiohttp
from aiohttp import web
from prometheus_client import Counter

from reportfarm import contract, renderer_api
from reportfarm import settings as common
from reportfarm_gateway.context import METRICS

logger = logging.getLogger(__name__)

HINT_TIMEOUT_S = 1.0
"""A wake that takes longer than this is dropped (the renderer's polling finds the job)."""
RESOLVE_EVERY_S = 5.0
"""How long resolved renderer addresses are reused (renderers come and go with scaling)."""


class Waiters:
    """The jobs this replica's requests wait for, each with the events its waiters watch, and
    ``address``: where renderers reach this replica (None: no done hints)."""

    def __init__(self, *, address: str | None = None) -> None:
        self.address = None if address is None else notify_address(address)
        self._events: dict[str, set[asyncio.Event]] = collections.defaultdict(set)

    @contextlib.contextmanager
    def waiting(self, job_id: str) -> Iterator[asyncio.Event]:
        event = asyncio.Event()
        self._events[job_id].add(event)
        try:
            yield event
        finally:
            events = self._events.get(job_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._events[job_id]

    def done(self, job_id: str) -> int:
        """Wake the requests waiting for ``job_id``; how many there were."""
        events = self._events.get(job_id, set())
        for event in events:
            event.set()
        return len(events)

    def __len__(self) -> int:
        return len(self._events)


class Waker:
    """Pokes renderers when a job they could take is on the lane."""

    def __init__(
        self, *, targets: tuple[str, ...], fanout: int, counter: Counter | None = None
    ) -> None:
        self.targets = [_host_port(target) for target in targets]
        self.fanout = fanout
        self.counter = counter
        """``reportfarm_gateway_hints``, labelled kind and outcome."""
        self.sent = 0
        self.failed = 0
        self._session: aiohttp.ClientSession | None = None
        self._addresses: list[tuple[str, int]] = []
        self._resolved_at = -RESOLVE_EVERY_S
        self._tasks: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Send the wake without waiting for it."""
        if not self.targets:
            return
        task = asyncio.create_task(self._wake(), name="wake-renderers")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    async def _wake(self) -> None:
        addresses = await self._resolve()
        chosen = random.sample(addresses, min(self.fanout, len(addresses)))
        await asyncio.gather(*(self._post(host, port) for host, port in chosen))

    async def _post(self, host: str, port: int) -> None:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=HINT_TIMEOUT_S)
            self._session = aiohttp.ClientSession(timeout=timeout)
        shown = f"[{host}]" if ":" in host else host
        try:
            async with self._session.post(f"http://{shown}:{port}{renderer_api.WAKE_PATH}"):
                self.sent += 1
                outcome = "sent"
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            self.failed += 1
            outcome = "failed"
            logger.debug("wake of renderer %s:%d failed: %s", host, port, error)
        if self.counter is not None:
            self.counter.labels(kind="wake", outcome=outcome).inc()

    async def _resolve(self) -> list[tuple[str, int]]:
        now = time.monotonic()
        if now - self._resolved_at < RESOLVE_EVERY_S:
            return self._addresses
        self._resolved_at = now
        loop = asyncio.get_running_loop()
        found: dict[tuple[str, int], None] = {}
        for host, port in self.targets:
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as error:
                logger.debug("renderers at %s not resolved: %s", host, error)
                continue
            for info in infos:
                found[(str(info[4][0]), port)] = None
        self._addresses = list(found)
        return self._addresses


def notify_address(value: str) -> str:
    """``ip:port`` as a job carries it (``[ipv6]:port``: a pod's IPv6 address from the downward
    API comes bare); SettingsError saying why when it is not one."""
    host, _, port = value.rpartition(":")
    if ":" in host and not host.startswith("["):
        value = f"[{host}]:{port}"
    try:
        contract.check_notify(value)
    except contract.ContractError as error:
        raise common.SettingsError(f"REPORTFARM_GATEWAY_NOTIFY_ADDRESS: {error}") from None
    return value


def _host_port(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise common.SettingsError(f"REPORTFARM_GATEWAY_WAKE: {target!r} is not host:port")
    return host.removeprefix("[").removesuffix("]"), int(port)


WAITERS = web.AppKey("waiters", Waiters)
WAKER = web.AppKey("waker", Waker)


async def post_done(request: web.Request) -> web.Response:
    """A renderer says a job has its record: wake whoever waits for it here (no answer body:
    the caller learns nothing, and the waiter reads the record itself)."""
    job_id = request.match_info["job_id"]
    heard = request.app[WAITERS].done(job_id)
    outcome = "woke" if heard else "nobody_waiting"
    request.app[METRICS].hints.labels(kind="done", outcome=outcome).inc()
    logger.debug("done hint for job %s woke %d request(s)", job_id, heard)
    return web.Response(status=204)


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post(contract.DONE_PATH, post_done)
