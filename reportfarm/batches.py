"""Batches: a batch's state from its items' result records (pure), and its items as stored.

Where item state lives: in the result records the renderer already writes, one per job
(``results/<batch id>-<index>.json``), plus the batch's manifest and retry notes
(``batches/<batch id>/...``, see :mod:`reportfarm.contract`). No second store to keep in step with
the first: an item is final once its record exists, and nothing but a renderer writes one.

A retry resubmits failed items under the same job ids, so their old failed records stay until the
renderer overwrites them. A :class:`~reportfarm.contract.BatchRetry` note says when the retry was
sent and which items it covers; a listed item's record older than that note is stale, so the item
counts as running again (see :func:`current_records`).

The command line over these (``reportfarm submit --batch``, ``reportfarm batch ...``) is
:mod:`reportfarm.batch_commands`, beside :mod:`reportfarm.submitting`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from reportfarm import contract, quantiles

BatchState = Literal["RUNNING", "COMPLETED", "PARTIAL_FAILED", "FAILED"]


@dataclasses.dataclass(frozen=True)
class FailedItem:
    index: int
    job_id: str
    error: str
    attempts: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchStatus:
    batch_id: str
    state: BatchState
    total: int
    succeeded: int
    failed: int
    running: int
    retries: int
    """How many retries were sent: the generation of the batch's completion webhook."""
    failed_items: tuple[FailedItem, ...]
    p50_s: float | None
    p95_s: float | None
    """Submit-to-stored seconds of the succeeded items."""
    tenant: str | None = None

    @property
    def final(self) -> bool:
        return self.state != "RUNNING"

    def to_dict(self, *, failed_limit: int | None = None) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["failed_items"] = [
            dataclasses.asdict(item) for item in self.failed_items[:failed_limit]
        ]
        return body


def item_line(item: Mapping[str, Any]) -> str:
    """One item of ``items.jsonl``, canonical (sorted keys), so equal items give equal digests."""
    return json.dumps(item, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def digest(lines: Iterable[str]) -> str:
    hasher = hashlib.sha256()
    for line in lines:
        hasher.update(line.encode("utf-8"))
        hasher.update(b"\n")
    return hasher.hexdigest()


def latest_retry(retries: Sequence[contract.BatchRetry]) -> dict[int, float]:
    """For each retried item, when its latest retry was sent."""
    latest: dict[int, float] = {}
    for retry in retries:
        for index in retry.items:
            latest[index] = max(latest.get(index, 0.0), retry.at)
    return latest


def is_stale(record: contract.ResultRecord, retried_at: float | None) -> bool:
    """A record written for a submission older than the item's latest retry."""
    return retried_at is not None and (record.submitted_at or 0.0) < retried_at


def current_records(
    records: Mapping[int, contract.ResultRecord], retries: Sequence[contract.BatchRetry]
) -> dict[int, contract.ResultRecord]:
    latest = latest_retry(retries)
    return {
        index: record
        for index, record in records.items()
        if not is_stale(record, latest.get(index))
    }


def summarize(
    manifest: contract.BatchManifest,
    records: Mapping[int, contract.ResultRecord],
    retries: Sequence[contract.BatchRetry] = (),
) -> BatchStatus:
    """The batch's state: RUNNING while any item has no current record, then COMPLETED (none
    failed), FAILED (none succeeded) or PARTIAL_FAILED."""
    current = {
        index: record
        for index, record in current_records(records, retries).items()
        if 0 <= index < manifest.count
    }
    succeeded = [record for record in current.values() if record.state == "succeeded"]
    failed = sorted(
        (
            FailedItem(index, record.job_id, record.error or "", record.attempts)
            for index, record in current.items()
            if record.state != "succeeded"
        ),
        key=lambda item: item.index,
    )
    running = manifest.count - len(current)
    state: BatchState
    if running:
        state = "RUNNING"
    elif not failed:
        state = "COMPLETED"
    elif not succeeded:
        state = "FAILED"
    else:
        state = "PARTIAL_FAILED"
    times = sorted(
        record.finished_at - record.submitted_at
        for record in succeeded
        if record.finished_at is not None and record.submitted_at is not None
    )
    return BatchStatus(
        batch_id=manifest.batch_id,
        state=state,
        total=manifest.count,
        succeeded=len(succeeded),
        failed=len(failed),
        running=running,
        retries=len(retries),
        failed_items=tuple(failed),
        p50_s=quantiles.quantile(times, 0.50),
        p95_s=quantiles.quantile(times, 0.95),
        tenant=manifest.tenant,
    )


def merge_pdfs(documents: Iterable[bytes]) -> bytes:
    """One PDF of the given ones, in order."""
    import pypdf  # only the merge needs it

    writer = pypdf.PdfWriter()
    for document in documents:
        writer.append(pypdf.PdfReader(io.BytesIO(document)))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
