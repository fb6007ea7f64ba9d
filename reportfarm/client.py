"""The Python client: submit jobs, wait for them, fetch their results and PDFs.

The one library the CLI and the gateway both use. Data too large for a queue message (64 KiB)
travels as a payload blob, decided automatically (claim-check).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reportfarm import contract
from reportfarm.storage.blobs import BlobStore
from reportfarm.storage.queueing import JobQueue


@dataclasses.dataclass(frozen=True)
class QueueStatus:
    queue: str
    depth: int
    """Approximate: includes messages being rendered now."""
    poison_depth: int
    lane: str = "bulk"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Submission:
    """One job to submit: a template and its data, with optional contract fields."""

    template: str
    data: Mapping[str, Any]
    job_id: str | None = None
    pdf: contract.PdfOptions | None = None
    output_blob: str | None = None
    batch_id: str | None = None
    item_index: int | None = None
    tenant: str | None = None
    lane: contract.Lane | None = None
    callback_url: str | None = None


class ReportFarmClient:
    def __init__(
        self, connection_string: str, *, queue: str = "reports", container: str = "reports"
    ) -> None:
        self.queues = {
            lane: JobQueue(connection_string, contract.lane_queue_name(queue, lane))
            for lane in contract.LANES
        }
        self.queue = self.queues["bulk"]
        """The farm's own queue: the bulk lane, and the only one of a farm without lanes."""
        self.blobs = BlobStore(connection_string, container)

    async def __aenter__(self) -> ReportFarmClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        for lane_queue in self.queues.values():
            await lane_queue.close()
        await self.blobs.close()

    async def ensure(self) -> None:
        """Create the lanes' queues, their poison queues and the container if missing."""
        for lane_queue in self.queues.values():
            await lane_queue.ensure()
        await self.blobs.ensure()

    def build_job(self, item: Submission) -> contract.Job:
        job_id = item.job_id or (
            contract.batch_item_job_id(item.batch_id, item.item_index)
            if item.batch_id is not None and item.item_index is not None
            else contract.new_job_id()
        )
        job = contract.Job(
            job_id=contract.JobId(job_id),
            template=item.template,
            data=dict(item.data),
            output_blob=item.output_blob,
            pdf=item.pdf or contract.PdfOptions(),
            batch_id=item.batch_id,
            item_index=item.item_index,
            tenant=item.tenant,
            lane=item.lane,
            callback_url=item.callback_url,
            submitted_at=time.time(),
        )
        job.validate()
        return job

    async def submit(self, item: Submission) -> contract.JobId:
        """Validate and enqueue one job; large data goes to a payload blob first."""
        job = self.build_job(item)
        if not contract.fits_inline(job):
            name = contract.payload_blob(job.job_id)
            payload = json.dumps(job.data, ensure_ascii=False).encode("utf-8")
            await self.blobs.put(name, payload, content_type="application/json")
            job = dataclasses.replace(job, data=None, data_blob=name)
        await self.queues[job.lane or "bulk"].send(contract.encode_message(job))
        return job.job_id

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
    ) -> dict[str, contract.ResultRecord | None]:
        """Poll result records until every job ended or the deadline passed (None: not yet)."""
        pending = list(dict.fromkeys(job_ids))
        results: dict[str, contract.ResultRecord | None] = dict.fromkeys(pending)
        deadline = time.monotonic() + timeout_s
        semaphore = asyncio.Semaphore(32)

        async def check(job_id: str) -> contract.ResultRecord | None:
            async with semaphore:
                return await self.result(job_id)

        while pending:
            found = await asyncio.gather(*(check(job_id) for job_id in pending))
            for job_id, record in zip(pending, found, strict=True):
                if record is not None:
                    results[job_id] = record
                    if on_result:
                        on_result(record)
            pending = [job_id for job_id in pending if results[job_id] is None]
            if not pending or time.monotonic() >= deadline:
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
