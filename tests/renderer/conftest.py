"""Fixtures for driving a real renderer (real Chromium, real Azurite), in-process or as a process."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import signal
import subprocess
import sys
import time
import unicodedata
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pypdf
import pytest
from reportfarm_renderer.settings import RendererSettings

from reportfarm import azurite, contract
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SLOW_TEMPLATE = """{# reportfarm: javascript #}
<html><body><h1>慢 {{ name }}</h1>
<script>const end = Date.now() + {{ busy_ms }}; while (Date.now() < end) {}</script>
</body></html>
"""


@pytest.fixture
def template_dir(tmp_path: Path) -> Path:
    """The examples plus test templates: ``slow`` (busy JavaScript for ``busy_ms``)."""
    folder = tmp_path / "templates"
    shutil.copytree(EXAMPLES / "templates", folder)
    (folder / "slow.html").write_text(SLOW_TEMPLATE, encoding="utf-8")
    (folder / "plain.html").write_text("<p>你好 {{ name }}</p>", encoding="utf-8")
    return folder


@pytest.fixture
def storage(azurite_server: azurite.Azurite, storage_names: tuple[str, str]) -> StorageSettings:
    queue, container = storage_names
    return StorageSettings(
        connection_string=azurite_server.connection_string, queue=queue, container=container
    )


def renderer_settings(
    storage: StorageSettings, templates: Path, **overrides: object
) -> RendererSettings:
    values: dict[str, object] = {
        "templates": templates,
        "pool_size": 2,
        "port": 0,
        "storage": storage,
        "visibility_timeout": 10,
        "poll_max_s": 0.2,
        "drain_timeout": 10.0,
        "render_timeout": 20.0,
    }
    values.update(overrides)
    return RendererSettings.from_env({}, **values)


@pytest.fixture
async def client(storage: StorageSettings) -> AsyncIterator[ReportFarmClient]:
    assert storage.connection_string
    async with ReportFarmClient(
        storage.connection_string, queue=storage.queue, container=storage.container
    ) as farm_client:
        await farm_client.ensure()
        yield farm_client


def pdf_text(data: bytes) -> str:
    reader = pypdf.PdfReader(io.BytesIO(data))
    text = "".join(page.extract_text() or "" for page in reader.pages)
    return unicodedata.normalize("NFKC", text)  # Type 3 CJK fonts extract as radicals


async def wait_for(predicate, *, timeout: float = 60.0, every: float = 0.2):  # type: ignore[no-untyped-def]
    """Poll an async predicate until it returns something truthy (a bounded deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(every)


class WorkerProcess:
    """``reportfarm worker`` as a real OS process (for SIGTERM and kill -9)."""

    def __init__(
        self,
        storage: StorageSettings,
        templates: Path,
        log: Path,
        *,
        affinity: set[int] | None = None,
        **env: str,
    ) -> None:
        """``affinity``: the CPUs the worker may run on (default: this process's)."""
        self.port = azurite.free_port()
        self.log = log
        environment = dict(os.environ)
        environment.update(
            AZURE_STORAGE_CONNECTION_STRING=storage.connection_string or "",
            REPORTFARM_QUEUE=storage.queue,
            REPORTFARM_CONTAINER=storage.container,
            REPORTFARM_TEMPLATES=str(templates),
            REPORTFARM_POOL_SIZE="1",
            REPORTFARM_PORT=str(self.port),
            REPORTFARM_POLL_MAX_S="0.2",
            REPORTFARM_LOG_FORMAT="json",
        )
        environment.update(env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reportfarm.cli", "worker"],
            env=environment,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if affinity is None else lambda: os.sched_setaffinity(0, affinity),
        )

    def signal(self, signum: int) -> None:
        """SIGTERM to the main process only, as Kubernetes (through tini) sends it; SIGKILL to
        the whole group, as when a container dies."""
        if signum == signal.SIGKILL:
            os.killpg(self.process.pid, signum)
        else:
            os.kill(self.process.pid, signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def worker_process(tmp_path: Path) -> Iterator[type[WorkerProcess]]:
    started: list[WorkerProcess] = []

    class Tracked(WorkerProcess):
        def __init__(self, *args: object, **kwargs: str) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            started.append(self)

    yield Tracked
    for process in started:
        process.stop()


def job_result_ok(record: contract.ResultRecord | None) -> bool:
    return record is not None and record.state == "succeeded"
