"""SIGTERM to the real gateway process: /readyz turns 503 at once while the listener still serves
new requests for the shutdown delay; then the listener closes and a request already in flight
still gets its answer; the process exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from reportfarm import azurite
from reportfarm.settings import StorageSettings

from .conftest import TOKENS, auth

pytestmark = pytest.mark.timeout(120)

DELAY_S = 2.0


def _start(storage: StorageSettings, port: int) -> subprocess.Popen[bytes]:
    assert storage.connection_string
    env = {
        **os.environ,
        "AZURE_STORAGE_CONNECTION_STRING": storage.connection_string,
        "REPORTFARM_QUEUE": storage.queue,
        "REPORTFARM_CONTAINER": storage.container,
        "REPORTFARM_TOKENS": ",".join(f"{t}={k}" for t, k in TOKENS.items()),
        "REPORTFARM_GATEWAY_DISPATCHER": "0",
        "REPORTFARM_GATEWAY_SHUTDOWN_DELAY_S": str(DELAY_S),
        "REPORTFARM_GATEWAY_SHUTDOWN_TIMEOUT_S": "30",
    }
    argv = [str(Path(sys.executable).parent / "reportfarm"), "gateway", "--port", str(port)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def _status(http: aiohttp.ClientSession, url: str) -> int | None:
    try:
        async with http.get(url) as response:
            return response.status
    except aiohttp.ClientConnectionError:
        return None


async def test_sigterm_drops_readiness_first_then_finishes_requests_in_flight(
    storage: StorageSettings, client: object
) -> None:
    port = azurite.free_port()
    base = f"http://127.0.0.1:{port}"
    process = _start(storage, port)
    try:
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + 60
            while await _status(http, f"{base}/readyz") != 200:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the gateway never became ready"
                await asyncio.sleep(0.2)

            # No renderer: a synchronous report waits its whole wait_s, then answers 202.
            wait_s = DELAY_S + 3
            body = {"template": "plain", "data": {"name": "in flight"}, "wait_s": wait_s}
            in_flight = asyncio.ensure_future(
                http.post(f"{base}/v1/reports", json=body, headers=auth())
            )
            await asyncio.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()

            # Readiness drops at once; the listener still takes new requests meanwhile.
            while (status := await _status(http, f"{base}/readyz")) == 200:
                assert time.monotonic() - signalled < DELAY_S / 2, "readiness did not drop"
                await asyncio.sleep(0.05)
            assert status == 503
            quick = {"template": "plain", "data": {"name": "late"}, "wait_s": 0}
            async with http.post(f"{base}/v1/reports", json=quick, headers=auth()) as response:
                assert response.status == 202, await response.text()
            assert time.monotonic() - signalled < DELAY_S

            # Then the listener closes while the first request is still waiting.
            while await _status(http, f"{base}/healthz") is not None:
                assert time.monotonic() - signalled < DELAY_S + 10, "the listener never closed"
                await asyncio.sleep(0.1)
            assert not in_flight.done()
            async with await in_flight as response:
                assert response.status == 202, await response.text()
                assert (await response.json())["job_id"]
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
