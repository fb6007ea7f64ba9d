"""One job, start to end: decode, load data, render HTML, print PDF, store, then delete.

A message is deleted only after its PDF and its result record are stored. What a failure means is
said by its type (:mod:`reportfarm.outcomes`), raised where it is understood: a
``PermanentError`` (the contract, the templates, the document, the payload) goes to the poison
queue at once, with a failed result record; a ``TemporaryError`` (the pool, the browser, storage)
or anything unknown is released with backoff until the dequeue limit (render timeouts: their own
limit), then poisoned as exhausted. Each job logs one line with its stage durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from reportfarm import backoff, contract, outcomes, renderer_api
from reportfarm.storage import errors as storage_errors
from reportfarm.storage.blobs import BlobStore
from reportfarm.storage.queueing import Delivery, JobQueue
from reportfarm_renderer import finishing, output, templates
from reportfarm_renderer import pool as pooling
from reportfarm_renderer.finishing import fonts, keys, processes, watermark
from reportfarm_renderer.hints import DoneHints
from reportfarm_renderer.metrics import RendererMetrics
from reportfarm_renderer.settings import RendererSettings

if TYPE_CHECKING:
    from reportfarm_renderer.finishing import signing

logger = logging.getLogger(__name__)

Outcome = Literal["succeeded", "retried", "poisoned"]


@dataclasses.dataclass(eq=False)
class Lease:
    """A received message while its job runs: the lock serialises every call that uses its
    pop receipt (extend, delete, release), since each extension returns a new one."""

    delivery: Delivery
    queue: JobQueue
    """The lane's queue the message came from (extend, delete and poison go back to it)."""
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    extended_at: float = dataclasses.field(default_factory=time.monotonic)
    received_at: float = dataclasses.field(default_factory=time.monotonic)
    done: bool = False
    printed: bool = False
    """True once the job needs no browser any more (printed, or failed before or while
    printing): the worker counts its take-ahead against the jobs that still do."""
    on_printed: Callable[[], object] | None = None

    def mark_printed(self) -> None:
        if not self.printed:
            self.printed = True
            if self.on_printed is not None:
                self.on_printed()


class JobRunner:
    def __init__(
        self,
        *,
        settings: RendererSettings,
        catalog: templates.TemplateCatalog,
        pool: pooling.BrowserPool,
        blobs: BlobStore,
        metrics: RendererMetrics,
        events: JobQueue | None = None,
        signer: signing.Signer | None = None,
        hints: DoneHints | None = None,
        finishers: processes.FinishingProcesses | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.pool = pool
        self.events = events
        """Where completion events of jobs with a callback URL go (webhooks), if anywhere."""
        self.blobs = blobs
        self.metrics = metrics
        self.signer = signer
        """The farm's signing key (a mounted Secret), for jobs that ask for a signature."""
        self.hints = hints or DoneHints(counter=metrics.hints)
        """Done hints to the gateway a client waits at (jobs that name one)."""
        self.finishers = finishers
        """The processes that run the finishing stages; None: a thread of this process (the
        tests' runners and tools that finish one PDF at a time)."""

    async def run(self, lease: Lease) -> Outcome:
        delivery = lease.delivery
        stages: dict[str, float] = {}
        started = time.monotonic()
        try:
            job = contract.decode_message(delivery.content)
        except contract.ContractError as error:
            job_id = contract.peek_job_id(delivery.content)
            reason = f"invalid message: {error}"
            return await self._poison(lease, job_id, None, reason, stages, kind="invalid_message")
        if job.submitted_at:
            self.metrics.queue_wait.observe(max(0.0, time.time() - job.submitted_at))
        try:
            size = await self._render_and_store(job, delivery, stages, printed=lease.mark_printed)
        except outcomes.PermanentError as error:
            reason = error.description
            return await self._poison(lease, job.job_id, job, reason, stages, kind=error.kind)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # temporary or unknown: retried with backoff, bounded
            return await self._temporary(lease, job, error, stages)
        await self._finish(lease, delete=True)
        stages["generation_succeeded"] = _ms(started)
        self.metrics.stage_seconds.labels(stage="generation_succeeded").observe(
            stages["generation_succeeded"] / 1000
        )
        self.metrics.jobs.labels(outcome="succeeded", template=job.template).inc()
        logger.info(
            "job %s succeeded",
            job.job_id,
            extra={
                "job_id": job.job_id,
                "template": job.template,
                "stage": "generation_succeeded",
                "attempt": delivery.dequeue_count,
                "pdf_bytes": size,
                "output": job.output,
                **stages,
            },
        )
        return "succeeded"

    async def _render_and_store(
        self,
        job: contract.Job,
        delivery: Delivery,
        stages: dict[str, float],
        *,
        printed: Callable[[], object] = lambda: None,
    ) -> int:
        if not contract.owns_blob(job.job_id, job.output, kind="output"):  # decoding checked it
            raise outcomes.PermanentError(
                f"output_blob {job.output!r} is not one of this job's names"
            )
        with self._stage("load_data", stages):
            data = await self._load_data(job)
        with self._stage("render_html", stages):
            html = await asyncio.to_thread(self._render_html, job.template, data)
        finish = job.finish if job.finish is not None and not job.finish.empty else None
        if finish is not None and (finish.watermark is not None or finish.sign is not None):
            # Text the farm draws itself that no installed face has is refused before the print
            # (a .notdef box in a PDF that says PDF/A would be a lie).
            try:
                await asyncio.to_thread(fonts.refuse_undrawable, finish)
            except contract.finishing.FinishError as error:
                raise finishing.FinishingFailed("fonts", error.description) from None
        if finish is not None and finish.watermark is not None:
            html = watermark.apply(html, finish.watermark)
        pdf_output = output.PdfOutput(self.blobs, job.output, limit=self.settings.max_pdf_bytes)
        if finish is not None and finish.after_print:
            # Finishing works on the whole PDF: it is held (up to the limit), never streamed.
            sink: pooling.Sink = output.HeldPdf(limit=self.settings.max_pdf_bytes)
        else:
            # A PDF too big to hold streams into its blob while it prints (pdf_generation then
            # includes those block uploads, storage_upload only the commit): see output.py.
            sink = pdf_output
        with self._stage(renderer_api.RENDER_STAGE, stages):
            try:
                pdf = await self.pool.render(
                    html,
                    job.pdf,
                    javascript=self.catalog.wants_javascript(job.template),
                    sink=sink,
                )
            finally:
                printed()  # the browser is free: the next job may be taken while this one stores
        if isinstance(sink, output.HeldPdf):
            assert finish is not None
            pdf = await self._finish_pdf(job, finish, sink.whole(pdf), stages)
        with self._stage("storage_upload", stages), storage_errors.classified("upload"):
            upload_started = time.monotonic()
            size = await pdf_output.store(pdf)
            # The record holds the PDF's upload time; the log line has the record's write too.
            record = self._record(
                job, delivery, "succeeded", {**stages, "storage_upload": _ms(upload_started)}
            )
            record.output_blob, record.output_bytes = job.output, size
            await self.blobs.put_result(record)
            await self._announce(record)
            self.hints.send(job, record=record, pdf=pdf)
        return size

    async def _finish_pdf(
        self,
        job: contract.Job,
        finish: contract.finishing.Finish,
        pdf: bytes,
        stages: dict[str, float],
    ) -> bytes:
        """The finishing stages the job asks for, each timed as ``finish_<name>``."""
        if finish.sign is not None:
            # The refusal signing.apply makes, made here before the job's files load and the
            # other stages run (their work would be wasted), and saying where the key was sought.
            try:
                keys.require(self.signer, self.settings.signing_dir)
            except contract.finishing.FinishError as error:
                raise finishing.FinishingFailed("sign", error.description) from None
        with self._stage("finish_load_files", stages):
            files = await self._load_files(job, finish)
        inputs = finishing.Inputs(
            job_id=job.job_id,
            finish=finish,
            files=files,
            signer=self.signer,
            business_rules=self.settings.en16931_xslt,
        )
        if self.finishers is not None:
            return await self._finish_elsewhere(self.finishers, pdf, inputs, stages)
        for name, stage in finishing.plan(finish):
            with self._stage(f"finish_{name}", stages):
                pdf = await asyncio.to_thread(finishing.run_stage, name, stage, pdf, inputs)
        inputs.owner_password = None
        return pdf

    async def _finish_elsewhere(
        self,
        finishers: processes.FinishingProcesses,
        pdf: bytes,
        inputs: finishing.Inputs,
        stages: dict[str, float],
    ) -> bytes:
        """The stages in a finishing process, each timed there (``finish_<name>``, with its CPU
        in ``reportfarm_stage_cpu_seconds``); ``finish_handover`` is the rest: the wait for a
        free process and the PDF's way there and back."""
        started = time.monotonic()
        if inputs.finish.facturx is not None:
            # EN 16931's rules run here, in this process's Saxon process (a Saxon process spawned
            # from a finishing process hung in the tests), before the hand-over.
            from reportfarm_renderer.finishing import facturx

            with self._stage("finish_rules", stages):
                await asyncio.to_thread(
                    finishing.run_stage, "facturx", facturx.check_rules, pdf, inputs
                )
            inputs.rules_checked = True
            started = time.monotonic()
        self.metrics.finishing_busy.inc()
        try:
            finished = await finishers.run(pdf, inputs)
        except processes.FinisherDied:
            self.metrics.finishing_replaced.inc()
            raise
        finally:
            self.metrics.finishing_busy.dec()
        for timing in finished.timings:
            name = f"finish_{timing.stage}"
            stages[name] = round(timing.wall_s * 1000, 1)
            self.metrics.stage_seconds.labels(stage=name).observe(timing.wall_s)
            self.metrics.stage_cpu.labels(stage=name).inc(timing.cpu_s)
        handover = time.monotonic() - started - sum(t.wall_s for t in finished.timings)
        stages["finish_handover"] = round(max(0.0, handover) * 1000, 1)
        self.metrics.stage_seconds.labels(stage="finish_handover").observe(max(0.0, handover))
        return finished.pdf

    async def _load_files(
        self, job: contract.Job, finish: contract.finishing.Finish
    ) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for name in finishing.files_needed(finish):
            if not contract.finishing.owns_attachment(job.job_id, name):  # decoding checked it
                raise finishing.FinishingFailed("load_files", f"{name!r} is not this job's file")
            try:
                with storage_errors.classified("attachment"):
                    content = await self.blobs.get(name)
            except KeyError:
                raise finishing.FinishingFailed(
                    "load_files", f"the job's file {name!r} does not exist"
                ) from None
            try:
                contract.check_data_size(len(content), what=f"file {name!r}")
            except contract.ContractError as error:
                raise finishing.FinishingFailed("load_files", str(error)) from None
            files[name] = content
        return files

    def _render_html(self, name: str, data: Mapping[str, Any]) -> str:
        return self.catalog.render(name, data)  # a TemplateError is permanent

    async def _load_data(self, job: contract.Job) -> Mapping[str, Any]:
        if job.data is not None:
            return job.data
        assert job.data_blob is not None
        if not contract.owns_blob(job.job_id, job.data_blob, kind="payload"):
            raise _bad_payload(f"data_blob {job.data_blob!r} is not this job's payload")
        try:
            with storage_errors.classified("payload"):
                raw = await self.blobs.get(job.data_blob)
        except KeyError:
            raise _bad_payload(f"payload blob {job.data_blob!r} does not exist") from None
        try:
            contract.check_data_size(len(raw), what="payload", limit=self.settings.max_data_bytes)
        except contract.ContractError as error:
            raise _bad_payload(str(error)) from None
        try:
            data = await asyncio.to_thread(json.loads, raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise _bad_payload(f"payload blob is not JSON: {error}") from None
        except RecursionError:
            raise _bad_payload(
                "payload blob is not JSON the farm can read: nested too deep"
            ) from None
        if not isinstance(data, dict):
            raise _bad_payload("payload blob must hold a JSON object")
        return data

    async def _temporary(
        self, lease: Lease, job: contract.Job, error: Exception, stages: dict[str, float]
    ) -> Outcome:
        """Retry, unless the job has had its deliveries: render timeouts (suspect documents)
        have their own, lower limit."""
        lease.mark_printed()
        attempts = lease.delivery.dequeue_count
        if isinstance(error, pooling.RenderTimeout):
            if attempts >= self.settings.max_render_timeouts:
                reason = f"render timed out on {attempts} deliveries: {error}"
                return await self._poison(
                    lease, job.job_id, job, reason, stages, kind="render_timeout", exhausted=True
                )
        elif attempts >= self.settings.max_dequeue_count:
            reason = f"failed on {attempts} deliveries; last error: {_describe(error)}"
            return await self._poison(
                lease, job.job_id, job, reason, stages, kind="exhausted", exhausted=True
            )
        return await self._retry(lease, job, error)

    async def _retry(self, lease: Lease, job: contract.Job, error: Exception) -> Outcome:
        attempt = lease.delivery.dequeue_count
        delay_s = error.delay_s if isinstance(error, outcomes.TemporaryError) else None
        if delay_s is None:
            delay_s = backoff.compute_backoff(attempt, factor=2.0, max_backoff=120.0)
        delay = round(delay_s)
        storage = isinstance(error, storage_errors.StorageUnavailable)
        if storage or storage_errors.is_transient(error):
            self.metrics.storage_errors.labels(operation="job").inc()
        logger.warning(
            "job %s attempt %d failed, retrying in %d s: %s",
            job.job_id,
            attempt,
            delay,
            _describe(error),
            extra={"job_id": job.job_id, "template": job.template, "attempt": attempt},
        )
        self.metrics.jobs.labels(outcome="retried", template=job.template).inc()
        async with lease.lock:
            lease.done = True
            await lease.queue.release(lease.delivery, delay_s=delay)
        return "retried"

    async def _poison(
        self,
        lease: Lease,
        job_id: str | None,
        job: contract.Job | None,
        reason: str,
        stages: dict[str, float],
        *,
        kind: str,
        exhausted: bool = False,
    ) -> Outcome:
        """Poison the message with ``reason``; ``kind`` labels the metric, ``exhausted`` says it
        failed on too many deliveries (else: permanent)."""
        lease.mark_printed()
        delivery = lease.delivery
        if job_id is not None:
            record = self._record(job, delivery, "failed", stages, job_id=job_id)
            record.error = reason
            record.error_kind = "exhausted" if exhausted else "permanent"
            await self.blobs.put_result(record)
            await self._announce(record)
            self.hints.send(job)
        original_blob = None
        if len(delivery.content) > contract.POISON_INLINE_LIMIT:  # keep it whole, nothing lost
            original_blob = contract.poison_original_blob(delivery.message_id)
            content = delivery.content.encode("utf-8", "surrogatepass")
            await self.blobs.put(original_blob, content, content_type="text/plain")
        async with lease.lock:
            lease.done = True
            await lease.queue.poison(
                delivery, reason=reason, job_id=job_id, original_blob=original_blob
            )
        template = job.template if job else "unknown"
        self.metrics.poisoned.labels(reason=kind).inc()
        self.metrics.jobs.labels(outcome="poisoned", template=template).inc()
        logger.error(
            "job %s poisoned after %d deliveries: %s",
            job_id or delivery.message_id,
            delivery.dequeue_count,
            reason,
            extra={"job_id": job_id, "template": template, "reason_kind": kind},
        )
        return "poisoned"

    async def _finish(self, lease: Lease, *, delete: bool) -> None:
        async with lease.lock:
            lease.done = True
            if delete:
                await lease.queue.delete(lease.delivery)

    async def _announce(self, record: contract.ResultRecord) -> None:
        """A job with a callback URL: put its completion event on the events queue (before the
        job's message is deleted, so the webhook is sent at least once)."""
        if record.callback_url and self.events is not None:
            await self.events.send(contract.completion_event(record))

    def _record(
        self,
        job: contract.Job | None,
        delivery: Delivery,
        state: contract.JobState,
        stages: dict[str, float],
        *,
        job_id: str | None = None,
    ) -> contract.ResultRecord:
        return contract.ResultRecord(
            job_id=job.job_id if job else str(job_id),
            state=state,
            template=job.template if job else None,
            attempts=delivery.dequeue_count,
            stages_ms=dict(stages),
            batch_id=job.batch_id if job else None,
            item_index=job.item_index if job else None,
            tenant=job.tenant if job else None,
            lane=job.lane if job else None,
            callback_url=job.callback_url if job else None,
            worker=self.settings.worker_id,
            submitted_at=job.submitted_at if job else None,
            finished_at=time.time(),
        )

    @contextlib.contextmanager
    def _stage(self, name: str, stages: dict[str, float]) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            stages[name] = _ms(started)
            self.metrics.stage_seconds.labels(stage=name).observe(stages[name] / 1000)


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)


def _describe(error: BaseException) -> str:
    if isinstance(error, outcomes.TemporaryError):
        return error.description[:500]
    return f"{type(error).__name__}: {error}"[:500]


def _bad_payload(message: str) -> outcomes.PermanentError:
    return outcomes.PermanentError(message, kind="payload")
