"""Finishing through the gateway: ``finish`` and ``files`` in a report request and in batch
items, checked before anything is queued (400 with the reason), carried to the renderer, and the
files kept as the job's own blobs."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pypdf
import pytest
from reportfarm_gateway import tenancy

from reportfarm import contract, finishing
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from .conftest import auth, farm

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


def b64(content: bytes) -> str:
    return base64.b64encode(content).decode()


async def test_a_report_with_metadata_and_tags_comes_back_finished(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    body = {
        "template": "plain",
        "data": {"name": "王小明"},
        "wait_s": 60,
        "pdf": {"tagged": True},
        "finish": {"metadata": {"title": "Zeugnis", "language": "de"}},
    }
    async with farm(storage, template_dir) as gateway:
        async with gateway.http.post(gateway.at("/v1/reports"), json=body, headers=auth()) as got:
            assert got.status == 200, await got.text()
            pdf = await got.read()
            job_id = got.headers["X-Reportfarm-Job-Id"]
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    assert reader.metadata is not None and reader.metadata.title == "Zeugnis"
    assert reader.trailer["/Root"]["/Lang"] == "de"
    assert "/StructTreeRoot" in reader.trailer["/Root"]
    record = await client.result(job_id)
    assert record is not None and "finish_metadata" in record.stages_ms


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"finish": {"pdfa": "1a"}}, "finish.pdfa '1a' is not one of 2b, 3b"),
        ({"finish": {"metadata": {"title": None}}}, "no null: finish.metadata.title"),
        ({"finish": {"sign": {"certificate": "x"}}}, "unknown finish.sign option(s)"),
        ({"files": {"../x": b64(b"a")}}, "file name '../x'"),
        ({"files": {"a.csv": "not base64!"}}, "file 'a.csv' is not base64 text"),
        ({"files": {"a.csv": "äöü="}}, "file 'a.csv' is not base64 text"),  # was a 500
        ({"files": []}, "files must be an object"),
        # PDF options are typed by the contract, as the renderer reads them
        ({"pdf": {"tagged": "yes"}}, "pdf.tagged 'yes' has the wrong type"),
        ({"pdf": {"scale": True}}, "pdf.scale True has the wrong type"),
        ({"pdf": {"margin_top": None}}, "pdf.margin_top None has the wrong type"),
        ({"pdf": {"outline": "x" * 5000}}, "pdf.outline 'xxxxxx"),
        ({"pdf": {"landscap": True}}, "bad pdf options"),
        (
            {"finish": {"attachments": [{"blob": "missing.csv"}]}},
            "is not one of this job's files",
        ),
        (
            {"finish": {"permissions": {"print": False}, "pdfa": "2b"}},
            "PDF/A forbids encryption",
        ),
    ],
)
async def test_what_cannot_be_finished_is_a_400_and_nothing_is_queued(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    extra: dict[str, Any],
    reason: str,
) -> None:
    body = {"template": "plain", "data": {"name": "x"}, "wait_s": 0, **extra}
    async with farm(storage, template_dir) as gateway:
        async with gateway.http.post(gateway.at("/v1/reports"), json=body, headers=auth()) as got:
            assert got.status == 400, await got.text()
            error = (await got.json())["error"]
            assert reason in error and len(error) < 1000  # a line, not the input echoed back
        batch = [{"template": "plain", "data": {"name": "x"}, **extra}]
        async with gateway.http.post(gateway.at("/v1/batches"), json=batch, headers=auth()) as got:
            assert got.status == 400, await got.text()
            assert reason in (await got.json())["error"]
    for lane_queue in client.queues.values():
        assert await lane_queue.depth() == 0
    assert await client.blobs.list("attachments/") == []


async def test_batch_items_carry_their_own_files_and_finish(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    batch = [
        {
            "template": "plain",
            "data": {"name": f"n{index}"},
            "files": {"note.txt": b64(f"file of item {index}".encode())},
            "finish": {"metadata": {"title": f"Item {index}"}},
        }
        for index in range(3)
    ]
    async with farm(storage, template_dir) as gateway:
        async with gateway.http.post(
            gateway.at("/v1/batches"), params={"batch_id": "fin-1"}, json=batch, headers=auth()
        ) as got:
            assert got.status == 202, await got.text()
        state = await client.wait_batch(tenancy.stored_batch_id("acme", "fin-1"), timeout_s=120)
    assert state.state == "COMPLETED", state
    for index in range(3):
        job_id = contract.batch_item_job_id(tenancy.stored_batch_id("acme", "fin-1"), index)
        kept = await client.blobs.get(finishing.attachment_blob(job_id, "note.txt"))
        assert kept == f"file of item {index}".encode()
        record = await client.result(job_id)
        assert record is not None
        pdf = pypdf.PdfReader(io.BytesIO(await client.download(record)))
        assert pdf.metadata is not None and pdf.metadata.title == f"Item {index}"
