"""The Python client: submit jobs, wait for them, fetch their results and PDFs.

The one library the CLI and the gateway both use. Data too large for a queue message (64 KiB)
travels as a payload blob, decided automatically (claim-check).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from reportfarm import batches, contract, encoding, finishing, preparing
from reportfarm.encoding import EncodedJob, Submission
from reportfarm.storage import accounts
from reportfarm.storage.blobs import BlobStore
from reportfarm.storage.queueing import Delivery, JobQueue

WAIT_WINDOW = 8
"""Records :meth:`ReportFarmClient.wait` reads at a time, oldest first."""
WAIT_SWEEP_S = 30.0
"""How often :meth:`ReportFarmClient.wait` reads every pending record (jobs ending out of order)."""


@dataclasses.dataclass(frozen=True)
class QueueStatus:
    queue: str
    depth: int
    """Approximate: includes messages being rendered now."""
    poison_depth: int
    lane: str = "bulk"


class ReportFarmClient:
    def __init__(
        self,
        account: accounts.Account | str,
        *,
        queue: str = "reports",
        container: str = "reports",
    ) -> None:
        """``account``: a storage account (reportfarm.storage.accounts) or a connection string;
        :meth:`close` closes the credential the account owns."""
        self.account = accounts.of(account)
        self.queues = {
            lane: JobQueue(self.account, contract.lane_queue_name(queue, lane))
            for lane in contract.LANES
        }
        self.queue = self.queues["bulk"]
        """The farm's own queue: the bulk lane, and the only one of a farm without lanes."""
        self.blobs = BlobStore(self.account, container)
        self.events = JobQueue(self.account, contract.events_queue_name(queue))
        """Job and batch completion events, consumed by the webhook dispatcher."""
        self._record_cache: dict[str, contract.ResultRecord] = {}

    async def __aenter__(self) -> ReportFarmClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        for lane_queue in self.queues.values():
            await lane_queue.close()
        await self.events.close()
        await self.blobs.close()
        await self.account.close()

    async def ensure(self) -> None:
        """Create the lanes' queues, the events queue, their poison queues and the container."""
        for lane_queue in (*self.queues.values(), self.events):
            await lane_queue.ensure()
        await self.blobs.ensure()

    def build_job(self, item: Submission) -> contract.Job:
        return encoding.build(item)

    async def submit(self, item: Submission) -> contract.JobId:
        """Validate and enqueue one job; its files and large data go to blobs first."""
        job = self.build_job(item)
        await self.upload_files(job.job_id, item.files)
        return await self.send_job(job)

    async def upload_files(self, job_id: str, files: Mapping[str, bytes] | None) -> None:
        """A job's files, to ``attachments/<job id>/<name>``: before the job is sent."""
        for name, content in (files or {}).items():
            contract.check_data_size(len(content), what=f"file {name!r}")
            blob = finishing.attachment_blob(job_id, name)
            await self.blobs.put(blob, content, content_type="application/octet-stream")

    async def send_job(self, job: contract.Job) -> contract.JobId:
        """Enqueue a built job on its lane; large data goes to a payload blob first."""
        return await self.send_encoded(encoding.encode(job))

    async def send_encoded(self, job: EncodedJob) -> contract.JobId:
        """Enqueue a job in its stored form (reportfarm.encoding): its payload blob first."""
        await self._put_payload(job)
        await self.queues[job.lane].send(job.message)
        return job.job_id

    async def send_held(self, job: EncodedJob, *, held_s: int) -> tuple[JobQueue, Delivery]:
        """:meth:`send_encoded`, the message invisible for ``held_s`` seconds: its lane's queue
        and its delivery, to hand to a renderer (``JobQueue.send_held``)."""
        await self._put_payload(job)
        queue = self.queues[job.lane]
        return queue, await queue.send_held(job.message, held_s=held_s)

    async def _put_payload(self, job: EncodedJob) -> None:
        """A job's large data, to its payload blob: stored before its message is sent."""
        if job.payload is not None:
            name = contract.payload_blob(job.job_id)
            await self.blobs.put(name, job.payload, content_type="application/json")

    async def submit_many(
        self,
        items: Iterable[Submission],
        *,
        concurrency: int = 16,
        on_submitted: Callable[[contract.JobId], None] | None = None,
    ) -> list[contract.JobId]:
        """Submit in order with bounded concurrency; the first item goes first."""
        semaphore = asyncio.Semaphore(concurrency)

        async def one(item: Submission) -> contract.JobId:
            async with semaphore:
                job_id = await self.submit(item)
            if on_submitted:
                on_submitted(job_id)
            return job_id

        items = list(items)
        if not items:
            return []
        first = await one(items[0])
        rest = await asyncio.gather(*(one(item) for item in items[1:]))
        return [first, *rest]

    async def result(self, job_id: str) -> contract.ResultRecord | None:
        return await self.blobs.get_result(job_id)

    async def wait(
        self,
        job_ids: Iterable[str],
        *,
        timeout_s: float,
        poll_s: float = 0.25,
        on_result: Callable[[contract.ResultRecord], None] | None = None,
        window: int = WAIT_WINDOW,
        sweep_s: float = WAIT_SWEEP_S,
    ) -> dict[str, contract.ResultRecord | None]:
        """Poll result records until every job ended or the deadline passed (None: not yet).

        Jobs end in about the order they were sent (a lane is a FIFO queue), so a poll reads the
        oldest pending records ``window`` at a time and stops at the first window that still
        misses one: it costs about the records that arrived since the last poll plus one window,
        not one read per pending job (5,000 pending jobs were 5,000 reads a poll, and in the
        benchmark the waiting client cost more storage calls than the farm). A job that ends out
        of order is seen once the ones before it have ended, by a full sweep every ``sweep_s``,
        or by the last sweep at the deadline, whichever comes first."""
        pending = list(dict.fromkeys(job_ids))
        results: dict[str, contract.ResultRecord | None] = dict.fromkeys(pending)
        deadline = time.monotonic() + timeout_s
        semaphore = asyncio.Semaphore(32)
        window = max(1, window)

        async def check(job_id: str) -> contract.ResultRecord | None:
            async with semaphore:
                return await self.result(job_id)

        async def read(job_ids: list[str]) -> bool:
            """Read these records; True when all of them have ended."""
            found = await asyncio.gather(*(check(job_id) for job_id in job_ids))
            for job_id, record in zip(job_ids, found, strict=True):
                if record is not None:
                    results[job_id] = record
                    if on_result:
                        on_result(record)
            return all(record is not None for record in found)

        swept = time.monotonic()
        while pending:
            if time.monotonic() - swept >= sweep_s:
                await read(pending)
                swept = time.monotonic()
            else:
                for start in range(0, len(pending), window):
                    if not await read(pending[start : start + window]):
                        break
            pending = [job_id for job_id in pending if results[job_id] is None]
            if not pending:
                break
            if time.monotonic() >= deadline:
                await read(pending)  # the last sweep: every job that ended is reported
                break
            await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
        return results

    async def download(self, record: contract.ResultRecord) -> bytes:
        if record.state != "succeeded" or not record.output_blob:
            raise ValueError(f"job {record.job_id} has no PDF: {record.error}")
        return await self.blobs.get(record.output_blob)

    async def status(self) -> list[QueueStatus]:
        """Each lane's queue depth and poison count."""
        return [
            QueueStatus(
                queue=lane_queue.name,
                depth=await lane_queue.depth(),
                poison_depth=await lane_queue.poison_depth(),
                lane=lane,
            )
            for lane, lane_queue in self.queues.items()
        ]

    # Batches: a manifest and the items' jobs as submitted, then one job per item, first item
    # first. State comes from the items' result records (see reportfarm.batches).

    prepare_batch = staticmethod(preparing.prepare_batch)
    """Every item built and checked as it will be stored, and the manifest; no I/O (see
    reportfarm.preparing)."""

    async def submit_batch(
        self,
        items: Sequence[Submission],
        *,
        batch_id: str | None = None,
        tenant: str | None = None,
        callback_url: str | None = None,
        item_webhooks: bool = False,
        lane: contract.Lane = "bulk",
        on_submitted: Callable[[contract.JobId], None] | None = None,
    ) -> BatchSubmitted:
        """Submit a batch. The same batch id with the same items again sends nothing new (only
        items of an interrupted submission that have no record yet); with other items, or from
        another tenant, it raises BatchConflict."""
        prepared = self.prepare_batch(
            items,
            batch_id=batch_id,
            tenant=tenant,
            callback_url=callback_url,
            item_webhooks=item_webhooks,
            lane=lane,
        )
        return await self.submit_prepared(prepared, on_submitted=on_submitted)

    async def submit_prepared(
        self,
        prepared: PreparedBatch,
        *,
        on_submitted: Callable[[contract.JobId], None] | None = None,
    ) -> BatchSubmitted:
        """Write and send a prepared batch. Its manifest is created first, by a conditional
        write (If-None-Match: *): of two submissions racing on one id, one creates the batch and
        the other is a re-submission of it (or a BatchConflict), never a second owner."""
        manifest = prepared.manifest
        batch_id = manifest.batch_id
        existing = await self.batch_manifest(batch_id)
        if existing is None and not await self.blobs.create(
            contract.batch_manifest_blob(batch_id), manifest.to_json(), "application/json"
        ):
            existing = await self.batch_manifest(batch_id)
        if existing is not None:
            return await self._resubmit(existing, prepared, on_submitted)
        await self._write_items(prepared)
        await self._send_jobs(prepared.jobs, on_submitted)
        await self._mark_sent(batch_id)
        count = len(prepared.jobs)
        return BatchSubmitted(batch_id=batch_id, count=count, created=True, sent=count)

    async def _write_items(self, prepared: PreparedBatch) -> None:
        """The items as submitted, and their files: kept for retries (idempotent content)."""
        await self.blobs.put(
            contract.batch_items_blob(prepared.manifest.batch_id),
            ("\n".join(prepared.lines) + "\n").encode("utf-8"),
            content_type="application/x-ndjson",
        )
        for job, files in zip(prepared.jobs, prepared.files, strict=True):
            await self.upload_files(job.job_id, files)

    async def _resubmit(
        self,
        existing: contract.BatchManifest,
        prepared: PreparedBatch,
        on_submitted: Callable[[contract.JobId], None] | None,
    ) -> BatchSubmitted:
        wanted = prepared.manifest
        if existing.tenant != wanted.tenant or existing.digest != wanted.digest:
            raise BatchConflict(f"batch {existing.batch_id} exists with other items or owner")
        batch_id = existing.batch_id
        sent = 0
        if not await self.blobs.exists(contract.batch_sent_blob(batch_id)):
            # The first submission stopped half-way (or runs now): write its items (the same
            # bytes) and send what has no record yet. A job sent twice renders twice into the
            # same blobs: no duplicate output.
            await self._write_items(prepared)
            done = await self._recorded_items(existing)
            missing = [job for job in prepared.jobs if job.item_index not in done]
            await self._send_jobs(missing, on_submitted)
            await self._mark_sent(batch_id)
            sent = len(missing)
        return BatchSubmitted(batch_id=batch_id, count=existing.count, created=False, sent=sent)

    async def _send_jobs(
        self,
        jobs: Sequence[contract.Job | EncodedJob],
        on_submitted: Callable[[contract.JobId], None] | None,
    ) -> None:
        semaphore = asyncio.Semaphore(16)

        async def one(job: contract.Job | EncodedJob) -> None:
            async with semaphore:
                if isinstance(job, EncodedJob):
                    await self.send_encoded(job)
                else:
                    await self.send_job(job)
            if on_submitted:
                on_submitted(job.job_id)

        if jobs:
            await one(jobs[0])  # the first item first: the user sees a result quickly
            await asyncio.gather(*(one(job) for job in jobs[1:]))

    async def _mark_sent(self, batch_id: str) -> None:
        body = json.dumps({"at": time.time()}).encode("utf-8")
        await self.blobs.put(
            contract.batch_sent_blob(batch_id), body, content_type="application/json"
        )

    async def batch_manifest(self, batch_id: str) -> contract.BatchManifest | None:
        try:
            raw = await self.blobs.get(contract.batch_manifest_blob(batch_id))
        except KeyError:
            return None
        return contract.BatchManifest.from_json(raw)

    async def batch_retries(self, batch_id: str) -> list[contract.BatchRetry]:
        names = sorted(await self.blobs.list(contract.batch_retries_prefix(batch_id)))
        return [contract.BatchRetry.from_json(await self.blobs.get(name)) for name in names]

    async def _recorded_items(self, manifest: contract.BatchManifest) -> set[int]:
        """Items that have a result record (current or stale), from one listing."""
        found = set()
        for name in await self.blobs.list(contract.batch_results_prefix(manifest.batch_id)):
            parsed = contract.split_batch_item_job_id(name.removeprefix("results/")[:-5])
            if parsed and parsed[0] == manifest.batch_id and parsed[1] < manifest.count:
                found.add(parsed[1])
        return found

    async def batch_records(
        self, manifest: contract.BatchManifest, retries: Sequence[contract.BatchRetry]
    ) -> dict[int, contract.ResultRecord]:
        """The items' records. A final record changes only after a retry, so one read before is
        kept in memory (a cache: losing it costs reads, nothing else)."""
        latest = batches.latest_retry(retries)
        wanted = []
        records: dict[int, contract.ResultRecord] = {}
        for index in sorted(await self._recorded_items(manifest)):
            job_id = contract.batch_item_job_id(manifest.batch_id, index)
            cached = self._record_cache.get(job_id)
            if cached is not None and not batches.is_stale(cached, latest.get(index)):
                records[index] = cached
            else:
                wanted.append(index)
        semaphore = asyncio.Semaphore(32)

        async def read(index: int) -> None:
            job_id = contract.batch_item_job_id(manifest.batch_id, index)
            async with semaphore:
                record = await self.result(job_id)
            if record is not None:
                records[index] = record
                if len(self._record_cache) > RECORD_CACHE_MAX:
                    self._record_cache.clear()
                self._record_cache[job_id] = record

        await asyncio.gather(*(read(index) for index in wanted))
        return records

    async def batch_status(self, batch_id: str) -> batches.BatchStatus:
        """Counts, state and failed items with reasons; KeyError for an unknown batch."""
        manifest = await self.batch_manifest(batch_id)
        if manifest is None:
            raise KeyError(batch_id)
        retries = await self.batch_retries(batch_id)
        records = await self.batch_records(manifest, retries)
        return batches.summarize(manifest, records, retries)

    async def batch_items(self, batch_id: str) -> list[dict[str, Any]]:
        """The items as submitted (template, data, pdf, output_blob), in order."""
        raw = await self.blobs.get(contract.batch_items_blob(batch_id))
        return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]

    async def retry_batch(self, batch_id: str) -> list[int]:
        """Resubmit the failed items only, under their job ids; returns their indexes.

        The retry note is written after the jobs are sent: a retry interrupted before it leaves
        the old failed records visible (retry again), never items waiting for nothing."""
        manifest = await self.batch_manifest(batch_id)
        if manifest is None:
            raise KeyError(batch_id)
        status = await self.batch_status(batch_id)
        failed = [item.index for item in status.failed_items]
        if not failed:
            return []
        bodies = await self.batch_items(batch_id)
        at = time.time()
        jobs = [
            self.build_job(
                Submission(
                    template=bodies[index]["template"],
                    data=bodies[index]["data"],
                    pdf=contract.PdfOptions(**bodies[index].get("pdf") or {}),
                    output_blob=bodies[index].get("output_blob"),
                    finish=(
                        finishing.Finish.from_dict(bodies[index]["finish"])
                        if bodies[index].get("finish")
                        else None
                    ),
                    batch_id=batch_id,
                    item_index=index,
                    tenant=manifest.tenant,
                    lane=manifest.lane,
                    callback_url=manifest.callback_url,
                )
            )
            for index in failed
        ]
        await self._send_jobs(jobs, None)
        retry = contract.BatchRetry(at=at, items=tuple(failed))
        await self.blobs.put(
            contract.batch_retry_blob(batch_id, at),
            retry.to_json(),
            content_type="application/json",
        )
        if manifest.callback_url:
            # Items that ended before the note existed announced nothing new: check once more.
            await self.events.send(contract.batch_event(batch_id))
        return failed

    async def wait_batch(
        self,
        batch_id: str,
        *,
        timeout_s: float,
        poll_s: float = 1.0,
        on_status: Callable[[batches.BatchStatus], None] | None = None,
    ) -> batches.BatchStatus:
        """Poll the batch's state until it is final or the deadline passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = await self.batch_status(batch_id)
            if on_status:
                on_status(status)
            if status.final or time.monotonic() >= deadline:
                return status
            await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))

    async def batch_pdfs(self, batch_id: str) -> list[tuple[int, bytes]]:
        """The succeeded items' PDFs, in item order."""
        manifest = await self.batch_manifest(batch_id)
        if manifest is None:
            raise KeyError(batch_id)
        records = await self.batch_records(manifest, await self.batch_retries(batch_id))
        done = sorted(
            (index, record) for index, record in records.items() if record.state == "succeeded"
        )
        semaphore = asyncio.Semaphore(16)

        async def fetch(record: contract.ResultRecord) -> bytes:
            async with semaphore:
                return await self.download(record)

        pdfs = await asyncio.gather(*(fetch(record) for _, record in done))
        return [(index, pdf) for (index, _), pdf in zip(done, pdfs, strict=True)]


RECORD_CACHE_MAX = 200_000


PreparedBatch = preparing.PreparedBatch


class BatchConflict(Exception):
    """The batch id is taken by other items or another tenant."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchSubmitted:
    batch_id: str
    count: int
    created: bool
    """False: the batch existed already (a re-submission)."""
    sent: int
    """Jobs put on the queue by this call."""
