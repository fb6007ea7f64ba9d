"""The gateway's memory under concurrent large requests is bounded by its body budget.

A real gateway process (``reportfarm gateway``) on Azurite; its peak RSS (VmHWM) is read from
/proc after one large report, then in a second process after eight at once. Without the budget
(issue 11: one 50 MB report took the gateway from 66 to 318 MB) eight cost about eight times
one; with it, bodies past the budget wait unread, so eight cost about what the budget admits
at once (two bodies of the limit's size). The figures are printed; the test holds the ratio.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

import reportfarm
from reportfarm import azurite, contract
from reportfarm.settings import StorageSettings

from ..renderer.conftest import wait_for

pytestmark = [pytest.mark.azurite, pytest.mark.slow]

ROOT = Path(reportfarm.__file__).resolve().parents[1]
BODY_MB = 15
"""Each request: a report whose data is just under the farm's 16 MiB limit."""


def _status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for pid {pid}")


@contextlib.asynccontextmanager
async def gateway_process(storage: StorageSettings, name: str) -> AsyncIterator[tuple[int, str]]:
    port = azurite.free_port()
    assert storage.connection_string
    env = {
        **os.environ,
        "AZURE_STORAGE_CONNECTION_STRING": storage.connection_string,
        "REPORTFARM_QUEUE": name,
        "REPORTFARM_CONTAINER": name,
        "REPORTFARM_TOKENS": "acme=acme-token",
        "REPORTFARM_GATEWAY_PORT": str(port),
        "REPORTFARM_GATEWAY_DISPATCHER": "0",
        # Memory, not patience, is measured: on a loaded machine the eighth body may wait past
        # the default 30 s for room in the budget (a 503, tested in test_hardening.py).
        "REPORTFARM_GATEWAY_BODY_WAIT_S": "600",
        # This checkout's code, whatever is installed.
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / part) for part in ("", "renderer", "operator", "gateway")]
        ),
    }
    command = [sys.executable, "-m", "reportfarm.cli", "gateway"]
    process = await asyncio.create_subprocess_exec(*command, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:

            async def up() -> bool:
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{url}/healthz") as response:
                        return response.status == 200
                return False

            await wait_for(up, timeout=60)
        yield process.pid, url
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)


def large_report() -> bytes:
    rows = [
        {"word": f"w{index:07d}", "meaning": "释义" * 8, "score": index % 100, "tags": ["a"]}
        for index in range(BODY_MB * 2**20 // 160)  # about 157 bytes a row
    ]
    body = json.dumps({"template": "plain", "data": {"rows": rows}, "wait_s": 0}).encode()
    assert len(body) <= contract.MAX_DATA_BYTES
    return body


async def peak_growth(storage: StorageSettings, name: str, body: bytes, count: int) -> int:
    """Peak RSS minus idle RSS of a fresh gateway answering ``count`` such reports at once."""
    async with gateway_process(storage, name) as (pid, url), aiohttp.ClientSession() as http:
        idle = _status(pid, "VmRSS:")
        headers = {"Authorization": "Bearer acme-token", "Content-Type": "application/json"}

        async def one() -> int:
            async with http.post(f"{url}/v1/reports", data=body, headers=headers) as response:
                await response.read()
                return response.status

        statuses = await asyncio.gather(*(one() for _ in range(count)))
        assert set(statuses) == {202}, statuses
        return _status(pid, "VmHWM:") - idle


async def test_eight_large_requests_at_once_cost_about_the_budget_not_eight_bodies(
    storage: StorageSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    body = large_report()
    one = await peak_growth(storage, f"{storage.queue}a", body, 1)
    eight = await peak_growth(storage, f"{storage.queue}b", body, 8)
    with capsys.disabled():
        print(
            f"\ngateway peak RSS growth, {len(body) / 2**20:.1f} MiB reports: one {one >> 20} MiB, "
            f"eight at once {eight >> 20} MiB ({eight / one:.1f}x)"
        )
    assert eight < 4 * one, "memory grew with the number of large requests, not the budget"
