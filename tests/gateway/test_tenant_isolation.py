"""One tenant can never slow, block or read another (issue 25), against a real gateway on real
Azurite (no renderer: jobs accepted here stay pending).

- Budgets per tenant first: stalled and flooding bodies of one tenant leave another tenant's p95
  within 2x of idle; a stalled body gets 408 at its deadline and gives its share back.
- Ids per tenant: two tenants racing on one batch id never share state; "not yours" and "not
  found" are the same answer, in about the same time.
- Input checked in its stored form before anything is written; Content-Type, duplicate keys,
  Idempotency-Key reuse, bytes that are not UTF-8 in headers, bad Content-Encoding.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from reportfarm_gateway import tenancy
from reportfarm_gateway.context import BODIES

from reportfarm import contract
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from . import rawhttp
from .conftest import TOKENS, Gateway, auth, gateway_settings, running_gateway

pytestmark = [pytest.mark.azurite]

JSON = {"Content-Type": "application/json"}


@pytest_asyncio.fixture
async def gateway(storage: StorageSettings) -> AsyncIterator[Gateway]:
    settings = gateway_settings(storage, dispatcher=False, body_read_s=5.0, body_wait_s=2.0)
    async with running_gateway(settings) as front:
        yield front


def report(**fields: Any) -> dict[str, Any]:
    return {"template": "plain", "data": {"name": "x"}, "wait_s": 0, **fields}


async def post(
    gateway: Gateway, path: str, body: Any, *, tenant: str = "acme", **headers: str
) -> tuple[int, Any, str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {**auth(tenant), **JSON, **headers}
    async with gateway.http.post(gateway.at(path), data=data, headers=sent) as answer:
        return answer.status, await answer.json(), answer.content_type


async def everything_stored(client: ReportFarmClient) -> list[str]:
    return await client.blobs.list("")


# -- budgets per tenant ----------------------------------------------------------------------------


async def _latencies(gateway: Gateway, count: int) -> list[float]:
    seen = []
    for _ in range(count):
        started = time.perf_counter()
        status, body, _ = await post(gateway, "/v1/reports", report(), tenant="globex")
        assert status == 202, body
        seen.append(time.perf_counter() - started)
    return seen


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


async def _stall(gateway: Gateway, declared: int) -> tuple[asyncio.StreamWriter, Any]:
    """A connection that declares a body of ``declared`` bytes and sends none of it."""
    host, port = gateway.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST /v1/reports HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKENS['acme']}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    return writer, reader


async def _trickle(gateway: Gateway, stop: asyncio.Event) -> None:
    """A 4 MiB body sent 64 KiB at a time, slowly, until ``stop``."""
    writer, _ = await _stall(gateway, 4 * 2**20)
    try:
        while not stop.is_set():
            writer.write(b" " * 65536)
            await writer.drain()
            await asyncio.sleep(0.05)
    except ConnectionError:
        pass
    finally:
        writer.close()


async def test_a_tenant_that_stalls_and_floods_bodies_leaves_others_within_2x_of_idle(
    gateway: Gateway,
) -> None:
    await _latencies(gateway, 5)  # warm
    idle = await _latencies(gateway, 60)
    stalls = [await _stall(gateway, contract.MAX_DATA_BYTES) for _ in range(4)]
    stop = asyncio.Event()
    floods = [asyncio.create_task(_trickle(gateway, stop)) for _ in range(6)]
    await asyncio.sleep(0.5)
    try:
        budget = gateway.app[BODIES]
        assert budget.tenant_in_use("acme") > 0 and budget.tenant_in_use("globex") == 0
        loaded = await _latencies(gateway, 60)
        acme_status, acme_body, _ = await post(gateway, "/v1/reports", report())
    finally:
        stop.set()
        await asyncio.gather(*floods)
        for writer, _ in stalls:
            writer.close()
    # Idle again after: on a machine shared with other test runs, the load drifts; the bound is
    # against the slower of the two idle phases.
    after = await _latencies(gateway, 60)
    baseline = max(p95(idle), p95(after))
    print(
        f"\nglobex POST /v1/reports: idle p50={statistics.median(idle) * 1e3:.1f} "
        f"p95={p95(idle) * 1e3:.1f} ms; with acme stalling 4x16 MiB and trickling 6x4 MiB: "
        f"p50={statistics.median(loaded) * 1e3:.1f} p95={p95(loaded) * 1e3:.1f} ms; idle after: "
        f"p95={p95(after) * 1e3:.1f} ms"
    )
    # acme waits on its own share (and is refused when it stays full); globex does not notice.
    assert acme_status in (202, 503), acme_body
    # Below 20 ms a p95 is the noise of a loaded 2-core machine: the bound starts there.
    assert p95(loaded) <= 2 * max(baseline, 0.02)


async def test_a_stalled_body_gets_408_at_its_deadline_and_gives_its_share_back(
    storage: StorageSettings,
) -> None:
    settings = gateway_settings(storage, dispatcher=False, body_read_s=1.0)
    async with running_gateway(settings) as front:
        writer, reader = await _stall(front, 1000)
        started = time.monotonic()
        answer = await asyncio.wait_for(reader.read(4096), timeout=30)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"did not arrive within 1 s" in answer
        assert 0.9 < time.monotonic() - started < 10
        budget = front.app[BODIES]
        assert budget.in_use == 0 and budget.tenants == {}


async def test_gzip_counts_inflated_bytes_and_bad_gzip_is_a_400(gateway: Gateway) -> None:
    bomb = gzip.compress(b"[" + b" " * (contract.MAX_DATA_BYTES + 10) + b"]")
    status, body, kind = await post(gateway, "/v1/reports", bomb, **{"Content-Encoding": "gzip"})
    assert (status, kind) == (413, "application/json"), body
    assert "over the farm's limit" in body["error"]
    status, body, kind = await post(
        gateway, "/v1/reports", b"not gzip at all", **{"Content-Encoding": "gzip"}
    )
    assert (status, kind) == (400, "application/json"), body
    small = gzip.compress(json.dumps(report()).encode())
    status, body, _ = await post(gateway, "/v1/reports", small, **{"Content-Encoding": "gzip"})
    assert status == 202, body
    assert gateway.app[BODIES].in_use == 0


# -- ids per tenant --------------------------------------------------------------------------------


def batch(template_data: str, count: int) -> list[dict[str, Any]]:
    return [{"template": "plain", "data": {"who": template_data, "i": i}} for i in range(count)]


@pytest.mark.parametrize("round_", range(3))
async def test_two_tenants_racing_on_one_batch_id_never_share_state(
    gateway: Gateway, client: ReportFarmClient, round_: int
) -> None:
    name = f"month-end-{round_}"
    (a_status, a, _), (g_status, g, _) = await asyncio.gather(
        post(gateway, f"/v1/batches?batch_id={name}", batch("acme", 3)),
        post(gateway, f"/v1/batches?batch_id={name}", batch("globex", 5), tenant="globex"),
    )
    assert (a_status, a["created"], a["count"]) == (202, True, 3), a
    assert (g_status, g["created"], g["count"]) == (202, True, 5), g
    assert a["batch_id"] == g["batch_id"] == name
    for tenant, count in (("acme", 3), ("globex", 5)):
        async with gateway.http.get(gateway.at(f"/v1/batches/{name}"), headers=auth(tenant)) as r:
            state = await r.json()
            assert (r.status, state["batch_id"], state["total"]) == (200, name, count), state
        stored = tenancy.stored_batch_id(tenant, name)
        items = await client.batch_items(stored)
        assert [item["data"]["who"] for item in items] == [tenant] * count
        manifest = await client.batch_manifest(stored)
        assert manifest is not None and manifest.tenant == tenant
        # The item job id the tenant knows is its own item.
        path = f"/v1/reports/{name}-000002"
        async with gateway.http.get(gateway.at(path), headers=auth(tenant)) as r:
            assert r.status == 200 and (await r.json())["job_id"] == f"{name}-000002"
    assert tenancy.stored_batch_id("acme", name) != tenancy.stored_batch_id("globex", name)


async def test_one_tenant_racing_itself_on_a_batch_id_creates_it_once(gateway: Gateway) -> None:
    same = await asyncio.gather(
        *(post(gateway, "/v1/batches?batch_id=twice", batch("acme", 4)) for _ in range(4))
    )
    assert sorted(body["created"] for _, body, _ in same) == [False, False, False, True], same
    other = await asyncio.gather(
        post(gateway, "/v1/batches?batch_id=other", batch("acme", 2)),
        post(gateway, "/v1/batches?batch_id=other", batch("acme", 3)),
    )
    assert sorted(status for status, _, _ in other) == [202, 409], other


async def _timed_get(gateway: Gateway, path: str) -> tuple[int, dict[str, Any], float]:
    started = time.perf_counter()
    async with gateway.http.get(gateway.at(path), headers=auth("globex")) as r:
        return r.status, await r.json(), time.perf_counter() - started


async def test_not_yours_and_not_found_are_the_same_answer_in_about_the_same_time(
    gateway: Gateway,
) -> None:
    status, posted, _ = await post(gateway, "/v1/reports", report())
    assert status == 202
    acme_job = posted["job_id"]
    status, _, _ = await post(gateway, "/v1/batches?batch_id=secret", batch("acme", 2))
    assert status == 202
    unknown = contract.new_job_id()
    pairs = [
        (f"/v1/reports/{acme_job}", f"/v1/reports/{unknown}"),
        ("/v1/reports/secret-000001", "/v1/reports/nosuch-000001"),
        ("/v1/batches/secret", "/v1/batches/nosuch"),
    ]
    for theirs, nobodys in pairs:
        times: dict[str, list[float]] = {theirs: [], nobodys: []}
        for _ in range(15):
            for path in (theirs, nobodys):
                status, body, seconds = await _timed_get(gateway, path)
                assert status == 404 and set(body) == {"error"}, body
                assert body["error"].endswith(path.rsplit("/", 1)[1])
                times[path].append(seconds)
        a, b = statistics.median(times[theirs]), statistics.median(times[nobodys])
        print(f"\n{theirs}: {a * 1e3:.1f} ms, {nobodys}: {b * 1e3:.1f} ms (medians of 15)")
        assert 0.5 < a / b < 2, (theirs, a, b)


# -- input checked in its stored form, before anything is written -------------------------------


BAD_TEXT = [
    pytest.param(report(data={"name": "\ud800"}), "data.name", id="data-value"),
    pytest.param(report(data={"\udfff": 1}), "data: a key", id="data-key"),
    pytest.param(report(data={"rows": [{"n": "ok"}, {"n": "\ufffe"}]}), "rows[1].n", id="nonchar"),
    pytest.param(
        report(finish={"watermark": {"text": "a\ud800"}}), "finish.watermark.text", id="watermark"
    ),
    pytest.param(
        report(finish={"metadata": {"title": "\udbff"}}), "finish.metadata.title", id="metadata"
    ),
    pytest.param(report(template="pl\ud800ain"), "template", id="template"),
]


def _escaped(body: Any) -> bytes:
    """JSON with lone surrogates as \\u escapes (json.dumps keeps them so, ensure_ascii)."""
    return json.dumps(body).encode()


@pytest.mark.parametrize(("body", "field"), BAD_TEXT)
async def test_text_that_cannot_be_stored_is_a_400_naming_the_field_and_nothing_is_written(
    gateway: Gateway, client: ReportFarmClient, body: dict[str, Any], field: str
) -> None:
    status, answer, kind = await post(gateway, "/v1/reports", _escaped(body))
    assert (status, kind) == (400, "application/json"), answer
    assert field in answer["error"], answer
    item = {key: value for key, value in body.items() if key != "wait_s"}
    files = {"files": {"a.csv": base64.b64encode(b"x").decode()}}
    status, answer, _ = await post(gateway, "/v1/batches", _escaped([report(), {**item, **files}]))
    assert status == 400 and field in answer["error"], answer
    assert await everything_stored(client) == []
    for lane_queue in client.queues.values():
        assert await lane_queue.depth() == 0


async def test_data_past_the_cap_once_stored_is_a_400_not_a_500_and_not_a_stuck_batch(
    gateway: Gateway, client: ReportFarmClient
) -> None:
    # "1e9" is 3 bytes in the body and "1000000000.0" 12 as stored: 5.6 MB grows past 16 MiB.
    numbers = '{"template": "plain", "wait_s": 0, "data": {"n": [' + ",".join(["1e9"] * 1_400_000)
    body = (numbers + "]}}").encode()
    assert len(body) < contract.MAX_DATA_BYTES
    status, answer, kind = await post(gateway, "/v1/reports", body)
    assert (status, kind) == (400, "application/json"), answer
    assert "as stored" in answer["error"] and "over the farm's limit" in answer["error"]
    item = numbers.replace('"wait_s": 0, ', "") + "]}}"
    status, answer, _ = await post(gateway, "/v1/batches", f"[{item}]".encode())
    assert status == 400 and "as stored" in answer["error"], answer
    assert await everything_stored(client) == []


async def test_an_integer_past_a_float_and_too_many_files_are_400s(gateway: Gateway) -> None:
    body = json.dumps(report()).replace('"wait_s": 0', '"wait_s": 1' + "0" * 400).encode()
    status, answer, _ = await post(gateway, "/v1/reports", body)
    assert status == 400 and "integer of 401 digits" in answer["error"], answer
    many = {f"f{i}.txt": base64.b64encode(b"x").decode() for i in range(300)}
    status, answer, _ = await post(gateway, "/v1/reports", report(files=many))
    assert status == 400 and "more than" in answer["error"], answer


# -- what a request says about itself --------------------------------------------------------------


async def test_a_body_of_another_content_type_is_a_415(gateway: Gateway) -> None:
    rows = b"template,name\nplain,x\n"
    for path in ("/v1/reports", "/v1/batches"):
        for kind in ("text/csv", "application/json; charset=latin-1", None):
            headers = {**auth(), **({"Content-Type": kind} if kind else {})}
            async with gateway.http.post(gateway.at(path), data=rows, headers=headers) as r:
                assert r.status == 415 and r.content_type == "application/json", kind
                assert "Content-Type" in (await r.json())["error"]


async def test_duplicate_keys_are_refused(gateway: Gateway) -> None:
    body = b'{"template": "plain", "data": {"a": 1, "a": 2}, "wait_s": 0}'
    status, answer, _ = await post(gateway, "/v1/reports", body)
    assert status == 400 and "'a' appears more than once" in answer["error"], answer


async def test_an_idempotency_key_reused_with_another_body_is_a_422(gateway: Gateway) -> None:
    key = {"Idempotency-Key": "order-7"}
    first = await post(gateway, "/v1/reports", report(data={"n": 1}), **key)
    again = await post(gateway, "/v1/reports", report(data={"n": 1}), **key)
    assert first[0] == again[0] == 202 and first[1]["job_id"] == again[1]["job_id"]
    other = await post(gateway, "/v1/reports", report(data={"n": 2}), **key)
    assert (other[0], other[2]) == (422, "application/json"), other
    assert "another body" in other[1]["error"]
    raced = await asyncio.gather(
        *(
            post(gateway, "/v1/reports", report(data={"n": n}), **{"Idempotency-Key": "r"})
            for n in (1, 2)
        )
    )
    assert sorted(status for status, _, _ in raced) == [202, 422], raced


@pytest.mark.parametrize(
    ("header", "status"),
    [
        pytest.param(b"Authorization: Bearer \xff\xfe", 401, id="authorization"),
        pytest.param(b"Idempotency-Key: k\xe9y", 400, id="idempotency-key"),
    ],
)
async def test_header_bytes_that_are_not_utf8_are_a_json_4xx(
    gateway: Gateway, header: bytes, status: int
) -> None:
    body = json.dumps(report()).encode()
    token = f"Authorization: Bearer {TOKENS['acme']}\r\n".encode()
    head = (
        b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + (b"" if header.startswith(b"Authorization") else token)
        + header
        + f"\r\nContent-Length: {len(body)}".encode()
    )
    answer = await rawhttp.exchange(gateway.url, head, body)
    assert (answer.status, answer.content_type) == (status, "application/json"), answer
    json.loads(answer.body)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/nope", 404), ("DELETE", "/v1/reports", 405), ("PUT", "/healthz", 405)],
)
async def test_aiohttps_own_errors_are_json(
    gateway: Gateway, method: str, path: str, status: int
) -> None:
    async with gateway.http.request(method, gateway.at(path), headers=auth()) as r:
        assert (r.status, r.content_type) == (status, "application/json")
        assert "error" in await r.json()


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: \x01", id="control-char-in-header"),
        pytest.param(b"GET /healthz HTTP/9.9\r\nHost: x", id="bad-version"),
        pytest.param(b"G@T /healthz HTTP/1.1\r\nHost: x", id="bad-method"),
    ],
)
async def test_requests_aiohttp_cannot_parse_get_a_json_400(gateway: Gateway, head: bytes) -> None:
    answer = await rawhttp.exchange(gateway.url, head)
    assert answer.status in (400, 505) and answer.content_type == "application/json", answer
    assert "error" in json.loads(answer.body)
