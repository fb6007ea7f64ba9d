"""`reportfarm batch download --name`: a batch's PDFs named from its items, with an index
(real Azurite, a real renderer)."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import pytest
from reportfarm_renderer import service
from reportfarm_renderer.settings import RendererSettings

from reportfarm import azurite, cli, contract
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


async def test_batch_download_names_the_items_and_writes_an_index(
    azurite_server: azurite.Azurite,
    storage_names: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue, container = storage_names
    connection = azurite_server.connection_string
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "card.html").write_text("<p>{{ owner }}</p>", encoding="utf-8")
    storage = StorageSettings(connection_string=connection, queue=queue, container=container)
    settings = RendererSettings.from_env(templates=templates, port=0, pool_size=1, storage=storage)
    owners = ["Ann", "林雨桐", "Ann", ""]
    async with (
        service.running(settings),
        ReportFarmClient(connection, queue=queue, container=container) as client,
    ):
        await client.ensure()
        items = [Submission(template="card", data={"owner": owner}) for owner in owners]
        batch = await client.submit_batch(items)
        status = await client.wait_batch(batch.batch_id, timeout_s=120)
    assert status.state == "COMPLETED"

    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
    monkeypatch.setenv("REPORTFARM_QUEUE", queue)
    monkeypatch.setenv("REPORTFARM_CONTAINER", container)
    out = tmp_path / "out"
    args = [
        "batch",
        "download",
        batch.batch_id,
        "--out",
        str(out),
        "--name",
        "{template}-{data.owner}",
    ]
    assert await asyncio.to_thread(cli.main, args) == 0
    fallback = f"card-{contract.batch_item_job_id(batch.batch_id, 3)}.pdf"
    assert sorted(path.name for path in out.iterdir()) == sorted(
        ["card-Ann.pdf", "card-林雨桐.pdf", "card-Ann-2.pdf", fallback, "index.csv"]
    )
    with (out / "index.csv").open(encoding="utf-8") as handle:
        files = [row["file"] for row in csv.DictReader(handle)]
    assert files == ["card-Ann.pdf", "card-林雨桐.pdf", "card-Ann-2.pdf", fallback]
