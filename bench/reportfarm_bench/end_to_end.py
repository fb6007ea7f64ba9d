"""End to end: the client submits to the queue (an embedded Azurite), a renderer takes the jobs
and stores PDFs and result records. The renderer is the real ``reportfarm worker`` process with
its production settings, as a pod runs it (:func:`running_process`).

Times are the server's, from each job's result record: ``finished_at - submitted_at`` is
submit-to-stored (the client stamps ``submitted_at`` before it sends; the runner stamps
``finished_at`` once the PDF is uploaded, just before the record is written). The client's own
view would add its polling interval (0.25 s by default) to every sample: a property of the
waiting client, not of the farm. Both clocks are this machine's.

- **Throughput** (:meth:`Farm.throughput`, in chunks the caller interleaves with the other
  strategies): a chunk's jobs are submitted at once; its span runs from the first job's start
  (its finish less its stage times: when the worker took it) to the last one's finish, the span
  the in-process strategies use. The time a job waits for the worker's next receive is latency,
  not throughput, and it is in the latency figures.
- **Latency** (:meth:`Farm.latency_phases`): lone jobs (a single render through the same path)
  and bursts of 20 concurrent submissions, alternating, each after a random idle pause so a job
  meets the worker's empty-queue polling at a random phase, as it would in production.

At the end every stored PDF is downloaded and checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import signal
import statistics
import sys
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from reportfarm import azurite, contract, renderer_api
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.quantiles import quantile
from reportfarm.settings import CONNECTION_STRING_VAR
from reportfarm_bench import documents as documenting
from reportfarm_bench import measuring, pod
from reportfarm_bench.documents import Document

QUEUE = CONTAINER = "bench"
WAIT_TIMEOUT_S = 600.0
WAIT_POLL_S = 1.0
WAIT_WINDOW = 1
"""How often the client looks for result records, and how many it reads at a time past the
ones that ended (oldest first). Times come from the records, so a slow, narrow poll costs no
accuracy, and it keeps the client's reads (the client runs on the same cores here, not in
production) from taking CPU from the renderer."""
BORROW_WAIT_SUM = "reportfarm_pool_borrow_wait_seconds_sum"
STAGES = ("load_data", "render_html", renderer_api.RENDER_STAGE, "storage_upload")


class JobsFailed(RuntimeError):
    """Some benchmark jobs did not succeed (or did not finish in time), or the renderer process
    exited."""


T = TypeVar("T")


@dataclasses.dataclass
class Worker:
    """The real ``reportfarm worker`` process (:func:`worker_process`) and its log."""

    process: asyncio.subprocess.Process
    log: Path
    port: int
    """Its HTTP port (``/metrics``)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def sample(self, name: str) -> float:
        """The value of sample ``name`` on its ``/metrics`` (0 when absent)."""
        url = f"http://127.0.0.1:{self.port}{renderer_api.METRICS_PATH}"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            response.raise_for_status()
            text = await response.text()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    return float(sample.value)
        return 0.0

    async def watching(self, work: Awaitable[T]) -> T:
        """``work``'s result, failing early (:class:`JobsFailed`, with the log's end) if the
        process exits meanwhile."""
        task = asyncio.ensure_future(work)
        exited = asyncio.ensure_future(self.process.wait())
        done, _ = await asyncio.wait({task, exited}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            exited.cancel()
            return task.result()
        task.cancel()
        tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        raise JobsFailed(f"the renderer exited ({self.process.returncode}); its log ends:\n{tail}")


@dataclasses.dataclass
class Phases:
    """How many lone jobs and bursts to measure, and how long to idle before each."""

    singles: int
    bursts: int
    burst: int = 20
    pause_s: tuple[float, float] = (0.3, 2.5)


@dataclasses.dataclass
class EndToEnd:
    """What the end-to-end phases measured."""

    single_s: list[float] = dataclasses.field(default_factory=list)
    single_queue_wait_s: list[float] = dataclasses.field(default_factory=list)
    burst_s: list[float] = dataclasses.field(default_factory=list)
    burst_queue_wait_s: list[float] = dataclasses.field(default_factory=list)
    throughput: list[contract.ResultRecord] = dataclasses.field(default_factory=list)
    throughput_span_s: float = 0.0
    throughput_borrow_wait_s: float = 0.0
    """Of the throughput jobs' ``pdf_generation`` time, what they spent waiting for a browser
    (the job taken ahead waits for one): not printing."""
    outputs: list[str] = dataclasses.field(default_factory=list)
    loads: list[float] = dataclasses.field(default_factory=list)
    """The 1-minute load average when each throughput chunk started."""
    check: measuring.Run = dataclasses.field(default_factory=lambda: measuring.Run("end_to_end"))
    """The PDF tally and sample (its timings are unused)."""

    @property
    def pdf_per_s(self) -> float:
        spans = self.throughput_span_s
        return len(self.throughput) / spans if spans > 0 else 0.0

    def browser_utilization(self, pool_size: int) -> float:
        """The share of the throughput spans the browsers spent printing (``pdf_generation``
        less the wait to borrow a browser): what the queue path leaves of the ceiling."""
        generation = sum(r.stages_ms.get(renderer_api.RENDER_STAGE, 0.0) for r in self.throughput)
        printing = generation / 1000 - self.throughput_borrow_wait_s
        spans = self.throughput_span_s * pool_size
        return printing / spans if spans > 0 else 0.0

    def summary(self, phases: Phases, *, pool_size: int) -> dict[str, object]:
        single_ms = statistics.median(self.single_s) * 1000 if self.single_s else float("nan")
        loads = self.loads
        return {
            "pdf_per_s": round(self.pdf_per_s, 2),
            "p50_ms": _ms(quantile(self.burst_s, 0.50) or 0.0),
            "p95_ms": _ms(quantile(self.burst_s, 0.95) or 0.0),
            "single_ms": round(single_ms, 1),
            "single_samples_ms": [_ms(value) for value in self.single_s],
            "burst": phases.burst,
            "bursts": phases.bursts,
            "single_queue_wait_p50_ms": _ms(quantile(self.single_queue_wait_s, 0.50) or 0.0),
            "queue_wait_p50_ms": _ms(quantile(self.burst_queue_wait_s, 0.50) or 0.0),
            "browser_utilization": round(self.browser_utilization(pool_size), 3),
            "stages_p50_ms": {
                stage: _ms(
                    quantile([r.stages_ms.get(stage, 0.0) / 1000 for r in self.throughput], 0.50)
                    or 0.0
                )
                for stage in STAGES
            },
            "jobs": len(self.throughput),
            "pdfs": len(self.outputs),
            "valid_pdfs": self.check.valid,
            "load1": round(statistics.fmean(loads), 2) if loads else None,
        }


class Farm:
    """A running renderer and a client; each method is one phase, adding to :attr:`result`."""

    def __init__(
        self,
        client: ReportFarmClient,
        documents: Sequence[Document],
        rng: random.Random,
        *,
        worker: Worker | None = None,
    ) -> None:
        self.client = client
        self.worker = worker
        """The renderer process (its pool's borrow waits are on its ``/metrics``)."""
        self.documents = documents
        self.rng = rng
        self.result = EndToEnd()

    async def warm_up(self, count: int) -> None:
        await self._complete(count)

    async def throughput(self, count: int, *, offset: int = 0) -> None:
        """One chunk of ``count`` jobs submitted at once."""
        self.result.loads.append(measuring.load_average())
        waited = await self._borrow_wait_s()
        records = await self._complete(count, offset=offset)
        self.result.throughput_borrow_wait_s += await self._borrow_wait_s() - waited
        first = min(_started_at(record) for record in records)
        last = max(record.finished_at or 0.0 for record in records)
        self.result.throughput_span_s += last - first
        self.result.throughput += records

    async def latency_phases(self, phases: Phases) -> None:
        """Lone jobs and bursts, alternating, each after a random pause."""
        for index in range(max(phases.singles, phases.bursts)):
            if index < phases.singles:
                await asyncio.sleep(self.rng.uniform(*phases.pause_s))
                records = await self._complete(1, offset=index)
                self.result.single_s += [_latency(record) for record in records]
                self.result.single_queue_wait_s += [_queue_wait(record) for record in records]
            if index < phases.bursts:
                await asyncio.sleep(self.rng.uniform(*phases.pause_s))
                records = await self._complete(phases.burst)
                self.result.burst_s += [_latency(record) for record in records]
                self.result.burst_queue_wait_s += [_queue_wait(record) for record in records]

    async def _borrow_wait_s(self) -> float:
        return 0.0 if self.worker is None else await self.worker.sample(BORROW_WAIT_SUM)

    async def check_pdfs(self) -> None:
        """Download every measured job's PDF and check it."""
        for name in self.result.outputs:
            self.result.check.keep(await self.client.blobs.get(name))

    async def _complete(self, count: int, *, offset: int = 0) -> list[contract.ResultRecord]:
        """Submit ``count`` documents concurrently and wait for all of their result records."""
        items = [
            Submission(template=d.template, data=d.data, pdf=d.pdf)
            for d in (self.documents[(offset + i) % len(self.documents)] for i in range(count))
        ]
        job_ids = await asyncio.gather(*(self.client.submit(item) for item in items))
        waiting = self.client.wait(
            job_ids, timeout_s=WAIT_TIMEOUT_S, poll_s=WAIT_POLL_S, window=WAIT_WINDOW
        )
        results = await (waiting if self.worker is None else self.worker.watching(waiting))
        records = [record for record in results.values() if record is not None]
        failed = [record for record in records if record.state != "succeeded"]
        if failed or len(records) < len(job_ids):
            reasons = "; ".join(sorted({str(record.error) for record in failed}))[:500]
            raise JobsFailed(
                f"{len(job_ids) - len(records)} job(s) unfinished, {len(failed)} failed: {reasons}"
            )
        self.result.outputs += [record.output_blob or "" for record in records]
        return records


@contextlib.asynccontextmanager
async def running_process(
    documents: Sequence[Document],
    *,
    pool_size: int,
    rng: random.Random,
    log: Path,
    cpus: Sequence[int] | None = None,
) -> AsyncIterator[Farm]:
    """An embedded Azurite, a client, and the renderer as production runs it: the real
    ``reportfarm worker`` process (:func:`worker_process`), its memory and CPU its own tree's."""
    server = azurite.Azurite()
    await asyncio.to_thread(server.start)
    try:
        connection = server.connection_string
        async with ReportFarmClient(connection, queue=QUEUE, container=CONTAINER) as client:
            await client.ensure()
            async with worker_process(
                connection, pool_size=pool_size, log=log, cpus=cpus
            ) as worker:
                yield Farm(client, documents, rng, worker=worker)
    finally:
        await asyncio.to_thread(server.stop)


@contextlib.asynccontextmanager
async def worker_process(
    connection: str,
    *,
    pool_size: int,
    log: Path,
    cpus: Sequence[int] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[Worker]:
    """``reportfarm worker`` with the production settings but storage, the example templates and
    ``pool_size`` browsers (and ``extra_env``: a signing key, the EN 16931 rules), its output in
    ``log``; pinned to ``cpus`` when given (:func:`.pod.pinned`); stopped with SIGTERM (drained)
    on exit."""
    port = azurite.free_port()
    environment = worker_environment(connection, pool_size=pool_size, port=port)
    environment.update(extra_env or {})
    module, args = "reportfarm.cli", ("worker",)
    with log.open("ab") as output:
        process = await asyncio.create_subprocess_exec(
            *(pod.pinned(cpus, module, *args) if cpus else [sys.executable, "-m", module, *args]),
            env=environment,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    try:
        yield Worker(process, log, port)
    finally:
        await stop(process)


def worker_environment(
    connection: str, *, pool_size: int, port: int, base: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The renderer process's environment: ``base`` without any ``REPORTFARM_*`` setting but the
    Chromium binary (as the in-process strategies read it) and without another storage account,
    so a variable left in a shell cannot skew the figures; then the benchmark's own settings."""
    kept = {
        name: value
        for name, value in base.items()
        if name == renderer_api.Var.CHROMIUM_PATH
        or not (name.startswith("REPORTFARM_") or name.startswith("AZURE_STORAGE_"))
    }
    return {
        **kept,
        CONNECTION_STRING_VAR: connection,
        "REPORTFARM_QUEUE": QUEUE,
        "REPORTFARM_CONTAINER": CONTAINER,
        "REPORTFARM_TEMPLATES": str(documenting.TEMPLATES),
        "REPORTFARM_POOL_SIZE": str(pool_size),
        "REPORTFARM_PORT": str(port),
        "REPORTFARM_LOG_FORMAT": "json",
    }


def worker_side_s(record: contract.ResultRecord) -> float:
    """The worker's time for a job, from taking it to its PDF stored: its stages' sum."""
    return sum(record.stages_ms.get(stage, 0.0) for stage in STAGES) / 1000


async def stop(process: asyncio.subprocess.Process, *, grace_s: float = 60.0) -> None:
    """SIGTERM, then SIGKILL to its process group after ``grace_s``."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


def _latency(record: contract.ResultRecord) -> float:
    return (record.finished_at or 0.0) - (record.submitted_at or 0.0)


def _started_at(record: contract.ResultRecord) -> float:
    """When the runner took the job: its finish less the time of its stages."""
    return (record.finished_at or 0.0) - worker_side_s(record)


def _queue_wait(record: contract.ResultRecord) -> float:
    return _started_at(record) - (record.submitted_at or 0.0)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
