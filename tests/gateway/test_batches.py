"""Batches through the gateway: 200 items with broken ones end PARTIAL_FAILED; a retry re-runs
those only; re-submission creates no duplicate; the merged PDF keeps item order."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pypdf
import pytest
from reportfarm_gateway import tenancy

from reportfarm import contract
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from ..renderer.conftest import wait_for
from .conftest import Gateway, auth, farm

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, pytest.mark.slow]

COUNT = 200
BROKEN = {index for index in range(COUNT) if index % 20 == 7}  # 10 items


def items() -> list[dict[str, Any]]:
    return [
        {"template": "late" if index in BROKEN else "plain", "data": {"name": f"学生{index}"}}
        for index in range(COUNT)
    ]


def page_text(document: pypdf.PdfReader, index: int) -> str:
    text = unicodedata.normalize("NFKC", document.pages[index].extract_text() or "")
    return "".join(text.split())


async def batch_state(gateway: Gateway, batch_id: str) -> dict[str, Any]:
    async with gateway.http.get(gateway.at(f"/v1/batches/{batch_id}"), headers=auth()) as got:
        assert got.status == 200, await got.text()
        return dict(await got.json())


async def final_state(gateway: Gateway, batch_id: str) -> dict[str, Any]:
    async def final() -> dict[str, Any] | None:
        state = await batch_state(gateway, batch_id)
        return state if state["state"] != "RUNNING" else None

    return dict(await wait_for(final, timeout=240, every=0.5))


async def test_broken_items_end_partial_failed_and_a_retry_reruns_only_them(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    batch_id = "month-end"
    async with farm(storage, template_dir) as gateway:
        async with gateway.http.post(
            gateway.at("/v1/batches"), params={"batch_id": batch_id}, json=items(), headers=auth()
        ) as posted:
            assert posted.status == 202, await posted.text()
            assert posted.headers["Location"] == f"/v1/batches/{batch_id}"
            assert (await posted.json())["sent"] == COUNT
        state = await final_state(gateway, batch_id)
        assert state["state"] == "PARTIAL_FAILED"
        assert (state["succeeded"], state["failed"], state["running"]) == (190, 10, 0)
        assert {item["index"] for item in state["failed_items"]} == BROKEN
        assert all("UnknownTemplateError" in item["error"] for item in state["failed_items"])

        # The same batch again sends nothing; other items under its id: 409 (another tenant's
        # batch of that name is its own: tests/gateway/test_tenant_isolation.py).
        async with gateway.http.post(
            gateway.at("/v1/batches"), params={"batch_id": batch_id}, json=items(), headers=auth()
        ) as again:
            assert again.status == 200
            assert (await again.json()) | {"links": None} == {
                "batch_id": batch_id,
                "count": COUNT,
                "created": False,
                "sent": 0,
                "links": None,
            }
        async with gateway.http.post(
            gateway.at("/v1/batches"),
            params={"batch_id": batch_id},
            json=items()[:3],
            headers=auth(),
        ) as other_items:
            assert other_items.status == 409
        async with gateway.http.get(
            gateway.at(f"/v1/batches/{batch_id}"), headers=auth("globex")
        ) as hidden:
            assert hidden.status == 404
    assert await client.queue.depth() == 0
    stored = tenancy.stored_batch_id("acme", batch_id)  # the farm's id of acme's batch
    assert len(await client.blobs.list(f"results/{stored}-")) == COUNT
    first_pass = {
        index: await client.result(contract.batch_item_job_id(stored, index))
        for index in range(COUNT)
    }
    finished = sorted(range(COUNT), key=lambda index: first_pass[index].finished_at or 0)  # type: ignore[union-attr]
    assert finished.index(0) < 4, "the first item goes first"

    # The missing template is deployed (a renderer restart), then only the failed items rerun.
    (template_dir / "late.html").write_text("<p>迟到 {{ name }}</p>", encoding="utf-8")
    async with farm(storage, template_dir) as gateway:
        retried_at = time.time()
        async with gateway.http.post(
            gateway.at(f"/v1/batches/{batch_id}/retry"), headers=auth()
        ) as retry:
            assert retry.status == 202, await retry.text()
            assert sorted((await retry.json())["retried"]) == sorted(BROKEN)
        state = await final_state(gateway, batch_id)
        assert state["state"] == "COMPLETED"
        assert (state["succeeded"], state["failed"], state["retries"]) == (COUNT, 0, 1)
        async with gateway.http.post(
            gateway.at(f"/v1/batches/{batch_id}/retry"), headers=auth()
        ) as nothing:
            assert nothing.status == 200 and (await nothing.json())["retried"] == []
        async with gateway.http.get(
            gateway.at(f"/v1/batches/{batch_id}/pdf"), headers=auth()
        ) as merged:
            assert merged.status == 200, await merged.text()
            document = pypdf.PdfReader(io.BytesIO(await merged.read()))
    assert len(document.pages) == COUNT
    assert "学生0" in page_text(document, 0)
    assert "迟到学生7" in page_text(document, 7)
    for index in range(COUNT):
        record = await client.result(contract.batch_item_job_id(stored, index))
        assert record is not None and record.state == "succeeded"
        if index in BROKEN:
            assert (record.submitted_at or 0) >= retried_at
        else:  # not rendered again
            assert record.finished_at == first_pass[index].finished_at  # type: ignore[union-attr]
    assert await client.queue.depth() == 0

    # The command line reads the same state.
    env = {
        **os.environ,
        "AZURE_STORAGE_CONNECTION_STRING": storage.connection_string or "",
        "REPORTFARM_QUEUE": storage.queue,
        "REPORTFARM_CONTAINER": storage.container,
    }
    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "reportfarm.cli", "batch", "status", stored, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(shown.stdout)["state"] == "COMPLETED"
    table = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "reportfarm.cli", "batch", "status", stored],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "COMPLETED" in table.stderr + table.stdout
    out = template_dir.parent / "out"
    await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "reportfarm.cli",
            "batch",
            "download",
            stored,
            "--out",
            str(out),
            "--merge",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert len(pypdf.PdfReader(out / f"{stored}.pdf").pages) == COUNT


async def test_a_jsonl_upload_with_a_template_parameter(
    storage: StorageSettings, template_dir: Path
) -> None:
    lines = "\n".join(json.dumps({"name": f"第{index}名"}) for index in range(5))
    async with farm(storage, template_dir) as gateway:
        async with gateway.http.post(
            gateway.at("/v1/batches"),
            params={"template": "plain"},
            data=lines.encode(),
            headers={**auth(), "Content-Type": "application/x-ndjson"},
        ) as posted:
            assert posted.status == 202, await posted.text()
            batch_id = (await posted.json())["batch_id"]
        state = await final_state(gateway, batch_id)
        assert state["state"] == "COMPLETED" and state["total"] == 5
        async with gateway.http.get(
            gateway.at(f"/v1/reports/{batch_id}-000003/pdf"), headers=auth()
        ) as item:
            assert item.status == 200 and item.content_type == "application/pdf"
