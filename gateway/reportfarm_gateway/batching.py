"""Batches on the bulk lane.

- ``POST /v1/batches``: a JSON array, or JSONL (``application/x-ndjson``), of items, each
  ``{"template"?, "data": {...}, "pdf"?}`` or, with a ``template`` query parameter, a bare data
  object. Query: ``batch_id`` (re-posting the same id and items sends nothing new),
  ``template``, ``callback_url``, ``item_webhooks``. 202 (new) or 200 (existing), Location.
- ``GET /v1/batches/{id}``: counts, state (RUNNING, COMPLETED, PARTIAL_FAILED, FAILED), failed
  items with reasons. ``POST /v1/batches/{id}/retry``: resubmit the failed items only.
- ``GET /v1/batches/{id}/pdf``: the succeeded items' PDFs merged in item order.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from reportfarm import batches, contract
from reportfarm.client import BatchConflict, PreparedBatch, ReportFarmClient, Submission
from reportfarm_gateway import bodies, content_type, parsing, tenancy
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
from reportfarm_gateway.reports import (
    BadRequest,
    check_callback,
    finish_options,
    job_files,
    pdf_options,
)

_ITEM_FIELDS = frozenset({"template", "data", "pdf", "finish", "files"})
FAILED_LIMIT = 1_000


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/v1/batches", post_batch)
    router.add_get("/v1/batches/{batch_id}", get_batch)
    router.add_post("/v1/batches/{batch_id}/retry", retry_batch)
    router.add_get("/v1/batches/{batch_id}/pdf", get_batch_pdf)


def read_items(raw: bytes, *, jsonl: bool, cpu_s: float) -> list[Any]:
    """The items of a JSON array or JSONL body (strict JSON, see gateway.parsing); CPU work: run
    it off the loop."""
    if jsonl:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadRequest(f"the body is not UTF-8 text: {error}") from None
        lines = [(number, line) for number, line in enumerate(text.splitlines(), 1)]
        deadline = time.thread_time() + cpu_s
        items = []
        for n, line in lines:
            if line.strip():
                left = deadline - time.thread_time()
                if left <= 0:
                    raise BadRequest(f"the body took more than {cpu_s} s of CPU to parse")
                items.append(parsing.parse(line, what=f"line {n}", cpu_s=left))
        return items
    items = parsing.parse(raw, cpu_s=cpu_s)
    if not isinstance(items, list):
        raise BadRequest("the body is a JSON array of items (or JSONL, one item a line)")
    return items


def to_submission(item: Any, *, index: int, template: str | None) -> Submission:
    if not isinstance(item, dict):
        raise BadRequest(f"item {index}: an item is a JSON object")
    if not isinstance(item.get("data"), dict):
        if template is None:
            raise BadRequest(f"item {index}: no data object (or give a template parameter)")
        return Submission(template=template, data=item)
    unknown = sorted(set(item) - _ITEM_FIELDS)
    if unknown:
        raise BadRequest(f"item {index}: unknown field(s): {', '.join(unknown)}")
    name = item.get("template", template)
    if not isinstance(name, str):
        raise BadRequest(f"item {index}: no template")
    try:
        options = pdf_options(item.get("pdf"))
        finish = finish_options(item.get("finish"))
        files = job_files(item.get("files"), finish)
    except BadRequest as error:
        raise BadRequest(f"item {index}: {error}") from None
    return Submission(template=name, data=item["data"], pdf=options, finish=finish, files=files)


def _flag(value: str | None) -> bool:
    if value in (None, "", "0", "false"):
        return False
    if value in ("1", "true"):
        return True
    raise BadRequest("item_webhooks is true or false")


async def post_batch(request: web.Request) -> web.Response:
    """The body is read, parsed and sent while its share of the body budget is held."""
    budget, limit = request.app[BODIES], request.app[SETTINGS].max_body_bytes
    try:
        media = content_type.require(request, content_type.JSON | content_type.JSONL)
        async with bodies.received(request, budget, tenant=request[TENANT], limit=limit) as raw:
            return await _post_batch(request, raw, jsonl=media in content_type.JSONL)
    except bodies.BodyError as error:
        return refused(error)


async def _post_batch(request: web.Request, raw: bytes, *, jsonl: bool) -> web.Response:
    tenant = request[TENANT]
    settings = request.app[SETTINGS]
    client = request.app[CLIENT]
    query = request.query
    try:
        name = query.get("batch_id") or contract.new_job_id()
        batch_id = tenancy.stored_batch_id(tenant, name)
        item_webhooks = _flag(query.get("item_webhooks"))
        callback = await check_callback(request, query.get("callback_url"), tenant)
        prepared = await asyncio.to_thread(
            _prepare,
            raw,
            client=client,
            jsonl=jsonl,
            cpu_s=settings.parse_cpu_s,
            max_items=settings.max_batch_items,
            template=query.get("template"),
            batch_id=batch_id,
            tenant=tenant,
            callback_url=callback,
            item_webhooks=item_webhooks,
        )
    except _TooMany as error:
        return problem(413, str(error))
    except BadRequest as error:
        return problem(400, str(error))
    except contract.ContractError as error:
        return problem(400, str(error))
    answer = await backpressure(request, "bulk")
    if answer is not None:
        return answer
    try:
        submitted = await client.submit_prepared(prepared)
    except BatchConflict:
        return problem(409, f"batch {name} exists with other items")
    request.app[METRICS].jobs.labels(lane="bulk").inc(submitted.sent)
    location = f"/v1/batches/{name}"
    body = {
        "batch_id": name,
        "count": submitted.count,
        "created": submitted.created,
        "sent": submitted.sent,
        "links": {"status": location, "pdf": f"{location}/pdf"},
    }
    status = 202 if submitted.created else 200
    return web.json_response(body, status=status, headers={"Location": location})


class _TooMany(BadRequest):
    """More items than a batch may have (413)."""


def _prepare(
    raw: bytes,
    *,
    client: ReportFarmClient,
    jsonl: bool,
    cpu_s: float,
    max_items: int,
    template: str | None,
    batch_id: str,
    tenant: str,
    callback_url: str | None,
    item_webhooks: bool,
) -> PreparedBatch:
    """The whole batch parsed, built and checked as stored; nothing written (off the loop)."""
    raw_items = read_items(raw, jsonl=jsonl, cpu_s=cpu_s)
    if not raw_items:
        raise BadRequest("a batch has at least one item")
    if len(raw_items) > max_items:
        raise _TooMany(f"a batch has at most {max_items} items")
    items = [
        to_submission(item, index=index, template=template) for index, item in enumerate(raw_items)
    ]
    for index, item in enumerate(items):  # every item valid before anything is sent
        try:
            client.build_job(item)
        except contract.ContractError as error:
            raise BadRequest(f"item {index}: {error}") from None
    return client.prepare_batch(
        items,
        batch_id=batch_id,
        tenant=tenant,
        callback_url=callback_url,
        item_webhooks=item_webhooks,
    )


async def _owned_manifest(request: web.Request) -> contract.BatchManifest | None:
    try:
        batch_id = tenancy.stored_batch_id(request[TENANT], request.match_info["batch_id"])
    except contract.ContractError:
        return None
    manifest = await request.app[CLIENT].batch_manifest(batch_id)
    if manifest is None or manifest.tenant != request[TENANT]:
        return None
    return manifest


def _not_found(request: web.Request) -> web.Response:
    return problem(404, f"no batch {request.match_info['batch_id']}")


async def get_batch(request: web.Request) -> web.Response:
    manifest = await _owned_manifest(request)
    if manifest is None:
        return _not_found(request)
    status = await request.app[CLIENT].batch_status(manifest.batch_id)
    return web.json_response(status_body(status, name=request.match_info["batch_id"]))


def status_body(status: batches.BatchStatus, *, name: str) -> dict[str, Any]:
    """The batch's state as JSON, under the name its tenant gave it."""
    body = status.to_dict(failed_limit=FAILED_LIMIT)
    body["batch_id"] = name
    body["failed_items_truncated"] = len(status.failed_items) > FAILED_LIMIT
    location = f"/v1/batches/{name}"
    body["links"] = {"status": location, "retry": f"{location}/retry", "pdf": f"{location}/pdf"}
    return body


async def retry_batch(request: web.Request) -> web.Response:
    manifest = await _owned_manifest(request)
    if manifest is None:
        return _not_found(request)
    answer = await backpressure(request, "bulk")
    if answer is not None:
        return answer
    retried = await request.app[CLIENT].retry_batch(manifest.batch_id)
    request.app[METRICS].jobs.labels(lane="bulk").inc(len(retried))
    name = request.match_info["batch_id"]
    location = f"/v1/batches/{name}"
    body = {"batch_id": name, "retried": retried, "count": len(retried)}
    return web.json_response(body, status=202 if retried else 200, headers={"Location": location})


async def get_batch_pdf(request: web.Request) -> web.Response:
    manifest = await _owned_manifest(request)
    if manifest is None:
        return _not_found(request)
    settings = request.app[SETTINGS]
    if manifest.count > settings.max_merge_items:
        return problem(413, f"batches of more than {settings.max_merge_items} items are not merged")
    client = request.app[CLIENT]
    status = await client.batch_status(manifest.batch_id)
    if not status.final:
        return problem(409, "the batch is still running", retry_after=5, state=status.state)
    if not status.succeeded:
        return problem(409, "no item of the batch succeeded", state=status.state)
    pdfs = await client.batch_pdfs(manifest.batch_id)
    merged = await asyncio.to_thread(batches.merge_pdfs, [pdf for _, pdf in pdfs])
    return web.Response(
        body=merged,
        content_type="application/pdf",
        headers={
            "X-Reportfarm-Items": str(len(pdfs)),
            "X-Reportfarm-Batch-State": status.state,
        },
    )
