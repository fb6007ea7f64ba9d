"""Hints that shorten a synchronous report's wait; the queue and the result record stay the truth.

- Wake: once a job is on the interactive lane, the gateway POSTs the renderers' wake path
  (``renderer_api.WAKE_PATH``) at up to ``wake_fanout`` addresses picked at random among those
  ``REPORTFARM_GATEWAY_WAKE`` resolves to (in the chart: the pool's headless Service, one address
  per ready renderer). An idle renderer then receives at once, not at the end of its idle pause
  (up to ``REPORTFARM_POLL_MAX_S``, 1 s).
- Done: the job names this replica (``contract.Job.notify``); the renderer that stored its record
  POSTs ``contract.DONE_PATH`` here, and the waiting request reads the record at once, not at its
  next poll (:class:`Waiters`). A succeeded job's hint may carry its stored record and PDF, signed
  (:mod:`reportfarm.carrying`): the waiting request answers with them and reads nothing. The
  body is read only for a job a request here waits for, up to ``carrying.MAX_PDF_BYTES``.

- Hand-off (``REPORTFARM_GATEWAY_HANDOFF_S``, with wakes and a storage secret): the job's message
  is sent invisible for that long, and the delivery the put answered (its pop receipt) is handed,
  signed, to one renderer picked at random among those not busy a moment ago and with no offer
  in flight (``renderer_api.HANDOFF_PATH``); with none such, the job goes on the lane visible,
  with a wake. A renderer with room runs it as if it had received it: the
  receive, a storage round trip, is skipped. One without room answers 409 (and is not offered
  another for :data:`BUSY_S`); then, or when the offer could not be sent, the message is made
  visible at once and renderers are woken as above. An offer sent and not answered within a
  third of the hold (:meth:`Waker.offer_timeout_s`) may have been taken: its message is left to
  its hold, as a lease would be (made visible under a renderer that took it late, it was run
  twice). A renderer that took one and died leaves the message invisible until its hold ends.
  The message's dequeue count stays 0 through a hand-off: a job handed over and lost gets one
  attempt more before the poison queue.

Wakes and done hints are sent without waiting for them, with a short timeout. A lost, late or
forged hint costs what it would have saved (the idle pause, the polling interval) or one more
read; a hand-off lost with its gateway (between the send and the offer) costs its hold. No job
depends on one.
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
from typing import Any, Literal

import aiohttp
from aiohttp import web
from prometheus_client import Counter

from reportfarm import carrying, contract, logs, renderer_api
from reportfarm import settings as common
from reportfarm.storage.queueing import Delivery, JobQueue
from reportfarm_gateway.context import METRICS

logger = logging.getLogger(__name__)

HINT_TIMEOUT_S = 1.0
"""A wake that takes longer than this is dropped (the renderer's polling finds the job)."""
RESOLVE_EVERY_S = 5.0
"""How long resolved renderer addresses are reused (renderers come and go with scaling)."""
Address = tuple[str, int]
"""A renderer's (host, port)."""
Offered = Literal["taken", "refused", "unanswered"]
"""What became of a hand-off's offer (:meth:`Waker._offer`)."""
BUSY_S = 1.0
"""A renderer that had no room for a hand-off is not offered another for this long (its jobs go
on the lane visible, with a wake): a busy farm pays a refused offer and a reveal at most once a
second a renderer."""


class Hint(asyncio.Event):
    """Set by the job's done hint; ``carried``: the stored record and PDF it brought, if any
    (signed and checked, see :meth:`Waiters.carry`)."""

    def __init__(self) -> None:
        super().__init__()
        self.carried: tuple[contract.ResultRecord, bytes] | None = None


class Waiters:
    """The jobs this replica's requests wait for, each with the events its waiters watch, and
    ``address``: where renderers reach this replica (None: no done hints). ``key``: checks the
    answers hints carry (None: they are not read)."""

    def __init__(self, *, address: str | None = None, key: bytes | None = None) -> None:
        self.address = None if address is None else notify_address(address)
        self.key = key
        self.refused = 0
        """Carried answers that did not check out (logged at the 1st, 10th, every 1000th)."""
        self._events: dict[str, set[Hint]] = collections.defaultdict(set)

    def waited(self, job_id: str) -> bool:
        return job_id in self._events

    def carry(
        self, job_id: str, *, record_header: str, signature: str, pdf: bytes
    ) -> contract.ResultRecord | None:
        """The record a hint carried, if its signature holds and it is this job's, succeeded,
        into the job's default blob, of exactly this PDF; else None (the waiters read)."""
        if self.key is None:
            return None
        record_json = carrying.decode_record(record_header)
        if record_json is None or not carrying.verify(
            self.key, job_id, record_json, pdf, signature
        ):
            return None
        try:
            record = contract.ResultRecord.from_json(record_json)
        except contract.ContractError:
            return None
        return record if carrying.answers(record, job_id, pdf_bytes=len(pdf)) else None

    @contextlib.contextmanager
    def waiting(self, job_id: str) -> Iterator[Hint]:
        event = Hint()
        self._events[job_id].add(event)
        try:
            yield event
        finally:
            events = self._events.get(job_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._events[job_id]

    def done(
        self, job_id: str, *, carried: tuple[contract.ResultRecord, bytes] | None = None
    ) -> int:
        """Wake the requests waiting for ``job_id``, handing them what the hint carried; how
        many there were."""
        events = self._events.get(job_id, set())
        for event in events:
            if carried is not None:
                event.carried = carried
            event.set()
        return len(events)

    def __len__(self) -> int:
        return len(self._events)


class Waker:
    """Pokes renderers when a job they could take is on the lane."""

    def __init__(
        self,
        *,
        targets: tuple[str, ...],
        fanout: int,
        counter: Counter | None = None,
        key: bytes | None = None,
        handoff_s: int = 0,
        busy_s: float = BUSY_S,
    ) -> None:
        self.targets = [_host_port(target) for target in targets]
        self.fanout = fanout
        self.counter = counter
        """``reportfarm_gateway_hints``, labelled kind and outcome."""
        self.key = key
        """Signs hand-offs (``carrying.sign_handoff``); None: no hand-offs."""
        self.handoff_s = int(handoff_s)
        """How long a handed-over message stays invisible (0: no hand-offs)."""
        self.busy_s = busy_s
        """How long a renderer that had no room is offered nothing (:data:`BUSY_S`)."""
        self.sent = 0
        self.failed = 0
        self.handed = 0
        """Hand-offs a renderer took."""
        self.revealed = 0
        """Hand-offs no renderer took: their messages made visible at once."""
        self.unanswered = 0
        """Offers sent and not answered in time: their messages left to their hold."""
        self._busy_until: dict[Address, float] = {}
        """Renderers that had no room for a hand-off, until when they are not offered one."""
        self._offering: set[Address] = set()
        """Renderers with an offer in flight (reserved)."""
        self._session: aiohttp.ClientSession | None = None
        self._addresses: list[tuple[str, int]] = []
        self._resolved_at = -RESOLVE_EVERY_S
        self._tasks: set[asyncio.Task[Any]] = set()

    def wake(self) -> None:
        """Send the wake without waiting for it."""
        if not self.targets:
            return
        self._track(asyncio.create_task(self._wake(), name="wake-renderers"))

    async def start(self) -> None:
        """Resolve the renderers' addresses now (a hand-off needs them known)."""
        if self.targets:
            await self._resolve()

    def reserve(self) -> Address | None:
        """The renderer to hand the next job to, or None (send it visible and wake): hand-offs
        are on and a renderer is known that did not say it had no room a moment ago and has no
        offer in flight (one at a time each: a burst of jobs is not all offered to a renderer
        that has room for one). Reserved until its offer is answered (:meth:`hand_off`)."""
        if not (self.targets and self.key is not None and self.handoff_s > 0):
            return None
        now = time.monotonic()
        if now - self._resolved_at >= RESOLVE_EVERY_S:  # renderers come and go: look again
            self._track(asyncio.create_task(self._resolve(), name="resolve-renderers"))
        free = [
            address
            for address in self._addresses
            if self._busy_until.get(address, 0.0) <= now and address not in self._offering
        ]
        if not free:
            return None
        address = random.choice(free)
        self._offering.add(address)
        return address

    def hand_off(self, address: Address, queue: JobQueue, delivery: Delivery) -> None:
        """Hand a message sent invisible to the renderer :meth:`reserve` chose, without waiting;
        if it is not taken, make the message visible at once and wake renderers as :meth:`wake`
        does."""
        self._track(asyncio.create_task(self._hand_off(address, queue, delivery), name="hand-off"))

    def release(self, address: Address) -> None:
        """A reservation not used (the send failed)."""
        self._offering.discard(address)

    @property
    def offer_timeout_s(self) -> float:
        """How long an offer's answer is waited for: a third of the hold (at least
        :data:`HINT_TIMEOUT_S`), so that a renderer that took the job as the wait ended extends
        its lease (within a third of the hold from taking it) before the hold ends."""
        return max(HINT_TIMEOUT_S, self.handoff_s / 3)

    async def _hand_off(self, address: Address, queue: JobQueue, delivery: Delivery) -> None:
        try:
            answer = await self._offer(address, queue.name, delivery)
        finally:
            self._offering.discard(address)
        if answer == "taken":
            self.handed += 1
            self._count("handoff", "taken")
            return
        self._busy_until[address] = time.monotonic() + self.busy_s
        if answer == "unanswered":  # it may have been taken: the hold decides, as a lease's
            logger.info(
                "hand-off of message %s to renderer %s:%d not answered within %.1f s: "
                "left to its hold (visible in %d s at most)",
                *(delivery.message_id, *address, self.offer_timeout_s, self.handoff_s),
            )
            self.unanswered += 1
            self._count("handoff", "unanswered")
            return
        try:
            await queue.release(delivery, delay_s=0)
        except Exception as error:  # it becomes visible when its hold ends
            logger.warning(
                "could not reveal message %s after a hand-off nobody took (visible in %d s): %s",
                delivery.message_id,
                self.handoff_s,
                error,
            )
        self.revealed += 1
        self._count("handoff", "revealed")
        await self._wake()

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _offer(self, address: Address, queue: str, delivery: Delivery) -> Offered:
        """What the renderer at ``address`` answered: ``taken`` (200), ``refused`` (any other
        answer, or the offer was never sent: no connection), or ``unanswered`` (sent, no answer
        within :attr:`offer_timeout_s`, or the connection broke after sending: it may have
        been taken)."""
        assert self.key is not None
        body = renderer_api.handoff_body(
            renderer_api.Handoff(
                queue=queue,
                message_id=delivery.message_id,
                pop_receipt=delivery.pop_receipt,
                content=delivery.content,
                held_s=self.handoff_s,
                inserted_on=delivery.inserted_on.isoformat() if delivery.inserted_on else "",
            )
        )
        headers = {
            carrying.HANDOFF_SIGNATURE_HEADER: carrying.sign_handoff(self.key, body),
            "Content-Type": "application/json",
        }
        host, port = address
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}{renderer_api.HANDOFF_PATH}"
        timeout = aiohttp.ClientTimeout(total=self.offer_timeout_s)
        try:
            async with self._http().post(
                url, data=body, headers=headers, timeout=timeout
            ) as response:
                return "taken" if response.status == 200 else "refused"
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as error:
            logger.debug("hand-off to renderer %s:%d not sent: %s", host, port, error)
            return "refused"
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            logger.debug("hand-off to renderer %s:%d not answered: %r", host, port, error)
            return "unanswered"

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=HINT_TIMEOUT_S)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    def _count(self, kind: str, outcome: str) -> None:
        if self.counter is not None:
            self.counter.labels(kind=kind, outcome=outcome).inc()

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
        shown = f"[{host}]" if ":" in host else host
        try:
            async with self._http().post(f"http://{shown}:{port}{renderer_api.WAKE_PATH}"):
                self.sent += 1
                outcome = "sent"
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            self.failed += 1
            outcome = "failed"
            logger.debug("wake of renderer %s:%d failed: %s", host, port, error)
        self._count("wake", outcome)

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
    the caller learns nothing). What the hint carries is read only for a job waited for here,
    with a signature, up to ``carrying.MAX_PDF_BYTES``; the waiters use it only if it checks
    out, else they read the record themselves."""
    job_id = request.match_info["job_id"]
    waiters = request.app[WAITERS]
    carried = await _carried(request, waiters, job_id)
    heard = waiters.done(job_id, carried=carried)
    outcome = "woke" if heard else "nobody_waiting"
    if heard and carried is not None:
        outcome = "carried"
    request.app[METRICS].hints.labels(kind="done", outcome=outcome).inc()
    logger.debug("done hint for job %s woke %d request(s)", job_id, heard)
    return web.Response(status=204)


async def _carried(
    request: web.Request, waiters: Waiters, job_id: str
) -> tuple[contract.ResultRecord, bytes] | None:
    record_header = request.headers.get(carrying.RECORD_HEADER)
    signature = request.headers.get(carrying.SIGNATURE_HEADER)
    size = request.content_length
    if (
        waiters.key is None
        or record_header is None
        or signature is None
        or size is None
        or not 0 < size <= carrying.MAX_PDF_BYTES
        or not waiters.waited(job_id)
    ):
        return None
    try:
        pdf = await request.content.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    record = waiters.carry(job_id, record_header=record_header, signature=signature, pdf=pdf)
    if record is None:
        request.app[METRICS].hints.labels(kind="done", outcome="refused").inc()
        waiters.refused += 1
        if logs.worth_logging(waiters.refused):  # keys that differ: no flood
            logger.warning(
                "done hint for job %s carried an answer that does not check out (%d so far; the "
                "wait reads the record): do the gateway and the renderers share one storage "
                "connection string?",
                job_id,
                waiters.refused,
            )
        return None
    return record, pdf


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post(contract.DONE_PATH, post_done)
