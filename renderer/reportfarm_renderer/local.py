"""``reportfarm up``: the whole farm on one machine, the embedded default.

With AZURE_STORAGE_CONNECTION_STRING unset it starts Azurite itself; it runs a renderer sized to
this machine (and resized while it runs by the same policy the operator uses), submits the example
jobs, waits for them with a progress bar and says where the PDFs are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from reportfarm import azurite, submitting
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm_renderer import autoscaling, service
from reportfarm_renderer.settings import RendererSettings

logger = logging.getLogger(__name__)
console = Console(stderr=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_submissions(data: Path | None) -> list[Submission]:
    """The given file's jobs, or every example: each data/<template>.json, then batch.jsonl."""
    if data is not None:
        return submitting.read_submissions(data, template=data.stem)
    folder = EXAMPLES / "data"
    items: list[Submission] = []
    for path in sorted(folder.glob("*.json")):
        items += submitting.read_submissions(path, template=path.stem)
    batch = folder / "batch.jsonl"
    if batch.exists():
        items += submitting.read_submissions(batch, template="achievement")
    return items


@contextlib.contextmanager
def storage() -> Iterator[str]:
    """The configured storage account, or an embedded Azurite for the lifetime of the farm."""
    configured = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if configured:
        yield configured
        return
    console.print("AZURE_STORAGE_CONNECTION_STRING is unset: starting the embedded Azurite")
    with azurite.Azurite() as server:
        yield server.connection_string


async def run_farm(
    *, connection: str, out: Path, templates: Path, data: Path | None, serve: bool
) -> int:
    items = example_submissions(data)
    storage_settings = StorageSettings.from_env().with_connection(connection)
    settings = RendererSettings.from_env(templates=templates, port=0, storage=storage_settings)
    async with service.running(settings) as renderer:
        scaler = asyncio.create_task(autoscaling.run_local(renderer))
        console.print(
            f"renderer up: {renderer.pool.live} browser(s), metrics on "
            f"http://127.0.0.1:{renderer.port}/metrics"
        )
        client = ReportFarmClient(
            connection, queue=settings.storage.queue, container=settings.storage.container
        )
        async with client:
            await client.ensure()
            job_ids = await client.submit_many(items)
            with submitting.progress() as progress:
                task = progress.add_task("rendering", total=len(job_ids))
                results = await client.wait(
                    job_ids, timeout_s=600, on_result=lambda _: progress.advance(task)
                )
            await submitting.download(client, results, out)
        status = submitting.report(results)
        if serve:
            console.print(
                "the farm keeps running (Ctrl-C stops it). In another shell:\n"
                f"  export AZURE_STORAGE_CONNECTION_STRING='{connection}'\n"
                "  reportfarm submit --template achievement --data examples/data/achievement.json"
                " --out out"
            )
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()
        scaler.cancel()
    return status


def main(*, out: Path, templates: Path | None, data: Path | None, serve: bool) -> int:
    with storage() as connection:
        try:
            return asyncio.run(
                run_farm(
                    connection=connection,
                    out=out,
                    templates=templates or EXAMPLES / "templates",
                    data=data,
                    serve=serve,
                )
            )
        except KeyboardInterrupt:
            return 130
