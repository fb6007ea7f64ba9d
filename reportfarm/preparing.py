"""A batch built and checked as it will be stored, before anything is written: pure, no I/O and
no storage client, so the gateway's body-checking processes import only this (a worker process
that imported the storage SDK held ~18 MiB more, measured)."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from reportfarm import batches, contract, encoding
from reportfarm.encoding import EncodedJob, Submission


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreparedBatch:
    """A batch built and checked, nothing written yet (see ReportFarmClient.prepare_batch)."""

    manifest: contract.BatchManifest
    jobs: list[EncodedJob]
    """In their stored form: data past the farm's limit, as stored, was refused already."""
    lines: list[str]
    """The items as submitted, one JSON line each (the items blob, and the digest's input)."""
    files: list[Mapping[str, bytes] | None]


def prepare_batch(
    items: Sequence[Submission],
    *,
    batch_id: str | None = None,
    tenant: str | None = None,
    callback_url: str | None = None,
    item_webhooks: bool = False,
    lane: contract.Lane = "bulk",
) -> PreparedBatch:
    """Every item built and checked as it will be stored (data past the farm's limit once
    encoded is a ContractError), and the manifest; no I/O, so a caller may run it in a
    thread. Nothing is written unless all of it is valid."""
    batch_id = contract.validate_batch_id(batch_id or contract.new_job_id())
    if not 0 < len(items) <= contract.BATCH_ITEMS_MAX:
        raise contract.ContractError(f"a batch has 1 to {contract.BATCH_ITEMS_MAX} items")
    jobs, encoded = [], []
    for index, item in enumerate(items):
        itemized = dataclasses.replace(
            item,
            job_id=None,
            batch_id=batch_id,
            item_index=index,
            tenant=tenant,
            lane=lane,
            callback_url=callback_url,
        )
        try:
            jobs.append(encoding.build(itemized))
            encoded.append(encoding.encode(jobs[-1]))
        except contract.ContractError as error:
            raise contract.ContractError(f"item {index}: {error}") from None
    lines = [
        batches.item_line(item_body(job, item.files)) for job, item in zip(jobs, items, strict=True)
    ]
    manifest = contract.BatchManifest(
        batch_id=batch_id,
        count=len(jobs),
        tenant=tenant,
        lane=lane,
        callback_url=callback_url,
        item_webhooks=item_webhooks,
        digest=batches.digest(lines),
        created_at=time.time(),
    )
    files = [item.files for item in items]
    return PreparedBatch(manifest=manifest, jobs=encoded, lines=lines, files=files)


def item_body(job: contract.Job, files: Mapping[str, bytes] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"template": job.template, "data": job.data}
    if job.pdf != contract.PdfOptions():
        body["pdf"] = dataclasses.asdict(job.pdf)
    if job.output_blob:
        body["output_blob"] = job.output_blob
    if job.finish is not None and not job.finish.empty:
        body["finish"] = job.finish.to_dict()
    if files:  # in the batch's digest: the same batch id with other files is another batch
        body["files"] = {
            name: hashlib.sha256(content).hexdigest() for name, content in files.items()
        }
    return body
