"""The OpenAPI document matches reality: schemathesis sends generated requests (valid and
invalid) built from it to the real gateway (on Azurite) and checks every answer against it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from reportfarm_gateway import openapi

from reportfarm import azurite

from .conftest import auth
from .threaded import ThreadedGateway

schema = schemathesis.openapi.from_dict(openapi.document())


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx: object, value: object) -> bytes:
    """An array as JSON Lines, one item a line. A generated non-array has no JSONL form: it is
    sent as a line that is not JSON, which the gateway must refuse as well."""
    if isinstance(value, list):
        return "\n".join(json.dumps(item) for item in value).encode("utf-8")
    return b"[not json"


pytestmark = [pytest.mark.azurite]


@pytest.fixture(scope="module")
def gateway_url(azurite_server: azurite.Azurite) -> Iterator[str]:
    with ThreadedGateway(azurite_server) as gateway:
        yield gateway.url


def test_the_served_document_is_the_one_tested(gateway_url: str) -> None:
    served = requests.get(f"{gateway_url}/openapi.json", timeout=10)
    assert served.status_code == 200
    assert served.json() == openapi.document()


@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_answer_matches_the_document(case: schemathesis.Case, gateway_url: str) -> None:
    # The gateway allows private callbacks here, so no generated host name is looked up.
    case.call_and_validate(
        base_url=gateway_url,
        headers=auth(),
        timeout=30,
        # Some rules are not in the schema's language (pdf width goes with height; a bare data
        # item needs the template parameter): a schema-valid request may still get a 400.
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
    )
