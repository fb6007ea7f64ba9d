"""The synchronous path as a client meets it: our gateway in front of a renderer and the storage,
each its own process, called over HTTP as Gotenberg is (``reportfarm bench sync``).

- :func:`our_path`: Azurite (the storage emulator), a ``reportfarm worker`` process with the
  production settings (:func:`.end_to_end.worker_process`) and a ``reportfarm gateway`` process,
  wired as the chart wires them: the gateway wakes the renderer (``REPORTFARM_GATEWAY_WAKE``) and
  names itself in each job (``REPORTFARM_GATEWAY_NOTIFY_ADDRESS``); ``hints=False`` leaves both
  out (the path before the hints: the renderer's idle polling, the gateway's record polling).
- :class:`SyncClient`: ``POST /v1/reports`` with the document's template and data (the renderer
  renders it, as a job does) and ``wait_s``; a 200 carries the PDF. Its job ids, kept, name the
  result records whose stages say what the print and the upload took.
- :func:`members`: the processes a side's memory and CPU count (the whole path: gateway and its
  checking processes, renderer and its browsers, Azurite).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from reportfarm import azurite
from reportfarm.client import ReportFarmClient
from reportfarm_bench import end_to_end, footprint
from reportfarm_bench.documents import Document

TENANT, TOKEN = "bench", "bench-token"
WAIT_S = 120.0
"""What a request asks to wait: far past any job here, so every answer is a PDF."""
READY_TIMEOUT_S = 120.0


@dataclasses.dataclass
class OurPath:
    url: str
    client: ReportFarmClient
    """Reads result records (their stages) after the timed chunks."""
    pids: dict[str, int]
    """Root process of each part: gateway, renderer, azurite."""
    renderer_url: str


def members(roots: Mapping[str, int]) -> footprint.Members:
    """Every process under the given roots (a gateway's checking processes, a renderer's driver
    and browsers, Azurite's node process)."""

    def found(tree: dict[int, int]) -> set[int]:
        return set().union(*(footprint.descendants(pid, tree) for pid in roots.values()))

    return found


def gateway_environment(
    connection: str, *, port: int, renderer_port: int, hints: bool, dispatcher: bool = False
) -> dict[str, str]:
    """The gateway's environment: the renderer's storage, one tenant, quotas out of the way (the
    client is the benchmark), no webhook dispatcher (no job here has a callback), and the hints
    as the chart sets them (the renderer's address; this replica's)."""
    base = end_to_end.worker_environment(connection, pool_size=1, port=port)
    for name in ("REPORTFARM_POOL_SIZE", "REPORTFARM_PORT", "REPORTFARM_TEMPLATES"):
        base.pop(name)
    environment = {
        **base,
        "REPORTFARM_TOKENS": f"{TENANT}={TOKEN}",
        "REPORTFARM_GATEWAY_PORT": str(port),
        "REPORTFARM_GATEWAY_RATE": "100000",
        "REPORTFARM_GATEWAY_BURST": "100000",
        "REPORTFARM_GATEWAY_IN_FLIGHT": "1000",
        "REPORTFARM_GATEWAY_DISPATCHER": "1" if dispatcher else "0",
    }
    if hints:
        environment["REPORTFARM_GATEWAY_WAKE"] = f"127.0.0.1:{renderer_port}"
        environment["REPORTFARM_GATEWAY_NOTIFY_ADDRESS"] = f"127.0.0.1:{port}"
    return environment


@contextlib.asynccontextmanager
async def our_path(
    *,
    pool_size: int,
    logs: Path,
    hints: bool = True,
    dispatcher: bool = False,
    debug_log: Path | None = None,
    pages_per_browser: int = 1,
) -> AsyncIterator[OurPath]:
    """Azurite, the renderer process and the gateway process; stopped in reverse on exit.
    ``dispatcher``: the gateway's webhook dispatcher runs (as in production); ``debug_log``:
    Azurite logs every request there."""
    server = azurite.Azurite(debug_log=debug_log)
    await asyncio.to_thread(server.start)
    try:
        assert server.process is not None
        connection = server.connection_string
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                ReportFarmClient(connection, queue=end_to_end.QUEUE, container=end_to_end.CONTAINER)
            )
            await client.ensure()
            worker = await stack.enter_async_context(
                end_to_end.worker_process(
                    connection,
                    pool_size=pool_size,
                    log=logs / "renderer.log",
                    extra_env={"REPORTFARM_PAGES_PER_BROWSER": str(pages_per_browser)},
                )
            )
            port = azurite.free_port()
            environment = gateway_environment(
                connection, port=port, renderer_port=worker.port, hints=hints, dispatcher=dispatcher
            )
            with (logs / "gateway.log").open("ab") as output:
                gateway = await asyncio.create_subprocess_exec(
                    *(sys.executable, "-m", "reportfarm.cli", "gateway"),
                    env=environment,
                    stdout=output,
                    stderr=output,
                    start_new_session=True,
                )
            stack.push_async_callback(end_to_end.stop, gateway, grace_s=15.0)
            url = f"http://127.0.0.1:{port}"
            await _ready(url + "/readyz", gateway)
            await _ready(f"http://127.0.0.1:{worker.port}/readyz", worker.process)
            pids = {"gateway": gateway.pid, "renderer": worker.pid, "azurite": server.process.pid}
            yield OurPath(url, client, pids, renderer_url=f"http://127.0.0.1:{worker.port}")
    finally:
        await asyncio.to_thread(server.stop)


async def _ready(url: str, process: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise RuntimeError(f"{url}: its process exited ({process.returncode})")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} not ready within {READY_TIMEOUT_S:.0f} s")


class SyncClient:
    """``POST /v1/reports`` and wait: one HTTP session, as a user's service keeps one."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.job_ids: list[str] = []
        self.timings: dict[str, tuple[float, float]] = {}
        """Per job id: (sent, PDF received), wall clock (the records' clock, this machine's)."""
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SyncClient:
        timeout = aiohttp.ClientTimeout(total=WAIT_S + 30)
        connector = aiohttp.TCPConnector(limit=0)
        self._session = aiohttp.ClientSession(timeout=timeout, connector=connector)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def convert(self, lane: int, document: Document) -> bytes:
        assert self._session is not None, "use the client as an async context manager"
        body = {
            "template": document.template,
            "data": document.data,
            "pdf": dataclasses.asdict(document.pdf),
            "wait_s": WAIT_S,
        }
        headers = {"Authorization": f"Bearer {TOKEN}"}
        sent = time.time()
        async with self._session.post(self.url + "/v1/reports", json=body, headers=headers) as r:
            pdf = await r.read()
            if r.status != 200:
                raise RuntimeError(f"gateway answered {r.status}: {pdf[:300]!r}")
            job_id = r.headers["X-Reportfarm-Job-Id"]
        self.job_ids.append(job_id)
        self.timings[job_id] = (sent, time.time())
        return pdf


PRINT_AND_UPLOAD = ("pdf_generation", "storage_upload")
PHASES = {
    "accept": "client sent -> the gateway stamped the job (body checked in a worker process)",
    "queue": "stamped -> the renderer took it (message written and handed over, or woken and "
    "received)",
    "work": "the renderer's stages (data, template, print, upload)",
    "answer": "uploaded -> the client has the PDF (record written, the done hint carrying it and "
    "the PDF, or the record read and the PDF downloaded)",
}


async def lone_breakdown(
    client: ReportFarmClient, timings: Mapping[str, tuple[float, float]], job_ids: list[str]
) -> dict[str, Any]:
    """Where lone requests' time went: each job's warm print plus its upload (its record's
    stages: the floor a lone request is held to), and the median of each of :data:`PHASES`, in
    ms, from the client's clock and the record's stamps (one machine, one clock)."""
    records = await asyncio.gather(*(client.result(job_id) for job_id in job_ids))
    floors: list[float] = []
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    stages: dict[str, list[float]] = {}
    for job_id, record in zip(job_ids, records, strict=True):
        if record is None or record.state != "succeeded" or job_id not in timings:
            continue
        sent, received = timings[job_id]
        floors.append(sum(record.stages_ms.get(s, 0.0) for s in PRINT_AND_UPLOAD) / 1000)
        work = end_to_end.worker_side_s(record)
        finished = record.finished_at or 0.0
        phases["accept"].append((record.submitted_at or sent) - sent)
        phases["queue"].append(finished - work - (record.submitted_at or sent))
        phases["work"].append(work)
        phases["answer"].append(received - finished)
        for stage, ms in record.stages_ms.items():
            stages.setdefault(stage, []).append(ms)
    return {
        "print_and_upload_s": floors,
        "phases_p50_ms": {
            name: round(statistics.median(values) * 1000, 1) if values else None
            for name, values in phases.items()
        },
        "stages_p50_ms": {  # the renderer's own, "work" in parts
            name: round(statistics.median(values), 1) for name, values in stages.items()
        },
    }


class TreeCpu:
    """CPU seconds spent by the processes under ``roots``, counted so they never go back: each
    process's own CPU time, at the most it was seen with, so one that exits keeps what it had
    (summing trees with ``cpu.sample`` went negative when a process exited between two samples
    and its parent did not reap it into a counted total). Sampled every
    :data:`footprint.INTERVAL_S` while :meth:`sampling`: a process that lives and dies between two
    samples is missed (warm pages keep Chromium's processes for many jobs)."""

    def __init__(self, roots: Mapping[str, int]) -> None:
        self.roots = dict(roots)
        self.seen: dict[int, float] = {}

    def total_s(self) -> float:
        tree = footprint.parents()
        for pid in set().union(*(footprint.descendants(r, tree) for r in self.roots.values())):
            own = _own_cpu_s(pid)
            if own is not None:
                self.seen[pid] = max(own, self.seen.get(pid, 0.0))
        return sum(self.seen.values())

    def sampling(self) -> contextlib.AbstractAsyncContextManager[None]:
        return footprint.periodically(self.total_s)


def _own_cpu_s(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # exited meanwhile
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


_TICK = os.sysconf("SC_CLK_TCK")
