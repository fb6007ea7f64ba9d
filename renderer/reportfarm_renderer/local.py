"""``reportfarm up``: the whole farm on one machine, the embedded default.

With AZURE_STORAGE_CONNECTION_STRING unset it starts Azurite itself; it runs a renderer sized to
this machine (and resized while it runs by the same policy the operator uses), submits the example
jobs, waits for them with a progress bar, names the PDFs (see :mod:`reportfarm.naming`) and prints
their index. With ``--serve`` it keeps running: it prints its connection string on one line and
writes it, with the renderer's URL, to ``.reportfarm/env`` (removed when the farm stops), where
``reportfarm submit`` and ``reportfarm status --watch`` in another shell find it. Stopping says so
and takes about a second (clients closed first, then Azurite, see :mod:`reportfarm.azurite`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shlex
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from reportfarm import azurite, connecting, contract, loops, naming, renderer_api, submitting
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm_renderer import autoscaling, service
from reportfarm_renderer.settings import RendererSettings

logger = logging.getLogger(__name__)
console = Console(stderr=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES_NAME = "{template}-{data.student.name}"
"""How the example reports are named: by template and student."""


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
    configured = os.environ.get(connecting.ENV_VAR)
    if configured:
        connecting.check(configured)
        yield configured
        return
    console.print(f"{connecting.ENV_VAR} is unset: starting the embedded Azurite")
    server = azurite.Azurite().start()
    try:
        yield server.connection_string
    finally:
        console.print("stopping Azurite")
        server.stop()


async def run_farm(
    *,
    connection: str,
    out: Path,
    templates: Path,
    data: Path | None,
    serve: bool,
    name: str,
    stopping: Stopping,
) -> int:
    items = example_submissions(data)
    storage_settings = StorageSettings.from_env().with_connection(connection)
    settings = RendererSettings.from_env(templates=templates, port=0, storage=storage_settings)
    async with service.running(settings) as renderer:
        scaler = asyncio.create_task(autoscaling.run_local(renderer))
        renderer_url = f"http://127.0.0.1:{renderer.port}"
        metrics_url = f"{renderer_url}{renderer_api.METRICS_PATH}"
        console.print(f"renderer up: {renderer.pool.live} browser(s), metrics on {metrics_url}")
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
            jobs = submitting.jobs_of(items, job_ids)
            await submitting.download(client, results, out, jobs=jobs, pattern=name)
        status = submitting.report(results)
        if serve:
            with serving(connection=connection, renderer_url=renderer_url):
                await until_stopped()
        stopping.start()
        console.print("stopping: the renderer drains, then its browsers close")
        scaler.cancel()
    return status


async def until_stopped() -> None:
    """Until Ctrl-C (loops.run, like asyncio.run, cancels the task) or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await stop.wait()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


@contextlib.contextmanager
def serving(*, connection: str, renderer_url: str) -> Iterator[Path]:
    """Say how to reach the farm (the connection string on one line of stdout, never wrapped) and
    keep it in ``.reportfarm/env`` while the farm runs."""
    path = write_env(connection=connection, renderer_url=renderer_url)
    console.print("the farm keeps running (Ctrl-C stops it). Its connection string:")
    print(connection, flush=True)
    console.print(
        f"(also in {path}, with the renderer's URL: commands run in this folder find it there; "
        "elsewhere `source` it). In another shell:\n"
        "  reportfarm status --watch\n"
        "  reportfarm submit --template achievement --data examples/data/batch.jsonl --out out"
        f" --name '{EXAMPLES_NAME}'",
        soft_wrap=True,
    )
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            if path.read_text(encoding="utf-8") == _env_text(connection, renderer_url):
                path.unlink()


def write_env(*, connection: str, renderer_url: str) -> Path:
    """``.reportfarm/env`` in the current folder, readable by its owner only."""
    path = connecting.ENV_FILE
    path.parent.mkdir(exist_ok=True)
    (path.parent / ".gitignore").write_text("*\n", encoding="utf-8")
    path.touch(mode=0o600)
    path.write_text(_env_text(connection, renderer_url), encoding="utf-8")
    return path


def _env_text(connection: str, renderer_url: str) -> str:
    return (
        "# Written by `reportfarm up --serve` while its farm runs; removed when it stops.\n"
        f"export {connecting.ENV_VAR}={shlex.quote(connection)}\n"
        f"export {connecting.RENDERERS_VAR}={shlex.quote(renderer_url)}\n"
    )


@dataclasses.dataclass
class Stopping:
    """When the farm began to stop (its work done, or Ctrl-C), to say how long stopping took."""

    began: float | None = None

    def start(self) -> None:
        if self.began is None:
            self.began = time.monotonic()


def main(
    *, out: Path, templates: Path | None, data: Path | None, serve: bool, name: str | None = None
) -> int:
    pattern = name or (EXAMPLES_NAME if data is None else naming.DEFAULT_PATTERN)
    try:
        naming.check(pattern)
    except naming.PatternError as error:
        console.print(f"[red]error:[/] {error}", soft_wrap=True)
        return 2
    stopping = Stopping()
    status = 130
    try:
        with storage() as connection:
            status = _run(
                connection,
                out=out,
                templates=templates,
                data=data,
                serve=serve,
                name=pattern,
                stopping=stopping,
            )
    except azurite.AzuriteError as error:
        console.print(f"[red]error:[/] {error}", soft_wrap=True, highlight=False)
        return 2
    if stopping.began is not None:
        console.print(f"stopped in {time.monotonic() - stopping.began:.1f} s")
    return status


def _run(
    connection: str,
    *,
    out: Path,
    templates: Path | None,
    data: Path | None,
    serve: bool,
    name: str,
    stopping: Stopping,
) -> int:
    """The farm's event loop; the exit status (130 after Ctrl-C, 2 for bad input)."""
    farm = run_farm(
        connection=connection,
        out=out,
        templates=templates or EXAMPLES / "templates",
        data=data,
        serve=serve,
        name=name,
        stopping=stopping,
    )
    try:
        return loops.run(farm)
    except KeyboardInterrupt:
        stopping.start()
        return 130
    except (submitting.InputError, contract.ContractError) as error:
        console.print(f"[red]error:[/] {error}", soft_wrap=True, highlight=False)
        stopping.start()
        return 2
