"""Query strings as the OpenAPI document declares them: an unknown parameter (a typo), one given
twice, or a value outside its schema is a 400 naming it, and nothing is queued. Pure checks of the
rules, then the real gateway on real Azurite (no renderer: nothing here needs a PDF)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from multidict import MultiDict
from reportfarm_gateway import openapi, queries
from reportfarm_gateway.context import METRICS

from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from .conftest import Gateway, auth, gateway_settings, running_gateway

RULES = queries.rules_of(openapi.document())
BATCHES = RULES[("POST", "/v1/batches")]


def test_every_v1_call_has_rules_and_the_service_calls_none() -> None:
    document = openapi.document()
    v1 = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
        if path.startswith("/v1/")
    }
    assert set(RULES) == v1
    assert ("GET", "/healthz") not in RULES
    assert set(BATCHES) == {"batch_id", "template", "callback_url", "item_webhooks"}


def test_the_document_uses_only_keywords_the_gateway_checks() -> None:
    for rules in RULES.values():
        for schema in rules.values():
            assert set(schema) <= queries.KEYWORDS, schema


def test_every_v1_call_documents_the_400() -> None:
    for path, operations in openapi.document()["paths"].items():
        for operation in operations.values():
            assert ("400" in operation["responses"]) == path.startswith("/v1/"), path


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ([("templte", "plain")], "unknown query parameter(s) 'templte'"),
        ([("batch_id", "a"), ("batch_id", "b")], "batch_id is given 2 times"),
        ([("item_webhooks", "yes")], "item_webhooks is one of true, false, 1, 0"),
        ([("template", "../etc")], "template must match"),
        ([("callback_url", "https://x.example/" + "a" * 2100)], "at most 2048 characters"),
    ],
)
def test_what_is_refused_is_named(query: list[tuple[str, str]], expected: str) -> None:
    found = queries.problems(MultiDict(query), BATCHES)
    assert len(found) == 1
    assert expected in found[0]


def test_a_query_within_the_rules_has_no_problem() -> None:
    query = MultiDict(
        [
            ("batch_id", "b-1"),
            ("template", "plain"),
            ("item_webhooks", "true"),
            ("callback_url", "https://hooks.example/x"),
        ]
    )
    assert queries.problems(query, BATCHES) == []
    assert queries.problems(MultiDict(), BATCHES) == []


def test_many_unknown_parameters_are_counted_not_all_echoed() -> None:
    query = MultiDict([(f"p{index}", "1") for index in range(40)])
    (found,) = queries.problems(query, RULES[("GET", "/v1/batches/{batch_id}")])
    assert "and 35 more" in found
    assert "(this call takes: none)" in found


# -- the real gateway ------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def gateway(storage: StorageSettings) -> AsyncIterator[Gateway]:
    async with running_gateway(gateway_settings(storage, dispatcher=False)) as front:
        yield front


async def call(
    gateway: Gateway, method: str, path: str, params: list[tuple[str, str]], **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    async with gateway.http.request(
        method, gateway.at(path), params=MultiDict(params), headers=auth(), **kwargs
    ) as answer:
        return answer.status, await answer.json()


@pytest.mark.azurite
@pytest.mark.parametrize(
    ("method", "path", "params", "named"),
    [
        ("POST", "/v1/batches", [("templte", "plain")], "templte"),
        ("POST", "/v1/batches", [("template", "plain"), ("template", "other")], "2 times"),
        ("POST", "/v1/batches", [("item_webhooks", "yes")], "item_webhooks"),
        ("GET", "/v1/reports/j-1", [("format", "xml")], "format is one of json, pdf"),
        ("GET", "/v1/reports/j-1/pdf", [("download", "1")], "download"),
        ("POST", "/v1/reports", [("wait_s", "5")], "wait_s"),
        ("GET", "/v1/batches/b-1", [("page", "2")], "page"),
    ],
)
async def test_the_gateway_refuses_the_query_and_queues_nothing(
    gateway: Gateway,
    client: ReportFarmClient,
    method: str,
    path: str,
    params: list[tuple[str, str]],
    named: str,
) -> None:
    body = [{"data": {"name": "x"}}] if path == "/v1/batches" else None
    if path == "/v1/reports":
        body = {"template": "plain", "data": {"name": "x"}}  # type: ignore[assignment]
    status, answer = await call(gateway, method, path, params, json=body)
    assert status == 400, answer
    assert named in answer["error"]
    for lane_queue in client.queues.values():
        assert await lane_queue.depth() == 0
    rejected = gateway.app[METRICS].rejected.labels(reason="query")._value.get()
    assert rejected == 1


@pytest.mark.azurite
async def test_a_valid_query_still_reaches_the_handler(
    gateway: Gateway, client: ReportFarmClient
) -> None:
    params = [("template", "plain"), ("batch_id", "q-ok"), ("item_webhooks", "false")]
    status, answer = await call(
        gateway, "POST", "/v1/batches", params, json=[{"name": "a"}, {"name": "b"}]
    )
    assert status == 202, answer
    assert answer["count"] == 2
    status, answer = await call(gateway, "GET", "/v1/batches/q-ok", [])
    assert status == 200, answer
