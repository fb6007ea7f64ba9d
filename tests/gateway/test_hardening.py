"""The gateway against a careless or hostile caller (issue 11): strict JSON, deep nesting, clients
that leave while they wait, and the farm's one size limit. Real aiohttp app, real Azurite; no
renderer (nothing here needs a PDF), so a job accepted here stays pending."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from reportfarm_gateway import bodies, parsing
from reportfarm_gateway.context import BODIES, METRICS
from reportfarm_gateway.settings import GatewaySettings
from reportfarm_renderer.settings import RendererSettings

from reportfarm import contract
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings

from ..renderer.conftest import wait_for
from .conftest import Gateway, auth, gateway_settings, running_gateway

pytestmark = [pytest.mark.azurite]

SMALL_LIMIT = 1 * 2**20
"""The body limit these tests lower the gateway to (the setting may lower the contract's)."""


@pytest_asyncio.fixture
async def gateway(storage: StorageSettings) -> AsyncIterator[Gateway]:
    settings = gateway_settings(storage, in_flight=1, max_body_bytes=SMALL_LIMIT, dispatcher=False)
    async with running_gateway(settings) as front:
        yield front


async def post(
    gateway: Gateway, path: str, text: str | bytes, *, content_type: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    headers = {**auth(), "Content-Type": content_type}
    async with gateway.http.post(gateway.at(path), data=text, headers=headers) as response:
        return response.status, await response.json()


def report(data: str = '{"name": "x"}', wait: str = "0") -> str:
    return f'{{"template": "plain", "data": {data}, "wait_s": {wait}}}'


# -- 4. strict JSON -------------------------------------------------------------------------------

NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e999"]


@pytest.mark.parametrize("number", NOT_FINITE)
@pytest.mark.parametrize("where", ["wait_s", "data", "batch", "jsonl"])
async def test_nan_and_infinity_are_refused_with_400(
    gateway: Gateway, number: str, where: str
) -> None:
    """Python's parser takes NaN and Infinity; a NaN wait_s passed ``< 0`` and never ended."""
    path, content_type = "/v1/reports", "application/json"
    text = {
        "wait_s": report(wait=number),
        "data": report(data=f'{{"score": {number}}}'),
        "batch": f'[{{"template": "plain", "data": {{"score": {number}}}}}]',
        "jsonl": f'{{"template": "plain", "data": {{"score": {number}}}}}\n',
    }[where]
    if where in ("batch", "jsonl"):
        path = "/v1/batches"
        content_type = "application/x-ndjson" if where == "jsonl" else content_type
    status, body = await post(gateway, path, text, content_type=content_type)
    assert status == 400, body
    assert "not strict JSON" in body["error"] and number.lstrip("-") in body["error"], body


async def test_a_client_that_leaves_while_waiting_frees_its_slot_at_once(
    gateway: Gateway,
) -> None:
    """The tenant may have one request in flight. A caller asks to wait 100 s for a report no
    renderer will make, then hangs up: the next request must be served, not refused with 429."""
    leaving = asyncio.create_task(post(gateway, "/v1/reports", report(wait="100")))

    async def waiting() -> bool:  # accepted, sent, and now waiting for its record
        sent = _sample(gateway, "reportfarm_gateway_jobs_submitted_total", lane="interactive")
        return sent == 1 and _in_flight(gateway) == 1

    await wait_for(waiting, timeout=30)
    leaving.cancel()  # the client closes its connection
    with pytest.raises(asyncio.CancelledError):
        await leaving

    async def served() -> tuple[int, dict[str, Any]] | None:
        status, body = await post(gateway, "/v1/reports", report(wait="0"))
        return (status, body) if status != 429 else None

    status, body = await wait_for(served, timeout=10)
    assert status == 202, body
    abandoned = _sample(gateway, "reportfarm_gateway_sync_reports_total", outcome="abandoned")
    assert abandoned == 1


def _in_flight(gateway: Gateway) -> float:
    return _sample(gateway, "reportfarm_gateway_requests_in_flight")


def _sample(gateway: Gateway, name: str, **labels: str) -> float:
    value = gateway.app[METRICS].registry.get_sample_value(name, labels)
    return value or 0.0


# -- 5. deep nesting --------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [parsing.MAX_DEPTH + 1, 100_000])
@pytest.mark.parametrize("where", ["report", "batch", "jsonl"])
async def test_deep_nesting_is_a_400_with_a_reason_on_every_json_endpoint(
    gateway: Gateway, depth: int, where: str
) -> None:
    deep = "[" * depth + "]" * depth
    text, path, content_type = {
        "report": (report(data=f'{{"deep": {deep}}}'), "/v1/reports", "application/json"),
        "batch": (f'[{{"template": "plain", "data": {{"d": {deep}}}}}]', "/v1/batches", "application/json"),
        "jsonl": (f'{{"template": "plain", "data": {{"d": {deep}}}}}\n', "/v1/batches", "application/x-ndjson"),
    }[where]  # fmt: skip
    status, body = await post(gateway, path, text, content_type=content_type)
    assert status == 400, body
    assert f"nested deeper than {parsing.MAX_DEPTH} levels" in body["error"], body


async def test_nesting_within_the_bound_is_accepted(gateway: Gateway) -> None:
    depth = parsing.MAX_DEPTH - 5
    deep = "[" * depth + '"[[[{{"' + "]" * depth  # brackets inside strings do not count
    status, body = await post(gateway, "/v1/reports", report(data=f'{{"deep": {deep}}}'))
    assert status == 202, body


# -- 6. one size limit --------------------------------------------------------------------------------


def test_the_gateway_the_client_and_the_renderer_share_one_limit() -> None:
    gateway = GatewaySettings.from_env({})
    renderer = RendererSettings.from_env({})
    assert gateway.max_body_bytes == renderer.max_data_bytes == contract.MAX_DATA_BYTES
    # A setting may lower the limit, never raise it past what the others accept.
    raised = {"REPORTFARM_GATEWAY_MAX_BODY_MB": "64", "REPORTFARM_MAX_DATA_MB": "64"}
    assert GatewaySettings.from_env(raised).max_body_bytes == contract.MAX_DATA_BYTES
    assert RendererSettings.from_env(raised).max_data_bytes == contract.MAX_DATA_BYTES


async def test_the_client_refuses_data_over_the_limit_before_uploading(
    storage: StorageSettings,
) -> None:
    assert storage.connection_string
    async with ReportFarmClient(
        storage.connection_string, queue=storage.queue, container=storage.container
    ) as client:
        await client.ensure()
        job = client.build_job(
            Submission(template="plain", data={"ballast": "x" * contract.MAX_DATA_BYTES})
        )
        with pytest.raises(contract.ContractError, match="over the farm's limit of 16777216"):
            await client.send_job(job)
        assert not await client.blobs.exists(contract.payload_blob(job.job_id))
        assert await client.queue.depth() == 0


async def raw_request(gateway: Gateway, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send a request's head and the given part of its body, then read the answer without
    sending the rest: only a gateway that answers before reading the whole body answers."""
    host, port = gateway.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        token = auth()["Authorization"]
        writer.write(f"{head}Host: {host}\r\nAuthorization: {token}\r\n\r\n".encode() + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(64 * 1024), timeout=30)
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest


@pytest.mark.parametrize("path", ["/v1/reports", "/v1/batches"])
async def test_a_declared_body_over_the_limit_is_413_before_a_byte_is_read(
    gateway: Gateway, path: str
) -> None:
    head = (
        f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {SMALL_LIMIT + 1}\r\n"
    )
    status, rest = await raw_request(gateway, head)  # no body at all
    assert status == 413, rest
    assert b"over the farm's limit of 1048576 bytes" in rest


async def test_a_chunked_body_is_413_as_soon_as_it_passes_the_limit(gateway: Gateway) -> None:
    chunk = b"[" + b" " * (256 * 1024)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5))  # > 1 MiB
    head = (
        "POST /v1/reports HTTP/1.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n"
    )
    status, rest = await raw_request(gateway, head, chunks)  # never the final 0-chunk
    assert status == 413, rest
    assert b"over the farm's limit" in rest


async def test_a_body_within_the_limit_is_read_whole(gateway: Gateway) -> None:
    ballast = "x" * (SMALL_LIMIT - 200)
    status, body = await post(gateway, "/v1/reports", report(data=json.dumps({"b": ballast})))
    assert status == 202, body


async def test_a_full_tenant_share_makes_its_request_wait_then_503_and_no_other(
    storage: StorageSettings,
) -> None:
    settings = gateway_settings(
        storage, tenant_body_budget_bytes=SMALL_LIMIT, body_wait_s=0.5, dispatcher=False
    )
    async with running_gateway(settings) as front:
        budget = front.app[BODIES]
        await budget.reserve("acme", SMALL_LIMIT)  # another body of acme's holds its share
        status, body = await post(front, "/v1/reports", report())
        assert status == 503 and "try again" in body["error"], body
        headers = {**auth("globex"), "Content-Type": "application/json"}
        async with front.http.post(front.at("/v1/reports"), data=report(), headers=headers) as r:
            assert r.status == 202, await r.text()  # globex's share is its own
        await budget.give_back("acme", held=0, share=SMALL_LIMIT)
        status, body = await post(front, "/v1/reports", report())
        assert status == 202, body
        assert budget.in_use == 0 and budget.tenants == {}


async def test_unread_bodies_never_hold_the_budget(gateway: Gateway) -> None:
    """A 413 answered from the Content-Length reserves nothing."""
    budget: bodies.BodyBudget = gateway.app[BODIES]
    head = (
        "POST /v1/reports HTTP/1.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {10 * SMALL_LIMIT}\r\n"
    )
    statuses = await asyncio.gather(*(raw_request(gateway, head) for _ in range(8)))
    assert [status for status, _ in statuses] == [413] * 8
    assert budget.in_use == 0


# -- 1. (at the edge) margin templates are self-contained ---------------------------------------


async def test_a_header_template_with_an_external_resource_is_a_400(gateway: Gateway) -> None:
    header = '<link rel="stylesheet" href="https://fonts.example/x.css"><span class=pageNumber>'
    pdf = {"display_header_footer": True, "header_template": header}
    text = json.dumps({"template": "plain", "data": {}, "wait_s": 0, "pdf": pdf})
    status, body = await post(gateway, "/v1/reports", text)
    assert status == 400, body
    assert "header and footer templates may only use inline data: resources" in body["error"]
