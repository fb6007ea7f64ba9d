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
from reportfarm.client import BatchConflict, PreparedBatch
from reportfarm_gateway import bodies, checking, content_type, tenancy
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
from reportfarm_gateway.reports import BadRequest, check_callback

FAILED_LIMIT = 1_000


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/v1/batches", post_batch)
    router.add_get("/v1/batches/{batch_id}", get_batch)
    router.add_post("/v1/batches/{batch_id}/retry", retry_batch)
    router.add_get("/v1/batches/{batch_id}/pdf", get_batch_pdf)


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
        prepared = await request.app[OFFLOADER].run(
            tenant,
            checking.check_batch,
            raw=raw,
            jsonl=jsonl,
            cpu_s=settings.parse_cpu_s,
            max_items=settings.max_batch_items,
            template=query.get("template"),
            batch_id=batch_id,
            tenant=tenant,
            callback_url=callback,
            item_webhooks=item_webhooks,
        )
    except BadRequest as error:
        return problem(400, str(error))
    except contract.ContractError as error:
        return problem(400, str(error))
    if not isinstance(prepared, PreparedBatch):
        return problem(prepared.status, prepared.detail)
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
