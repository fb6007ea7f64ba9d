"""The OpenAPI document matches reality: schemathesis sends generated requests (valid and
invalid) built from it to the real gateway (on Azurite) and checks every answer against it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, settings
from reportfarm_gateway import app as gateway_app
from reportfarm_gateway import openapi

from reportfarm import azurite

from .conftest import auth, gateway_settings

schema = schemathesis.openapi.from_dict(openapi.document())


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx: object, value: object) -> bytes:
    """An array as JSON Lines, one item a line. A generated non-array has no JSONL form: it is
    sent as a line that is not JSON, which the gateway must refuse as well."""
    if isinstance(value, list):
        return "\n".join(json.dumps(item) for item in value).encode("utf-8")
    return b"[not json"


pytestmark = [pytest.mark.azurite]


class ThreadedGateway:
    """The gateway on its own event loop in a thread (schemathesis' calls are synchronous)."""

    def __init__(self, server: azurite.Azurite) -> None:
        from reportfarm.settings import StorageSettings

        store = StorageSettings(
            connection_string=server.connection_string, queue="qschema", container="cschema"
        )
        self.settings = gateway_settings(store, max_wait_s=0.2, dispatcher=False)
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.url = ""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.runner = web.AppRunner(gateway_app.create_app(self.settings), access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", 0).start())
        port = next(a[1] for a in self.runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}"
        self.started.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    def __enter__(self) -> ThreadedGateway:
        self.thread.start()
        assert self.started.wait(30)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


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
