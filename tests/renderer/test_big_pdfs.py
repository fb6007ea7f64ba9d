"""Big PDFs in bounded memory: streamed from Chromium into blob blocks, against real Chromium and
a real Azurite.

Two levels: the print path with tiny chunks and blocks (many blocks from a small document, so the
block bookkeeping is exercised cheaply), and whole jobs through the renderer with the production
chunk and block sizes (a PDF of several MiB from images of noise, which do not compress).
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from azure.storage.blob.aio import BlobClient
from PIL import Image
from reportfarm_renderer import browser, output, printing, service
from reportfarm_renderer import pool as pooling

from reportfarm import contract, outcomes
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm.storage import blobs as storing

from .conftest import pdf_text, renderer_settings

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]

CHUNK = 4 * 1024
BLOCK = 6 * 1024
"""Not a multiple of :data:`CHUNK`: blocks are cut across chunks."""
LINES = "".join(f"<p>第 {i} 行 line {i}: 月末账单 statement</p>" for i in range(200))
"""About five pages of text: a PDF of several :data:`BLOCK` s."""
NOISE_TEMPLATE = (
    "<p>noise report</p>{% for image in images %}"
    '<img style="display: block; width: 170mm" src="data:image/png;base64,{{ image }}">'
    "{% endfor %}<p>end of the noise report</p>"
)


@contextlib.asynccontextmanager
async def small_chunks(chunk: int = CHUNK) -> AsyncIterator[pooling.BrowserPool]:
    """A pool of one browser that reads PDFs from Chromium in ``chunk`` s."""
    async with (
        browser.ChromiumLauncher(chunk_bytes=chunk) as launcher,
        pooling.BrowserPool(
            launcher.new_worker, size=1, borrow_timeout=30, launch_timeout=30, render_timeout=60
        ) as pool,
    ):
        yield pool


@pytest.fixture
async def store(storage: StorageSettings) -> AsyncIterator[storing.BlobStore]:
    assert storage.connection_string
    async with storing.BlobStore(storage.connection_string, storage.container) as blobs:
        await blobs.ensure()
        yield blobs


def blob_client(storage: StorageSettings, name: str) -> BlobClient:
    assert storage.connection_string
    return BlobClient.from_connection_string(storage.connection_string, storage.container, name)


async def committed_blocks(storage: StorageSettings, name: str) -> int:
    async with blob_client(storage, name) as client:
        committed, _ = await client.get_block_list("committed")
        return len(committed)


async def test_a_pdf_of_many_blocks_arrives_whole(
    store: storing.BlobStore, storage: StorageSettings
) -> None:
    async with small_chunks() as pool:
        whole = await pool.render(LINES, contract.PdfOptions())
        sink = output.PdfOutput(store, "pdf/many.pdf", limit=2**20, block_bytes=BLOCK)
        assert await pool.render(LINES, contract.PdfOptions(), sink=sink) is None
    assert await sink.store(None) == len(whole)
    assert sink.streamed and sink.blocks == -(-len(whole) // BLOCK) > 2
    assert await committed_blocks(storage, "pdf/many.pdf") == sink.blocks
    stored = await store.get("pdf/many.pdf")
    assert pdf_text(stored) == pdf_text(whole)
    assert "line 199" in pdf_text(stored)


async def test_a_small_pdf_is_stored_in_one_request(
    store: storing.BlobStore, storage: StorageSettings
) -> None:
    sink = output.PdfOutput(store, "pdf/small.pdf", limit=2**20)
    async with small_chunks(printing.CHUNK_BYTES) as pool:  # the production chunk
        pdf = await pool.render("<p>one page</p>", contract.PdfOptions(), sink=sink)
    assert pdf is not None and not sink.streamed
    assert await sink.store(pdf) == len(pdf)
    assert sink.blocks == 0 and await committed_blocks(storage, "pdf/small.pdf") == 0
    assert "one page" in pdf_text(await store.get("pdf/small.pdf"))


async def test_the_size_limit_stops_the_stream_and_commits_nothing(
    store: storing.BlobStore,
) -> None:
    limit = 3 * BLOCK
    sink = output.PdfOutput(store, "pdf/too-big.pdf", limit=limit, block_bytes=BLOCK)
    async with small_chunks() as pool:
        with pytest.raises(outcomes.PermanentError) as caught:
            await pool.render(LINES, contract.PdfOptions(), sink=sink)
        assert "after" in pdf_text(await pool.render("<p>after</p>", contract.PdfOptions()))
    assert str(caught.value).startswith("PDF is more than ")
    assert str(caught.value).endswith(f"bytes, over the limit of {limit}")
    assert sink.blocks >= 1  # staged as they came, never committed
    assert not await store.exists("pdf/too-big.pdf")


async def test_a_retry_after_a_partial_stream_overwrites_cleanly(
    store: storing.BlobStore, storage: StorageSettings
) -> None:
    """An attempt that stopped mid-stream leaves staged blocks; the next attempt's commit lists
    only its own, over an older PDF of the same name."""
    name = "pdf/retried.pdf"
    await store.put(name, b"%PDF- an older attempt", content_type="application/pdf")
    async with small_chunks() as pool:
        stopped = output.PdfOutput(store, name, limit=3 * BLOCK, block_bytes=BLOCK)
        with pytest.raises(outcomes.PermanentError):
            await pool.render(LINES, contract.PdfOptions(), sink=stopped)
        again = output.PdfOutput(store, name, limit=2**20, block_bytes=BLOCK)
        assert await pool.render(LINES, contract.PdfOptions(), sink=again) is None
    size = await again.store(None)
    stored = await store.get(name)
    assert len(stored) == size and "line 199" in pdf_text(stored)
    assert await committed_blocks(storage, name) == again.blocks
    async with blob_client(storage, name) as client:
        _, uncommitted = await client.get_block_list("uncommitted")
    assert uncommitted == []  # the commit discarded the stopped attempt's blocks


def noise_png(side: int = 900) -> str:
    """An image of random pixels, base64: it stays about 2.4 MB in a PDF."""
    image = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


async def test_a_job_with_a_pdf_of_several_blocks_is_stored_whole(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    """Production chunk and block sizes, the real job path: a PDF over two blocks."""
    (template_dir / "noise.html").write_text(NOISE_TEMPLATE, encoding="utf-8")
    images = [noise_png() for _ in range(3)]
    async with service.running(renderer_settings(storage, template_dir)):
        job_id = await client.submit(Submission(template="noise", data={"images": images}))
        record = (await client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None and record.state == "succeeded", record
    assert record.output_bytes is not None and record.output_bytes > storing.BLOCK_BYTES
    assert await committed_blocks(storage, record.output_blob or "") >= 2
    pdf = await client.download(record)
    assert len(pdf) == record.output_bytes
    assert "end of the noise report" in pdf_text(pdf)


async def test_a_job_over_the_size_limit_fails_while_streaming_with_its_reason(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    (template_dir / "noise.html").write_text(NOISE_TEMPLATE, encoding="utf-8")
    limit = 2 * 2**20
    settings = renderer_settings(storage, template_dir, max_pdf_bytes=limit)
    async with service.running(settings):
        job_id = await client.submit(Submission(template="noise", data={"images": [noise_png()]}))
        record = (await client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None and record.state == "failed", record
    assert record.error and record.error.startswith("PDF is more than ")
    assert f"over the limit of {limit}" in record.error
    assert record.error_kind == "permanent" and record.attempts == 1
    assert not await client.blobs.exists(contract.default_output_blob(job_id))
