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
from typing import Any

from aiohttp import web

from reportfarm import batches, contract
from reportfarm.client import BatchConflict, Submission
from reportfarm_gateway import bodies
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
_JSONL_TYPES = frozenset({"application/x-ndjson", "application/jsonl", "application/jsonlines"})
FAILED_LIMIT = 1_000


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/v1/batches", post_batch)
    router.add_get("/v1/batches/{batch_id}", get_batch)
    router.add_post("/v1/batches/{batch_id}/retry", retry_batch)
    router.add_get("/v1/batches/{batch_id}/pdf", get_batch_pdf)


def read_items(request: web.Request, raw: bytes) -> list[Any]:
    """The items of a JSON array or JSONL body (strict JSON, see gateway.bodies)."""
    if request.content_type in _JSONL_TYPES:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadRequest(f"the body is not UTF-8 text: {error}") from None
        lines = [(number, line) for number, line in enumerate(text.splitlines(), 1)]
        return [bodies.parse(line, what=f"line {n}") for n, line in lines if line.strip()]
    items = bodies.parse(raw)
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
        files = job_files(item.get("files"))
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
        async with bodies.received(request, budget, limit=limit) as raw:
            return await _post_batch(request, raw)
    except bodies.BodyError as error:
        return refused(error)


async def _post_batch(request: web.Request, raw: bytes) -> web.Response:
    tenant = request[TENANT]
    settings = request.app[SETTINGS]
    client = request.app[CLIENT]
    query = request.query
    try:
        batch_id = query.get("batch_id")
        if batch_id is not None:
            contract.validate_batch_id(batch_id)
        raw_items = read_items(request, raw)
        if not raw_items:
            raise BadRequest("a batch has at least one item")
        if len(raw_items) > settings.max_batch_items:
            return problem(413, f"a batch has at most {settings.max_batch_items} items")
        items = [
            to_submission(item, index=index, template=query.get("template"))
            for index, item in enumerate(raw_items)
        ]
        item_webhooks = _flag(query.get("item_webhooks"))
        callback = await check_callback(request, query.get("callback_url"), tenant)
        for index, item in enumerate(items):  # every item valid before anything is sent
            try:
                client.build_job(item)
            except contract.ContractError as error:
                raise BadRequest(f"item {index}: {error}") from None
    except BadRequest as error:
        return problem(400, str(error))
    except contract.ContractError as error:
        return problem(400, str(error))
    answer = await backpressure(request, "bulk")
    if answer is not None:
        return answer
    try:
        submitted = await client.submit_batch(
            items,
            batch_id=batch_id,
            tenant=tenant,
            callback_url=callback,
            item_webhooks=item_webhooks,
        )
    except BatchConflict as error:
        return problem(409, str(error))
    request.app[METRICS].jobs.labels(lane="bulk").inc(submitted.sent)
    location = f"/v1/batches/{submitted.batch_id}"
    body = {
        "batch_id": submitted.batch_id,
        "count": submitted.count,
        "created": submitted.created,
        "sent": submitted.sent,
        "links": {"status": location, "pdf": f"{location}/pdf"},
    }
    status = 202 if submitted.created else 200
    return web.json_response(body, status=status, headers={"Location": location})


async def _owned_manifest(request: web.Request) -> contract.BatchManifest | None:
    batch_id = request.match_info["batch_id"]
    try:
        contract.validate_batch_id(batch_id)
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
    return web.json_response(status_body(status))


def status_body(status: batches.BatchStatus) -> dict[str, Any]:
    body = status.to_dict(failed_limit=FAILED_LIMIT)
    body["failed_items_truncated"] = len(status.failed_items) > FAILED_LIMIT
    location = f"/v1/batches/{status.batch_id}"
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
    location = f"/v1/batches/{manifest.batch_id}"
    body = {"batch_id": manifest.batch_id, "retried": retried, "count": len(retried)}
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
