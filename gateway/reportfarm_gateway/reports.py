"""Single reports on the interactive lane: the synchronous path and its status.

``POST /v1/reports`` ``{"template", "data", "wait_s"?, "pdf"?, "callback_url"?}`` sends one job
on the interactive lane and waits up to ``wait_s`` for its result record: 200 with the PDF when it
is ready in time, 422 when the job failed in time, else 202 with ``Location: /v1/reports/{id}``.
An ``Idempotency-Key`` header makes the job id (per tenant): the same key again sends nothing new,
with another body it is a 422 (the first request's note, created by a conditional write, owns it).
The body is checked in its stored form by a worker process (reportfarm_gateway.checking).

``GET /v1/reports/{id}`` is the job's state as JSON; ``/pdf`` (or ``?format=pdf``) is its PDF.
Batch items are reports too, under their job ids (``<batch id>-<index:06d>``, the tenant's batch
id: reportfarm_gateway.tenancy). Another tenant's job and no job are the same 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from reportfarm import batches, contract, netpolicy
from reportfarm.client import ReportFarmClient
from reportfarm.encoding import EncodedJob
from reportfarm_gateway import bodies, checking, content_type, hinting, prefetching, tenancy
from reportfarm_gateway.context import (
    BODIES,
    CLIENT,
    METRICS,
    OFFLOADER,
    SETTINGS,
    TENANT,
    backpressure,
    problem,
    refused,
)

logger = logging.getLogger(__name__)

_REPORT_FIELDS = frozenset({"template", "data", "wait_s", "pdf", "callback_url", "finish", "files"})
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


BadRequest = checking.BadRequest
_JSON = "application/json"


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/v1/reports", post_report)
    router.add_get("/v1/reports/{job_id}", get_report)
    router.add_get("/v1/reports/{job_id}/pdf", get_report_pdf)


async def check_callback(request: web.Request, url: object, tenant: str) -> str | None:
    """A callback URL the webhook dispatcher can sign for and the network policy allows."""
    if url is None:
        return None
    webhooks = request.app[SETTINGS].webhooks
    if not isinstance(url, str) or len(url) > 2048:
        raise BadRequest("callback_url must be an http(s) URL of at most 2048 characters")
    if webhooks.secret_for(tenant) is None:
        raise BadRequest(f"no webhook secret is configured for tenant {tenant}")
    try:
        await webhooks.policy.check_url(url)
    except netpolicy.Refused as refused:
        raise BadRequest(f"callback_url refused by the network policy: {refused}") from None
    return url


def idempotency_key(request: web.Request) -> str | None:
    """The Idempotency-Key header: 1 to 256 printable ASCII characters (400 otherwise)."""
    key = request.headers.get("Idempotency-Key")  # lone surrogates: bytes that were not UTF-8
    if key is not None and not (0 < len(key) <= 256 and key.isascii() and key.isprintable()):
        raise BadRequest("Idempotency-Key is 1 to 256 printable ASCII characters")
    return key


async def post_report(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    client = request.app[CLIENT]
    with contextlib.ExitStack() as stack:  # the done hint's registration, while the job runs
        try:
            content_type.require(request, content_type.JSON)
            async with bodies.received(
                request, request.app[BODIES], tenant=request[TENANT], limit=settings.max_body_bytes
            ) as raw:
                accepted = await _accept(request, raw, stack=stack)
        except bodies.BodyError as error:
            return refused(error)
        if isinstance(accepted, web.StreamResponse):
            return accepted
        job_id, wait_s, hint, sent, deferred = accepted  # the body and its data are gone
        # Done hints on, and the job just sent names this replica: polling is only the fallback.
        done_hints = sent and request.app[hinting.WAITERS].address is not None
        wait = min(wait_s, settings.max_wait_s)
        prefetch = prefetching.PdfPrefetch(client, blob=contract.default_output_blob(job_id))
        try:
            record = await await_record(
                client,
                job_id,
                wait_s=wait,
                poll_s=settings.hinted_poll_s if done_hints else settings.poll_s,
                gone=lambda: _gone(request),
                hint=hint,
                look_first=not sent,
                prefetch=prefetch,
            )
            if hint.carried is not None and record is hint.carried[0]:
                pdf: bytes | None = hint.carried[1]  # the hint brought it: nothing to read
            else:
                pdf = await prefetch.take(record)
        finally:
            await prefetch.drop()
    if _gone(request):  # nobody to answer: end now, which frees the tenant's in-flight slot
        request.app[METRICS].sync.labels(outcome="abandoned").inc()
        return web.Response(status=CLIENT_GONE)  # never sent; counted in the request metrics
    if record is None and deferred is not None:  # the client learns the id now: GET needs it
        await _note(client, job_id, deferred)
    return await _answer(request, job_id, record, pdf=pdf)


async def _accept(
    request: web.Request, raw: bytes, *, stack: contextlib.ExitStack
) -> tuple[str, float, hinting.Hint, bool, bytes | None] | web.StreamResponse:
    """Check the job in its stored form (in a worker process), then write and send it: (its id,
    the wait asked for, the event its done hint sets, whether it was sent now, the job's note
    if it is still to be written), or the error answer. Every check comes before anything is
    written; the wait for the hint is registered before the job is sent.

    The note (owner, template, callback) lets GET answer "pending" for a job with no record yet.
    A waiting request's client learns the job's id only from its answer, and a PDF or a failure
    comes with the record; so without a key (which needs the note first) or a callback (whose
    dispatcher reads it), the note is written only if the wait ends without a record, before
    the 202 that gives the id. One storage write less a report, and none beside the renderer's
    receive."""
    client = request.app[CLIENT]
    settings = request.app[SETTINGS]
    tenant = request[TENANT]
    try:
        checked = await request.app[OFFLOADER].run(
            tenant,
            checking.check_report,
            raw=raw,
            tenant=tenant,
            key=idempotency_key(request),
            default_wait_s=settings.default_wait_s,
            cpu_s=settings.parse_cpu_s,
            notify=request.app[hinting.WAITERS].address,
        )
        if isinstance(checked, checking.Refusal):
            return problem(checked.status, checked.detail)
        if (
            await check_callback(request, checked.callback_url, tenant)
            != checked.note["callback_url"]
        ):
            raise BadRequest("callback_url must be an http(s) URL of at most 2048 characters")
    except BadRequest as error:
        return problem(400, str(error))
    answer = await backpressure(request, "interactive")
    if answer is not None:
        return answer
    job = checked.job
    hint = stack.enter_context(request.app[hinting.WAITERS].waiting(job.job_id))
    note = json.dumps(checked.note).encode("utf-8")
    # Without a key or a callback, a waiting report's note waits for a 202 (see above).
    keep = checked.keyed or checked.callback_url is not None or checked.wait_s <= 0
    deferred = None if keep else note
    if checked.keyed:  # the first request with this key owns the job id (a conditional write)
        if not await client.blobs.create(contract.job_note_blob(job.job_id), note, _JSON):
            if await _noted_digest(client, job.job_id) != checked.note["digest"]:
                return problem(422, "this Idempotency-Key was used with another body")
            return job.job_id, checked.wait_s, hint, False, None  # a repeat sends nothing new
    await client.upload_files(job.job_id, checked.files)
    if checked.keyed or deferred is not None:
        await _send_and_wake(request, job)
    else:
        # Both at once: the sooner the job is on the lane, the sooner a renderer takes it (it
        # is woken as soon as the message is there, not when the note is too). A job whose
        # note failed is still served; only its GET answers 404 until it has a record.
        sent, _ = await asyncio.gather(
            _send_and_wake(request, job), _note(client, job.job_id, note), return_exceptions=True
        )
        if isinstance(sent, BaseException):
            raise sent
    request.app[METRICS].jobs.labels(lane="interactive").inc()
    return job.job_id, checked.wait_s, hint, True, deferred


async def _note(client: ReportFarmClient, job_id: str, note: bytes) -> None:
    """Write a job's note; a job whose note failed is still served (its GET answers 404 until
    it has a record)."""
    try:
        await client.blobs.put(contract.job_note_blob(job_id), note, content_type=_JSON)
    except Exception as error:  # storage away: the 202 still goes, the job still runs
        logger.warning("could not note job %s: %s", job_id, error)


async def _send_and_wake(request: web.Request, job: EncodedJob) -> None:
    """Send the job and wake a renderer; with hand-offs on and a renderer that may have room
    (``hinting.Waker.reserve``), send it invisible and hand it over instead."""
    waker = request.app[hinting.WAKER]
    if (renderer := waker.reserve()) is not None:
        try:
            queue, delivery = await request.app[CLIENT].send_held(job, held_s=waker.handoff_s)
        except BaseException:
            waker.release(renderer)
            raise
        waker.hand_off(renderer, queue, delivery)
        return
    await request.app[CLIENT].send_encoded(job)
    waker.wake()


async def _noted_digest(client: ReportFarmClient, job_id: str) -> str | None:
    try:
        return json.loads(await client.blobs.get(contract.job_note_blob(job_id))).get("digest")
    except KeyError:
        return None


def _gone(request: web.Request) -> bool:
    """Whether the client has closed its connection (aiohttp drops the transport then)."""
    return request.transport is None or request.transport.is_closing()


async def _answer(
    request: web.Request, job_id: str, record: contract.ResultRecord | None, *, pdf: bytes | None
) -> web.Response:
    if record is not None and record.state == "succeeded":
        request.app[METRICS].sync.labels(outcome="pdf").inc()
        return await _pdf(request, record, data=pdf)
    if record is not None:
        request.app[METRICS].sync.labels(outcome="failed").inc()
        return web.json_response(status_body(job_id, record), status=422)
    request.app[METRICS].sync.labels(outcome="accepted").inc()
    location = f"/v1/reports/{job_id}"
    return web.json_response(
        status_body(job_id, None),
        status=202,
        headers={"Location": location, "Retry-After": "1"},
    )


CLIENT_GONE = 499
"""The status a request whose client left while it waited is counted under (as nginx does)."""
_GONE_CHECK_S = 0.05
"""How often a waiting request looks whether its client is still there (no I/O: a flag)."""


async def await_record(
    client: ReportFarmClient,
    job_id: str,
    *,
    wait_s: float,
    poll_s: float,
    gone: Callable[[], bool] = lambda: False,
    hint: hinting.Hint | None = None,
    look_first: bool = True,
    prefetch: prefetching.PdfPrefetch | None = None,
) -> contract.ResultRecord | None:
    """Look for the job's record until ``wait_s`` passed: first after ``poll_s``, then less and
    less often (up to 4x), so many waiting requests do not flood the blob store; at once when
    ``hint`` is set (the renderer's done hint: reportfarm_gateway.hinting). The first look is at
    once unless ``look_first`` is False (a job sent just now: it waits the first poll or the
    hint). Stops (None) as soon as ``gone()`` says the client has left. ``prefetch``: started
    with the read a hint brings (the PDF and its record at once). A hint that carried the record
    (``hint.carried``, checked: reportfarm_gateway.hinting) is the answer: nothing is read."""
    if not math.isfinite(wait_s):
        raise ValueError(f"wait_s {wait_s} is not a finite number of seconds")
    deadline = time.monotonic() + wait_s
    pause = poll_s
    hinted = False
    if not look_first:  # a job sent just now has no record yet: the first read waits a poll
        hinted = await _waited(hint, until=min(deadline, time.monotonic() + pause), gone=gone)
    while not gone():
        if hinted and hint is not None and hint.carried is not None:
            return hint.carried[0]
        if hinted and prefetch is not None:
            prefetch.start()
        record = await client.result(job_id)
        left = deadline - time.monotonic()
        if record is not None or left <= 0:
            return record
        hinted = await _waited(hint, until=time.monotonic() + min(pause, left), gone=gone)
        pause = min(pause * 1.5, poll_s * 4)
    return None


async def _waited(hint: asyncio.Event | None, *, until: float, gone: Callable[[], bool]) -> bool:
    """Until ``until``, the hint, or the client's leaving, whichever comes first; whether the
    hint came."""
    # aiohttp signals no event when a client leaves: look at its flag every 50 ms.
    while (rest := until - time.monotonic()) > 0 and not gone():
        if await _hinted(hint, timeout=min(rest, _GONE_CHECK_S)):
            return True
    return False


async def _hinted(hint: asyncio.Event | None, *, timeout: float) -> bool:
    """Wait up to ``timeout`` for the hint; whether it came (it is cleared for the next one)."""
    if hint is None:
        await asyncio.sleep(timeout)
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(hint.wait(), timeout=timeout)
    came = hint.is_set()
    hint.clear()
    return came


async def _pdf(
    request: web.Request, record: contract.ResultRecord, *, data: bytes | None = None
) -> web.Response:
    """The record's PDF (``data``: already read, see reportfarm_gateway.prefetching)."""
    if data is None:
        data = await request.app[CLIENT].download(record)
    job_id = tenancy.shown_job_id(record.tenant, record.job_id)
    return web.Response(
        body=data,
        content_type="application/pdf",
        headers={"X-Reportfarm-Job-Id": job_id, "Content-Location": f"/v1/reports/{job_id}/pdf"},
    )


def status_body(job_id: str, record: contract.ResultRecord | None) -> dict[str, Any]:
    links = {"status": f"/v1/reports/{job_id}", "pdf": f"/v1/reports/{job_id}/pdf"}
    if record is None:
        return {"job_id": job_id, "state": "pending", "links": links}
    return {
        "job_id": job_id,
        "state": record.state,
        "error": record.error,
        "attempts": record.attempts,
        "batch_id": (
            tenancy.shown_batch_id(record.tenant, record.batch_id) if record.batch_id else None
        ),
        "item_index": record.item_index,
        "submitted_at": record.submitted_at,
        "finished_at": record.finished_at,
        "seconds": (
            round(record.finished_at - record.submitted_at, 3)
            if record.finished_at is not None and record.submitted_at is not None
            else None
        ),
        "stages_ms": record.stages_ms,
        "links": links,
    }


async def find_report(
    request: web.Request, job_id: str
) -> tuple[bool, contract.ResultRecord | None]:
    """(whether the tenant may see this job, its current record). Unknown and other tenants'
    jobs look the same: not found, after the same reads (record, note, and the manifest for a
    batch item's id), made at once, whatever exists."""
    if not _ID_RE.match(job_id):
        return False, None
    tenant = request[TENANT]
    client = request.app[CLIENT]
    job_id = tenancy.stored_job_id(tenant, job_id)
    item = contract.split_batch_item_job_id(job_id)
    record, note, manifest = await asyncio.gather(
        client.result(job_id),
        _read_note(client, job_id),
        client.batch_manifest(item[0]) if item is not None else _nothing(),
    )
    if item is not None and manifest is not None and item[1] < manifest.count:
        if manifest.tenant != tenant:
            return False, None
        if record is not None:
            latest = batches.latest_retry(await client.batch_retries(item[0]))
            if batches.is_stale(record, latest.get(item[1])):
                record = None
        return True, record
    if record is not None:
        return record.tenant == tenant, record
    return note is not None and note.get("tenant") == tenant, None


async def _read_note(client: ReportFarmClient, job_id: str) -> dict[str, Any] | None:
    try:
        note = json.loads(await client.blobs.get(contract.job_note_blob(job_id)))
    except KeyError:
        return None
    return note if isinstance(note, dict) else None


async def _nothing() -> None:
    return None


async def get_report(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    if request.query.get("format") == "pdf":
        return await get_report_pdf(request)
    visible, record = await find_report(request, job_id)
    if not visible:
        return problem(404, f"no report {job_id}")
    return web.json_response(status_body(job_id, record))


async def get_report_pdf(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    visible, record = await find_report(request, job_id)
    if not visible:
        return problem(404, f"no report {job_id}")
    if record is None:
        return problem(409, "the report is not ready yet", retry_after=1, state="pending")
    if record.state != "succeeded":
        return problem(409, f"the report failed: {record.error}", state=record.state)
    return await _pdf(request, record)
