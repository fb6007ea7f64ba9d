"""Single reports on the interactive lane: the synchronous path and its status.

``POST /v1/reports`` ``{"template", "data", "wait_s"?, "pdf"?, "callback_url"?}`` sends one job
on the interactive lane and waits up to ``wait_s`` for its result record: 200 with the PDF when it
is ready in time, 422 when the job failed in time, else 202 with ``Location: /v1/reports/{id}``.
An ``Idempotency-Key`` header makes the job id (per tenant): the same key again sends nothing new.

``GET /v1/reports/{id}`` is the job's state as JSON; ``/pdf`` (or ``?format=pdf``) is its PDF.
Batch items are reports too, under their job ids (``<batch id>-<index:06d>``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from reportfarm import batches, contract, finishing, netpolicy
from reportfarm.client import ReportFarmClient, Submission
from reportfarm_gateway import bodies, content_type, parsing
from reportfarm_gateway.context import (
    BODIES,
    CLIENT,
    METRICS,
    SETTINGS,
    TENANT,
    backpressure,
    problem,
    refused,
)

logger = logging.getLogger(__name__)

_REPORT_FIELDS = frozenset({"template", "data", "wait_s", "pdf", "callback_url", "finish", "files"})
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


class BadRequest(ValueError):
    """The request cannot become a job; the message says why (400)."""


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


def pdf_options(value: object) -> contract.PdfOptions | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest("pdf must be an object of PDF options")
    try:
        options = contract.PdfOptions(**value)
        options.validate()  # every field's type too, as the contract reads it
    except (TypeError, contract.ContractError) as error:
        raise BadRequest(f"bad pdf options: {error}") from None
    return options


def finish_options(value: object) -> finishing.Finish | None:
    """The ``finish`` object as the contract reads it (its files are checked with the job)."""
    if value is None:
        return None
    nulls = _nulls(value, "finish")
    if nulls:
        raise BadRequest(f"leave out what you do not set, no null: {', '.join(nulls[:5])}")
    try:
        finish = finishing.Finish.from_dict(value)
    except finishing.FinishError as error:
        raise BadRequest(f"bad finish options: {error}") from None
    return None if finish.empty else finish


def _nulls(value: object, where: str) -> list[str]:
    """Where ``value`` (a small options object) holds a JSON null."""
    if value is None:
        return [where]
    if isinstance(value, dict):
        return [null for key, item in value.items() for null in _nulls(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [
            null for index, item in enumerate(value) for null in _nulls(item, f"{where}[{index}]")
        ]
    return []


MAX_FILES = finishing.MAX_ATTACHMENTS + 1
"""Files one job may bring: its attachments and a Factur-X XML."""


def job_files(value: object, finish: finishing.Finish | None = None) -> dict[str, bytes] | None:
    """``files``: an object of file name -> content in base64 (standard alphabet, padded), each
    named by ``finish`` (an attachment or the Factur-X XML), at most :data:`MAX_FILES`."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise BadRequest("files must be an object of file name -> base64 content")
    if len(value) > MAX_FILES:
        raise BadRequest(f"files holds {len(value)} files, more than {MAX_FILES}")
    used = _named_files(finish)
    files: dict[str, bytes] = {}
    for name, content in value.items():
        if not finishing.valid_file_name(name):
            raise BadRequest(f"file name {name[:100]!r} must be 1-100 of [A-Za-z0-9._-]")
        if name not in used:
            raise BadRequest(f"file {name!r} is not named by finish (attachments or facturx)")
        try:
            if not isinstance(content, str):
                raise binascii.Error("not text")
            files[name] = base64.b64decode(content, validate=True)
        except binascii.Error:
            raise BadRequest(f"file {name!r} is not base64 text") from None
        try:
            contract.check_data_size(len(files[name]), what=f"file {name!r}")
        except contract.ContractError as error:
            raise BadRequest(str(error)) from None
    return files


def _named_files(finish: finishing.Finish | None) -> set[str]:
    if finish is None:
        return set()
    named = {attachment.blob for attachment in finish.attachments}
    if finish.facturx is not None:
        named.add(finish.facturx.xml_blob)
    return named


def _job_id(tenant: str, key: str | None) -> str | None:
    if key is None:
        return None
    digest = hashlib.sha256(f"{tenant}\0{key}".encode()).hexdigest()
    return f"k{digest[:39]}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportRequest:
    """A POST /v1/reports checked in the form it is stored, before anything is written."""

    job: contract.Job
    files: Mapping[str, bytes] | None
    wait_s: float
    callback_url: object
    """Still to check against the network policy (that needs I/O)."""
    digest: str
    """Of the body's canonical JSON: an Idempotency-Key reused with another body is a 422."""
    keyed: bool


def read_report(
    raw: bytes,
    *,
    client: ReportFarmClient,
    tenant: str,
    key: str | None,
    default_wait_s: float,
    cpu_s: float,
) -> ReportRequest:
    """The request as a built job on the interactive lane (data measured as stored), its wait and
    its callback URL; or BadRequest / BodyError / ContractError. CPU work: run off the loop."""
    body = parsing.parse(raw, cpu_s=cpu_s)
    if not isinstance(body, dict):
        raise BadRequest("the body is a JSON object")
    unknown = sorted(set(body) - _REPORT_FIELDS)
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(unknown)}")
    nulls = sorted(key for key, value in body.items() if value is None)
    if nulls:
        raise BadRequest(f"leave out what you do not set, no null: {', '.join(nulls)}")
    wait_s = _seconds(body.get("wait_s", default_wait_s))
    if not isinstance(body.get("data"), dict):
        raise BadRequest("data must be a JSON object")
    if not isinstance(body.get("template"), str):
        raise BadRequest("template must be a template name")
    finish = finish_options(body.get("finish"))
    submission = Submission(
        template=body["template"],
        data=body["data"],
        job_id=_job_id(tenant, key),
        pdf=pdf_options(body.get("pdf")),
        finish=finish,
        files=job_files(body.get("files"), finish),
        tenant=tenant,
        lane="interactive",
    )
    callback_url = body.get("callback_url")
    job = stored_job(client, dataclasses.replace(submission, callback_url=None))
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return ReportRequest(
        job=job,
        files=submission.files,
        wait_s=wait_s,
        callback_url=callback_url,
        digest=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        keyed=key is not None,
    )


def stored_job(client: ReportFarmClient, submission: Submission) -> contract.Job:
    """The job as the client will send it, its data measured as it will be stored (the farm's
    limit counts the stored bytes, not the request's): ContractError past the limit."""
    job = client.build_job(submission)
    if not contract.fits_inline(job):
        contract.check_data_size(
            len(contract.payload_bytes(job.data or {})), what="data (as stored)"
        )
    return job


def _seconds(value: object) -> float:
    """``wait_s`` as a float: any JSON number from 0 up (past a float's range is a 400 too)."""
    try:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        seconds = float(value)
    except (ValueError, OverflowError):
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise BadRequest("wait_s must be a number of seconds, 0 or more")
    return seconds


def idempotency_key(request: web.Request) -> str | None:
    """The Idempotency-Key header: 1 to 256 printable ASCII characters (400 otherwise)."""
    key = request.headers.get("Idempotency-Key")
    if key is not None and not (0 < len(key) <= 256 and key.isascii() and key.isprintable()):
        raise BadRequest("Idempotency-Key is 1 to 256 printable ASCII characters")
    return key


async def post_report(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    client = request.app[CLIENT]
    try:
        content_type.require(request, content_type.JSON)
        async with bodies.received(
            request, request.app[BODIES], tenant=request[TENANT], limit=settings.max_body_bytes
        ) as raw:
            accepted = await _accept(request, raw)
    except bodies.BodyError as error:
        return refused(error)
    if isinstance(accepted, web.StreamResponse):
        return accepted
    job_id, wait_s = accepted  # the body and its data are gone: only the wait is left
    wait = min(wait_s, settings.max_wait_s)
    record = await await_record(
        client, job_id, wait_s=wait, poll_s=settings.poll_s, gone=lambda: _gone(request)
    )
    if _gone(request):  # nobody to answer: end now, which frees the tenant's in-flight slot
        request.app[METRICS].sync.labels(outcome="abandoned").inc()
        return web.Response(status=CLIENT_GONE)  # never sent; counted in the request metrics
    return await _answer(request, job_id, record)


async def _accept(request: web.Request, raw: bytes) -> tuple[str, float] | web.StreamResponse:
    """Parse, check and send the job: (its id, the wait asked for), or the error answer. Every
    check, in the form the job is stored, comes before anything is written."""
    client = request.app[CLIENT]
    settings = request.app[SETTINGS]
    try:
        wanted = await asyncio.to_thread(
            read_report,
            raw,
            client=client,
            tenant=request[TENANT],
            key=idempotency_key(request),
            default_wait_s=settings.default_wait_s,
            cpu_s=settings.parse_cpu_s,
        )
        callback = await check_callback(request, wanted.callback_url, request[TENANT])
    except BadRequest as error:
        return problem(400, str(error))
    except contract.ContractError as error:
        return problem(400, f"invalid job: {error}")
    job = dataclasses.replace(wanted.job, callback_url=callback)
    answer = await backpressure(request, "interactive")
    if answer is not None:
        return answer
    if wanted.keyed:  # the first request with this key owns the job id (a conditional write)
        created = await client.blobs.create(
            contract.job_note_blob(job.job_id), _note(job, wanted.digest), "application/json"
        )
        if not created:
            if await _noted_digest(client, job.job_id) != wanted.digest:
                return problem(422, "this Idempotency-Key was used with another body")
            return job.job_id, wanted.wait_s  # a repeated key sends nothing new
        await client.upload_files(job.job_id, wanted.files)
        await client.send_job(job)
    else:
        # Both at once: the sooner the job is on the lane, the sooner a renderer takes it. A job
        # whose note failed is still served; only its GET answers 404 until it has a record.
        await client.upload_files(job.job_id, wanted.files)
        noted, sent = await asyncio.gather(
            client.blobs.put(
                contract.job_note_blob(job.job_id),
                _note(job, wanted.digest),
                content_type="application/json",
            ),
            client.send_job(job),
            return_exceptions=True,
        )
        if isinstance(sent, BaseException):
            raise sent
        if isinstance(noted, BaseException):
            logger.warning("could not note job %s: %s", job.job_id, noted)
    request.app[METRICS].jobs.labels(lane="interactive").inc()
    return job.job_id, wanted.wait_s


async def _noted_digest(client: ReportFarmClient, job_id: str) -> str | None:
    try:
        return json.loads(await client.blobs.get(contract.job_note_blob(job_id))).get("digest")
    except KeyError:
        return None


def _gone(request: web.Request) -> bool:
    """Whether the client has closed its connection (aiohttp drops the transport then)."""
    return request.transport is None or request.transport.is_closing()


async def _answer(
    request: web.Request, job_id: str, record: contract.ResultRecord | None
) -> web.Response:
    if record is not None and record.state == "succeeded":
        request.app[METRICS].sync.labels(outcome="pdf").inc()
        return await _pdf(request, record)
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
) -> contract.ResultRecord | None:
    """Look for the job's record until ``wait_s`` passed: first after ``poll_s``, then less and
    less often (up to 4x), so many waiting requests do not flood the blob store. Stops (None)
    as soon as ``gone()`` says the client has left."""
    if not math.isfinite(wait_s):
        raise ValueError(f"wait_s {wait_s} is not a finite number of seconds")
    deadline = time.monotonic() + wait_s
    pause = poll_s
    while not gone():
        record = await client.result(job_id)
        left = deadline - time.monotonic()
        if record is not None or left <= 0:
            return record
        until = time.monotonic() + min(pause, left)
        # aiohttp signals no event when a client leaves: look at its flag every 50 ms.
        while (rest := until - time.monotonic()) > 0 and not gone():  # noqa: ASYNC110
            await asyncio.sleep(min(rest, _GONE_CHECK_S))
        pause = min(pause * 1.5, poll_s * 4)
    return None


def _note(job: contract.Job, digest: str) -> bytes:
    """The gateway's note of an accepted job: who owns it (for GET), its callback, and the
    digest of the body that made it (for a repeated Idempotency-Key)."""
    note = {
        "job_id": job.job_id,
        "tenant": job.tenant,
        "template": job.template,
        "lane": job.lane,
        "callback_url": job.callback_url,
        "submitted_at": job.submitted_at,
        "digest": digest,
    }
    return json.dumps(note).encode("utf-8")


async def _pdf(request: web.Request, record: contract.ResultRecord) -> web.Response:
    data = await request.app[CLIENT].download(record)
    return web.Response(
        body=data,
        content_type="application/pdf",
        headers={
            "X-Reportfarm-Job-Id": record.job_id,
            "Content-Location": f"/v1/reports/{record.job_id}/pdf",
        },
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
        "batch_id": record.batch_id,
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
