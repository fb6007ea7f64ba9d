"""Priority lanes through the gateway: interactive reports sent while a bulk batch runs finish
long before the batch, and the batch keeps moving meanwhile (a share, not starvation)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from reportfarm.settings import StorageSettings

from .conftest import auth, farm

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, pytest.mark.slow]

BULK = 120


async def test_interactive_reports_overtake_a_running_bulk_batch(
    storage: StorageSettings, template_dir: Path
) -> None:
    bulk = [{"template": "slow", "data": {"name": f"b{i}", "busy_ms": 150}} for i in range(BULK)]
    async with farm(storage, template_dir) as gateway:
        async with gateway.http.post(
            gateway.at("/v1/batches"), json=bulk, headers=auth("globex")
        ) as posted:
            assert posted.status == 202
            batch_id = (await posted.json())["batch_id"]
        await asyncio.sleep(2)  # the renderer is busy with bulk now

        async def interactive(index: int) -> float:
            body = {"template": "plain", "data": {"name": f"i{index}"}, "wait_s": 60}
            started = time.monotonic()
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=body, headers=auth()
            ) as response:
                assert response.status == 200, await response.text()
            return time.monotonic() - started

        async with gateway.http.get(
            gateway.at(f"/v1/batches/{batch_id}"), headers=auth("globex")
        ) as got:
            before = (await got.json())["succeeded"]
        latencies = await asyncio.gather(*(interactive(index) for index in range(10)))
        async with gateway.http.get(
            gateway.at(f"/v1/batches/{batch_id}"), headers=auth("globex")
        ) as got:
            state = await got.json()
    after = state["succeeded"] + state["failed"]
    assert state["state"] == "RUNNING"
    assert BULK - after >= BULK // 2, "the interactive reports went first"
    assert after > before, "bulk kept a share meanwhile"
    assert max(latencies) < 20, latencies
