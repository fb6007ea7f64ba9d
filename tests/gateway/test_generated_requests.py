"""No input yields a 500 or an error that is not JSON (issue 25): hypothesis throws generated
methods, paths, query strings, headers (bytes that are not UTF-8 included), bodies (JSON, hostile
fragments, bytes) and encodings (gzip, deflate, a gzip header on what is not gzip) at every route
of a real gateway (real Azurite), over a bare socket so nothing is tidied on the way. Each answer
must be a 2xx, or a 4xx (503 with Retry-After) whose body is JSON, within a bounded time; a probe
in another thread asks /healthz all along and must always be answered (RESPONSIVE_S).
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reportfarm import azurite

from .conftest import TOKENS
from .strategies import bodies
from .threaded import ThreadedGateway

pytestmark = [pytest.mark.azurite]

ANSWER_BOUND_S = 20.0
"""A generated request is answered within this (bodies here are small; 408 comes at 5 s)."""
RESPONSIVE_S = 1.0
"""Every probe of /healthz is answered within this. Here the probe shares one interpreter lock
with hypothesis generating inputs and with the gateway's thread, so this bound is looser than the
100 ms that test_hostile_bodies holds the loop to (its probe runs in the gateway's own loop)."""

ROUTES = [
    "/v1/reports",
    "/v1/reports/{id}",
    "/v1/reports/{id}/pdf",
    "/v1/batches",
    "/v1/batches/{id}",
    "/v1/batches/{id}/retry",
    "/v1/batches/{id}/pdf",
    "/healthz",
    "/readyz",
    "/openapi.json",
    "/{id}",
    "/v1/{id}",
]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "application/x-ndjson",
    "text/csv",
    "multipart/form-data; boundary=x",
    "",
]

_ID_CHARS = st.sampled_from([*"abcXYZ019._-~", "%25", "%2F", "%00", "%F0%9F%98%80", "%ED%A0%80"])
_header_bytes = st.binary(max_size=40).map(
    lambda raw: raw.replace(b"\r", b"").replace(b"\n", b"").replace(b"\x00", b"")
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, bytes]:
    method = draw(st.sampled_from(METHODS))
    path = draw(st.sampled_from(ROUTES)).replace(
        "{id}", draw(st.lists(_ID_CHARS, min_size=1, max_size=12).map("".join))
    )
    query = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["batch_id", "template", "format", "item_webhooks", "x"]),
                st.sampled_from(["a", "pdf", "1", "", "%FF", "x" * 200]),
            ),
            max_size=2,
        )
    )
    if query:
        path += "?" + "&".join(f"{name}={value}" for name, value in query)
    headers = [b"Host: gateway"]
    token = draw(st.sampled_from(["acme", "none", "bytes", "garbage"]))
    if token == "acme":
        headers.append(f"Authorization: Bearer {TOKENS['acme']}".encode())
    elif token == "bytes":
        headers.append(b"Authorization: Bearer " + draw(_header_bytes))
    elif token == "garbage":
        headers.append(b"Authorization: " + draw(_header_bytes))
    kind = draw(st.sampled_from(TYPES))
    if kind:
        headers.append(f"Content-Type: {kind}".encode())
    if draw(st.booleans()):
        headers.append(b"Idempotency-Key: " + draw(_header_bytes))
    if draw(st.booleans()):
        headers.append(b"X-" + draw(st.sampled_from([b"A", b"B"])) + b": " + draw(_header_bytes))
    body = draw(bodies) if method in ("POST", "PUT", "PATCH") or draw(st.booleans()) else b""
    encoding = draw(st.sampled_from(["", "gzip", "deflate", "gzip-lie", "br-lie", "x-unknown"]))
    if encoding == "gzip":
        body = gzip.compress(body)
    elif encoding == "deflate":
        body = zlib.compress(body)
    if encoding:
        name = encoding.removesuffix("-lie")
        headers.append(f"Content-Encoding: {name}".encode())
    headers.append(f"Content-Length: {len(body)}".encode())
    head = f"{method} {path} HTTP/1.1\r\n".encode() + b"\r\n".join(headers)
    return head, body


def exchange(url: str, head: bytes, body: bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_BOUND_S) as sock:
        sock.sendall(head + b"\r\nConnection: close\r\n\r\n" + body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    header_block, _, content = rest.partition(b"\r\n\r\n")
    headers = {}
    for line in header_block.split(b"\r\n"):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, content


class Probe:
    """Asks /healthz every 20 ms from its own thread; keeps every latency."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            started = time.perf_counter()
            status, _, _ = exchange(self.url, b"GET /healthz HTTP/1.1\r\nHost: x", b"")
            assert status == 200
            self.seen.append(time.perf_counter() - started)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture(scope="module")
def fuzzed(azurite_server: azurite.Azurite) -> Iterator[tuple[str, Probe, list[Any]]]:
    with (
        ThreadedGateway(azurite_server, name="fuzz", body_read_s=5.0) as gateway,
        Probe(gateway.url) as probe,
    ):
        answers: list[Any] = []
        yield gateway.url, probe, answers
    statuses: dict[int, int] = {}
    for status in answers:
        statuses[status] = statuses.get(status, 0) + 1
    print(f"\nstatuses of {len(answers)} generated requests: {dict(sorted(statuses.items()))}")
    if probe.seen:
        print(f"/healthz during them: n={len(probe.seen)} max={max(probe.seen) * 1e3:.1f} ms")


@given(request=requests())
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_no_generated_request_gets_a_500_or_an_error_that_is_not_json(
    request: tuple[bytes, bytes], fuzzed: tuple[str, Probe, list[Any]]
) -> None:
    url, probe, answers = fuzzed
    head, body = request
    started = time.perf_counter()
    status, headers, content = exchange(url, head, body)
    seconds = time.perf_counter() - started
    answers.append(status)
    assert seconds < ANSWER_BOUND_S, (head, seconds)
    assert status < 500 or (status == 503 and "retry-after" in headers), (head, body, content)
    if status >= 400:
        assert headers.get("content-type", "").startswith("application/json"), (head, content)
        assert "error" in json.loads(content)
    assert not probe.seen or max(probe.seen) < RESPONSIVE_S, max(probe.seen)
