"""The hand-off: the gateway sends a synchronous report's message invisible and hands it, with its
pop receipt, to a renderer that runs it without a receive. Real Chromium, Azurite, renderer and
gateway on loopback; a stand-in renderer (a small aiohttp app) where a test needs one that says
"no room" or takes a job and dies.

What may not happen: a job lost or held past its hold, a forged hand-off run."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from reportfarm_gateway import context, hinting
from reportfarm_renderer import service, worker

from reportfarm import carrying, contract, encoding, renderer_api
from reportfarm.client import ReportFarmClient
from reportfarm.encoding import Submission
from reportfarm.settings import StorageSettings

from ..renderer.conftest import WorkerProcess, pdf_text, renderer_settings, wait_for
from .conftest import Gateway, auth, free_port, gateway_on_port, hinting_gateway

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]

SLOW_POLL_S = 60.0
"""The renderer's longest idle pause and the gateway's polling: a report back well before this
came by a hint or a hand-off, not by polling."""


class StandIn:
    """A renderer's hand-off and wake paths only: answers every offer with ``status`` (after
    ``delay_s``: a renderer whose event loop lags) and runs nothing (409: a renderer without
    room; 200: one that took the job and died)."""

    def __init__(self, status: int, *, delay_s: float = 0.0) -> None:
        self.status = status
        self.delay_s = delay_s
        self.answered = asyncio.Event()
        self.offers: list[renderer_api.Handoff | None] = []
        self.wakes = 0
        self.port = free_port()

    async def _handoff(self, request: web.Request) -> web.Response:
        self.offers.append(renderer_api.parse_handoff(await request.read()))
        await asyncio.sleep(self.delay_s)
        self.answered.set()
        return web.Response(status=self.status)

    async def _wake(self, request: web.Request) -> web.Response:
        self.wakes += 1
        return web.Response(status=204)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[StandIn]:
        app = web.Application()
        app.router.add_post(renderer_api.HANDOFF_PATH, self._handoff)
        app.router.add_post(renderer_api.WAKE_PATH, self._wake)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host="127.0.0.1", port=self.port).start()
        try:
            yield self
        finally:
            await runner.cleanup()


async def _report(gateway: Gateway, name: str) -> tuple[bytes, float]:
    body = {"template": "plain", "data": {"name": name}, "wait_s": 2 * SLOW_POLL_S}
    started = time.monotonic()
    async with gateway.http.post(gateway.at("/v1/reports"), json=body, headers=auth()) as response:
        assert response.status == 200, await response.text()
        return await response.read(), time.monotonic() - started


async def test_a_handed_off_report_runs_at_once_without_a_receive_or_a_wake(
    storage: StorageSettings, template_dir: Path
) -> None:
    settings = renderer_settings(storage, template_dir, poll_max_s=SLOW_POLL_S)
    async with service.running(settings) as renderer:
        worker = renderer.worker

        async def idle() -> bool:
            return worker._pacing.idle_s >= 0.4

        await wait_for(idle, timeout=30, every=0.05)
        received = 0
        for lane in worker.lanes:  # count the messages received from now on
            receive = lane.receive

            async def counted(*, _receive=receive, **kwargs: int):  # type: ignore[no-untyped-def]
                nonlocal received
                deliveries = await _receive(**kwargs)
                received += len(deliveries)
                return deliveries

            lane.receive = counted  # type: ignore[method-assign]
        async with hinting_gateway(
            storage, renderer_port=renderer.port, handoff_s=int(SLOW_POLL_S), poll_s=SLOW_POLL_S
        ) as gateway:
            pdf, took = await _report(gateway, "王小明")
            second, _ = await _report(gateway, "李四")
            waker = gateway.app[hinting.WAKER]
            assert (waker.handed, waker.revealed, waker.sent) == (2, 0, 0)
            depth = await gateway.app[context.CLIENT].queues["interactive"].depth()
            assert depth == 0  # both messages deleted, with the pop receipts the puts answered
    assert "王小明" in pdf_text(pdf) and "李四" in pdf_text(second)
    assert worker.handoffs == 2 and worker.wakes == 0
    assert received == 0  # neither job was received: both were handed over
    taken = renderer.parts.metrics.registry.get_sample_value(
        "reportfarm_hints_total", {"kind": "handoff", "outcome": "taken"}
    )
    assert taken == 2
    # Generous: a report takes well under a second here; the renderer's next receive was a
    # minute away.
    assert took < SLOW_POLL_S / 2, took


async def test_a_hint_key_of_their_own_hands_off_and_carries_where_the_account_has_no_secret(
    storage: StorageSettings, template_dir: Path
) -> None:
    """An account reached with Entra ID has no secret in a connection string to derive the key
    from: ``REPORTFARM_HINT_KEY`` (a Secret both sides mount) is the key then, and wins over the
    derived one. Here both sides share a connection string, so the keys they would derive agree:
    a report is handed over and its answer carried only when their hint keys agree too, and
    when they differ the offer is refused and the answer read back, and the report still
    arrives."""
    mine = dataclasses.replace(storage, hint_key="k" * 40)
    theirs = dataclasses.replace(storage, hint_key="another key of at least 32 characters")
    assert carrying.key_for(None, hint_key=mine.hint_key) is not None  # no connection string
    settings = renderer_settings(mine, template_dir)
    async with service.running(settings) as renderer:
        outcomes = []
        for gateway_storage, name in ((mine, "王小明"), (theirs, "李四")):
            async with hinting_gateway(
                gateway_storage,
                renderer_port=renderer.port,
                handoff_s=int(SLOW_POLL_S),
                poll_s=SLOW_POLL_S,
            ) as gateway:
                pdf, _ = await _report(gateway, name)
                assert name in pdf_text(pdf)
                waker = gateway.app[hinting.WAKER]
                done = {
                    outcome: gateway.app[context.METRICS].registry.get_sample_value(
                        "reportfarm_gateway_hints_total", {"kind": "done", "outcome": outcome}
                    )
                    for outcome in ("carried", "refused")
                }
                outcomes.append((waker.handed, waker.revealed, done["carried"], done["refused"]))
    assert outcomes[0] == (1, 0, 1, None)  # handed over, its answer carried
    assert outcomes[1] == (0, 1, None, 1)  # refused, revealed, received; answer read back
    refused = renderer.parts.metrics.registry.get_sample_value(
        "reportfarm_hints_total", {"kind": "handoff", "outcome": "refused"}
    )
    assert refused == 1 and renderer.worker.handoffs == 1


async def test_a_renderer_without_room_says_so_and_the_job_is_on_the_lane_at_once(
    storage: StorageSettings, template_dir: Path
) -> None:
    """The stand-in answers 409: the message is made visible at once (not after its hold) and
    a receive of the real renderer, which no hint reaches, finds it; the stand-in is offered
    nothing more for a while, the next job goes on the lane visible, with a wake."""
    async with StandIn(409).running() as busy:
        async with service.running(renderer_settings(storage, template_dir)) as renderer:
            async with gateway_on_port(
                storage,
                port=free_port(),
                wake=(f"127.0.0.1:{busy.port}",),
                handoff_s=int(SLOW_POLL_S),
            ) as gateway:
                waker = gateway.app[hinting.WAKER]
                waker.busy_s = SLOW_POLL_S  # however long the first report takes here
                pdf, took = await _report(gateway, "first")
                assert (waker.handed, waker.revealed) == (0, 1)
                assert waker.reserve() is None  # its only renderer just said it has no room
                await _report(gateway, "second")
                assert len(busy.offers) == 1 and busy.wakes >= 1
                offer = busy.offers[0]
                assert offer is not None and offer.held_s == int(SLOW_POLL_S)
                assert offer.queue == contract.lane_queue_name(storage.queue, "interactive")
    assert "first" in pdf_text(pdf)
    assert renderer.worker.handoffs == 0
    assert took < SLOW_POLL_S / 2, took  # not held for its minute


async def test_a_renderer_that_took_a_job_and_died_leaves_it_held_only_until_its_hold_ends(
    storage: StorageSettings, template_dir: Path
) -> None:
    """The stand-in answers 200 and runs nothing (a renderer gone right after taking a job): the
    message stays invisible for its hold (3 s), then a receive of the real renderer takes it."""
    async with StandIn(200).running() as dies:
        async with service.running(renderer_settings(storage, template_dir)) as renderer:
            async with gateway_on_port(
                storage, port=free_port(), wake=(f"127.0.0.1:{dies.port}",), handoff_s=3
            ) as gateway:
                pdf, took = await _report(gateway, "survivor")
                assert gateway.app[hinting.WAKER].handed == 1
    assert len(dies.offers) == 1
    assert "survivor" in pdf_text(pdf)
    assert renderer.worker.handoffs == 0
    # Held for its 3 s (storage keeps time in whole seconds: 2 s at least), and not lost after;
    # the real renderer's receives, every 0.2 s, would have found it at once otherwise.
    assert took >= 2.0


async def test_an_offer_answered_late_is_left_to_its_hold_not_revealed_under_its_taker(
    storage: StorageSettings, template_dir: Path
) -> None:
    """The stand-in takes the job (200) half a second after the gateway stops waiting (a third of
    the 3 s hold: 1 s), as a renderer whose loop lagged would: the gateway cannot tell a late
    yes from a no, so the message is left invisible for its hold, as if taken. Revealed at once
    (as it was), the real renderer would have received it while its taker ran it: run twice."""
    async with StandIn(200, delay_s=1.5).running() as late:
        async with service.running(renderer_settings(storage, template_dir)) as renderer:
            async with gateway_on_port(
                storage, port=free_port(), wake=(f"127.0.0.1:{late.port}",), handoff_s=3
            ) as gateway:
                waker = gateway.app[hinting.WAKER]
                assert waker.offer_timeout_s == 1.0
                pdf, _ = await _report(gateway, "late")
                counts = (waker.handed, waker.revealed, waker.unanswered)
                async with asyncio.timeout(10):
                    await late.answered.wait()  # the late yes came (the gateway had given up)
    assert counts == (0, 0, 1), counts
    assert "late" in pdf_text(pdf)  # the real renderer received it once its hold ended
    assert renderer.worker.handoffs == 0


async def test_an_offer_taken_with_too_little_of_its_hold_left_is_refused_and_received_once(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    """A renderer whose loop lagged reads an offer long after the gateway sent it (here: 1.5 s
    into a 4 s hold, so at most 2.5 s are left, under the 3 s it needs to extend the lease in
    time). Taken, its hold could end before the first extension and another renderer receive
    the job and run it too; refused, the message stays invisible until the hold ends, and the
    renderer's own receive then finds it: run once, on its first delivery."""
    job = encoding.encode(client.build_job(Submission(template="plain", data={"name": "late"})))
    queue, delivery = await client.send_held(job, held_s=4)
    assert delivery.inserted_on is not None  # storage answered the put with its insertion time
    await asyncio.sleep(1.5)
    key = carrying.key_for(storage.connection_string)
    assert key is not None
    body = renderer_api.handoff_body(
        renderer_api.Handoff(
            queue=queue.name,
            message_id=delivery.message_id,
            pop_receipt=delivery.pop_receipt,
            content=delivery.content,
            held_s=4,
            inserted_on=delivery.inserted_on.isoformat(),
        )
    )
    headers = {carrying.HANDOFF_SIGNATURE_HEADER: carrying.sign_handoff(key, body)}
    async with service.running(renderer_settings(storage, template_dir)) as renderer:
        url = f"http://127.0.0.1:{renderer.port}{renderer_api.HANDOFF_PATH}"
        async with aiohttp.ClientSession() as http:
            async with http.post(url, data=body, headers=headers) as response:
                assert response.status == 409
        assert renderer.worker.handoffs == 0 and renderer.worker.handoffs_late == 1
        results = await client.wait([job.job_id], timeout_s=30)
        record = results[job.job_id]
        assert record is not None and record.state == "succeeded", record
        assert record.attempts == 1  # received once, when its hold ended; never run before
        pdf = await client.download(record)
        late = renderer.parts.metrics.registry.get_sample_value(
            "reportfarm_hints_total", {"kind": "handoff", "outcome": "late"}
        )
    assert late == 1 and renderer.worker.handoffs == 0
    assert "late" in pdf_text(pdf)


async def _scrape(http: aiohttp.ClientSession, port: int) -> Callable[..., float]:
    """A renderer process's ``/metrics``, read once: a sample by name and labels (0 if none)."""
    async with http.get(f"http://127.0.0.1:{port}{renderer_api.METRICS_PATH}") as response:
        samples = [
            sample
            for family in text_string_to_metric_families(await response.text())
            for sample in family.samples
        ]

    def value(name: str, **labels: str) -> float:
        return next(
            (
                float(sample.value)
                for sample in samples
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
            ),
            0.0,
        )

    return value


async def test_a_renderer_frozen_past_most_of_the_hold_refuses_the_offer_and_the_job_runs_once(
    storage: StorageSettings,
    template_dir: Path,
    tmp_path: Path,
    worker_process: type[WorkerProcess],
) -> None:
    """A renderer process is stopped (SIGSTOP: a loop that lags, as on a starved node) while the
    gateway offers it a job that prints for 3 s, and resumes 9 s into the 10 s hold; the gateway
    stopped waiting at a third of the hold and left the message to it. Before this check the
    renderer took the offer and first extended the lease a third of the hold later, after the
    hold had ended: the message came back at the hold's end and was received (by this renderer
    or the other one here) while the first run went on, so the job started twice. Now the offer
    is refused as late and the job starts once, received when the hold ends."""
    frozen = worker_process(storage, template_dir, tmp_path / "frozen.log")
    async with aiohttp.ClientSession() as http:

        async def ready() -> bool:
            url = f"http://127.0.0.1:{frozen.port}{renderer_api.READYZ_PATH}"
            try:
                async with http.get(url) as response:
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(ready, timeout=60)
        async with service.running(renderer_settings(storage, template_dir)) as other:
            async with gateway_on_port(
                storage, port=free_port(), wake=(f"127.0.0.1:{frozen.port}",), handoff_s=10
            ) as gateway:
                frozen.signal(signal.SIGSTOP)
                body = {
                    "template": "slow",
                    "data": {"name": "once", "busy_ms": 3000},
                    "wait_s": 2 * SLOW_POLL_S,
                }
                report = asyncio.ensure_future(
                    gateway.http.post(gateway.at("/v1/reports"), json=body, headers=auth())
                )
                await asyncio.sleep(9.0)
                frozen.signal(signal.SIGCONT)
                async with await report as response:
                    assert response.status == 200, await response.text()
                    pdf = await response.read()
                waker = gateway.app[hinting.WAKER]
                assert (waker.handed, waker.unanswered) == (0, 1)
            await asyncio.sleep(4.0)  # a second run, had one started, ends meanwhile
            sample = other.parts.metrics.registry.get_sample_value
            started_here = sample("reportfarm_job_queue_wait_seconds_count") or 0.0
            ran_here = sample("reportfarm_jobs_total", {"outcome": "succeeded", "template": "slow"})
        there = await _scrape(http, frozen.port)
        started_there = there("reportfarm_job_queue_wait_seconds_count")
        ran_there = there("reportfarm_jobs_total", outcome="succeeded", template="slow")
        outcomes = {
            outcome: there("reportfarm_hints_total", kind="handoff", outcome=outcome)
            for outcome in ("late", "taken")
        }
    assert "once" in pdf_text(pdf)
    assert outcomes == {"late": 1, "taken": 0}
    assert started_here + started_there == 1  # started once, by whichever received it
    assert (ran_here or 0.0) + ran_there == 1


def test_what_is_left_of_a_hold_counts_from_the_insertion_in_storage_clock() -> None:
    sent = datetime.datetime(2026, 12, 7, 13, 0, 0, tzinfo=datetime.UTC)
    later = sent + datetime.timedelta(seconds=7.5)
    assert worker.hold_left_s(10, sent, later) == 2.5
    assert worker.hold_left_s(10, sent.replace(tzinfo=None), later) == 2.5  # naive: UTC
    assert worker.hold_left_s(10, None, later) == 10.0  # insertion unknown: the whole hold
    assert worker.hold_left_s(10, later, sent) == 10.0  # this clock behind storage's
    assert worker.hold_left_s(10, sent, sent + datetime.timedelta(seconds=12)) == -2.0
    assert worker.hold_left_s(10, sent, later) < worker.HANDOFF_MIN_LEFT_S


@given(
    held_s=st.integers(min_value=1, max_value=600),
    sent=st.datetimes(
        min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2100, 1, 1)
    ),
    elapsed_s=st.floats(min_value=-86_400, max_value=86_400),
    naive=st.booleans(),
)
def test_what_is_left_of_a_hold_never_overstates_it(
    held_s: int, sent: datetime.datetime, elapsed_s: float, naive: bool
) -> None:
    """Whatever the clocks say: never more than the hold, never more than what is truly left
    (storage keeps the insertion in whole seconds, rounded down), and the whole hold when this
    clock is behind storage's."""
    sent = sent.replace(tzinfo=datetime.UTC)
    stored = sent.replace(microsecond=0)  # what storage answers: whole seconds
    now = sent + datetime.timedelta(seconds=elapsed_s)
    left = worker.hold_left_s(held_s, stored.replace(tzinfo=None) if naive else stored, now)
    assert left <= held_s
    assert left <= held_s - elapsed_s + 1e-6 or (now - stored).total_seconds() <= 0
    if (now - stored).total_seconds() <= 0:
        assert left == held_s


async def test_a_forged_or_malformed_handoff_is_refused_and_runs_nothing(
    storage: StorageSettings, template_dir: Path
) -> None:
    key = carrying.key_for(storage.connection_string)
    assert key is not None
    queue = contract.lane_queue_name(storage.queue, "interactive")
    offer = renderer_api.Handoff(
        queue=queue,
        message_id="m1",
        pop_receipt="r1",
        content="{}",
        held_s=30,
        inserted_on="",
    )
    body = renderer_api.handoff_body(offer)
    other = renderer_api.handoff_body(
        renderer_api.Handoff(**{**offer.__dict__, "queue": "someone-elses-queue"})
    )
    header = carrying.HANDOFF_SIGNATURE_HEADER
    cases = [
        (body, {}),  # unsigned
        (body, {header: "0" * 64}),  # a signature that is not the key's
        (body, {header: carrying.sign_handoff(b"another key", body)}),
        (body, {header: carrying.sign(key, "m1", body, b"")}),  # the done hint's, not this
        (b"not json", {header: carrying.sign_handoff(key, b"not json")}),
        (b"[]", {header: carrying.sign_handoff(key, b"[]")}),
        (other, {header: carrying.sign_handoff(key, other)}),  # a queue it does not serve
    ]
    async with service.running(renderer_settings(storage, template_dir)) as renderer:
        url = f"http://127.0.0.1:{renderer.port}{renderer_api.HANDOFF_PATH}"
        async with aiohttp.ClientSession() as http:
            for data, headers in cases:
                async with http.post(url, data=data, headers=headers) as response:
                    assert response.status == 409
                    assert await response.read() == b""
            too_long = b"x" * (renderer_api.MAX_HANDOFF_BYTES + 1)
            signed = {header: carrying.sign_handoff(key, too_long)}
            async with http.post(url, data=too_long, headers=signed) as response:
                assert response.status == 409  # not read
            # A renderer without a key (storage reached with Entra ID) declines even a good
            # offer, counted apart: nothing is wrong with the offer.
            renderer.parts.handoff_key = None
            signed = {header: carrying.sign_handoff(key, body)}
            async with http.post(url, data=body, headers=signed) as response:
                assert response.status == 409
        assert renderer.worker.handoffs == 0 and renderer.worker.running == 0
        sample = renderer.parts.metrics.registry.get_sample_value
        refused = sample("reportfarm_hints_total", {"kind": "handoff", "outcome": "refused"})
        assert refused == len(cases)  # all but one; that one checked out, naming no lane of its
        assert renderer.parts.handoffs_refused == refused  # logged at the 1st and the 10th
        unkeyed = sample("reportfarm_hints_total", {"kind": "handoff", "outcome": "unkeyed"})
        assert unkeyed == 1 and renderer.parts.handoffs_unkeyed


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{}",
        b'{"queue": "q", "message_id": "m", "pop_receipt": "r", "content": "c", "held_s": 0,'
        b' "inserted_on": ""}',
        b'{"queue": "q", "message_id": "m", "pop_receipt": "r", "content": "c", "held_s": true,'
        b' "inserted_on": ""}',
        b'{"queue": "", "message_id": "m", "pop_receipt": "r", "content": "c", "held_s": 5,'
        b' "inserted_on": ""}',
        b'{"queue": "q", "message_id": "m", "pop_receipt": "r", "content": "c", "held_s": 5,'
        b' "inserted_on": "", "extra": 1}',
        b"x" * (renderer_api.MAX_HANDOFF_BYTES + 1),
    ],
)
def test_a_handoff_body_that_is_not_one_reads_as_none(body: bytes) -> None:
    assert renderer_api.parse_handoff(body) is None


def test_a_handoff_body_reads_back_as_written() -> None:
    offer = renderer_api.Handoff(
        queue="q-interactive",
        message_id="m",
        pop_receipt="AgAAAAMAAAAAAAAA",
        content='{"v": 1, "名": "x"}',
        held_s=10,
        inserted_on="2026-12-06T02:00:00+00:00",
    )
    assert renderer_api.parse_handoff(renderer_api.handoff_body(offer)) == offer


async def test_a_renderer_is_offered_one_job_at_a_time_and_none_when_hand_offs_are_off() -> None:
    """A burst of synchronous reports is not all sent invisible to one renderer that has room
    for one: each renderer has at most one offer in flight, the others go on the lane."""
    targets = ("127.0.0.1:1", "127.0.0.1:2")
    waker = hinting.Waker(targets=targets, fanout=2, key=b"k", handoff_s=10)
    waker._addresses = [("127.0.0.1", 1), ("127.0.0.1", 2)]
    waker._resolved_at = time.monotonic()
    first, second = waker.reserve(), waker.reserve()
    assert first is not None and second is not None
    assert {first, second} == set(waker._addresses)
    assert waker.reserve() is None  # both have an offer in flight
    assert waker.offer_timeout_s == 10 / 3  # a taker extends the lease before the hold ends
    waker.release(first)
    assert waker.reserve() == first
    for off in (
        hinting.Waker(targets=targets, fanout=2, key=None, handoff_s=10),  # nothing to sign with
        hinting.Waker(targets=targets, fanout=2, key=b"k", handoff_s=0),  # turned off
        hinting.Waker(targets=(), fanout=2, key=b"k", handoff_s=10),  # no renderer to wake
    ):
        off._addresses, off._resolved_at = list(waker._addresses), time.monotonic()
        assert off.reserve() is None
