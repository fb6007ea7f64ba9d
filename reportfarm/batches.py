"""Batches: a batch's state from its items' result records (pure), and its items as stored.

Where item state lives: in the result records the renderer already writes, one per job
(``results/<batch id>-<index>.json``), plus the batch's manifest and retry notes
(``batches/<batch id>/...``, see :mod:`reportfarm.contract`). No second store to keep in step with
the first: an item is final once its record exists, and nothing but a renderer writes one.

A retry resubmits failed items under the same job ids, so their old failed records stay until the
renderer overwrites them. A :class:`~reportfarm.contract.BatchRetry` note says when the retry was
sent and which items it covers; a listed item's record older than that note is stale, so the item
counts as running again (see :func:`current_records`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import json
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from reportfarm import contract

if TYPE_CHECKING:
    from reportfarm.client import ReportFarmClient

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
        p50_s=quantile(times, 0.50),
        p95_s=quantile(times, 0.95),
        tenant=manifest.tenant,
    )


def quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def merge_pdfs(documents: Iterable[bytes]) -> bytes:
    """One PDF of the given ones, in order."""
    import pypdf  # only the merge needs it

    writer = pypdf.PdfWriter()
    for document in documents:
        writer.append(pypdf.PdfReader(io.BytesIO(document)))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# The command line: ``reportfarm submit --batch``, ``reportfarm batch status|retry|download``.
# Rich, the client and the submit command's helpers are imported when a command runs (the client
# imports this module for the state above).


def submit_main(
    *,
    template: str,
    data: Path,
    batch_id: str | None,
    callback_url: str | None,
    wait: bool,
    timeout: float,
) -> int:
    """Submit a JSONL as one batch; with ``wait``, a live bar and the final table."""
    from reportfarm import submitting

    try:
        items = submitting.read_submissions(data, template=template)
    except submitting.InputError as error:
        submitting.console.print(f"[red]error:[/] {error}")
        return 2

    async def run() -> int:
        async with _client() as client:
            await client.ensure()
            with submitting.progress() as bar:
                task = bar.add_task("submitting", total=len(items))
                submitted = await client.submit_batch(
                    items,
                    batch_id=batch_id,
                    callback_url=callback_url,
                    on_submitted=lambda _: bar.advance(task),
                )
            submitting.console.print(
                f"batch {submitted.batch_id}: {submitted.count} item(s), {submitted.sent} sent"
            )
            print(submitted.batch_id)
            if not wait:
                return 0
            status = await _watch(client, submitted.batch_id, timeout=timeout)
        return _report(status)

    try:
        return asyncio.run(run())
    except contract.ContractError as error:
        submitting.console.print(f"[red]invalid batch:[/] {error}")
        return 2


def status_main(batch_id: str, *, as_json: bool, wait: bool, timeout: float) -> int:
    async def run() -> BatchStatus | None:
        async with _client() as client:
            try:
                if wait:
                    return await _watch(client, batch_id, timeout=timeout)
                return await client.batch_status(batch_id)
            except KeyError:
                return None

    status = asyncio.run(run())
    if status is None:
        print(f"no batch {batch_id}", file=sys.stderr)
        return 2
    if as_json:
        json.dump(status.to_dict(), sys.stdout)
        print()
        return 0 if status.state == "COMPLETED" else 1
    return _report(status)


def retry_main(batch_id: str, *, wait: bool, timeout: float) -> int:
    async def run() -> int:
        async with _client() as client:
            try:
                retried = await client.retry_batch(batch_id)
            except KeyError:
                print(f"no batch {batch_id}", file=sys.stderr)
                return 2
            print(f"retried {len(retried)} failed item(s) of batch {batch_id}", file=sys.stderr)
            if not wait or not retried:
                return 0
            return _report(await _watch(client, batch_id, timeout=timeout))

    return asyncio.run(run())


def download_main(batch_id: str, *, out: Path, merge: bool) -> int:
    """Each succeeded item as ``OUT/<job id>.pdf``, or with ``merge`` one ``OUT/<batch>.pdf``."""
    from reportfarm import submitting

    async def run() -> int:
        async with _client() as client:
            try:
                pdfs = await client.batch_pdfs(batch_id)
            except KeyError:
                print(f"no batch {batch_id}", file=sys.stderr)
                return 2
        out.mkdir(parents=True, exist_ok=True)
        if merge:
            target = out / f"{batch_id}.pdf"
            target.write_bytes(await asyncio.to_thread(merge_pdfs, [pdf for _, pdf in pdfs]))
            submitting.console.print(f"{len(pdfs)} item(s) merged into {target}")
            return 0
        with submitting.progress() as bar:
            task = bar.add_task("writing", total=len(pdfs))
            for index, pdf in pdfs:
                name = contract.batch_item_job_id(batch_id, index)
                (out / f"{name}.pdf").write_bytes(pdf)
                bar.advance(task)
        submitting.console.print(f"{len(pdfs)} PDF(s) in {out}/")
        return 0

    return asyncio.run(run())


def _client() -> ReportFarmClient:
    from reportfarm import submitting

    return submitting._client()


async def _watch(client: ReportFarmClient, batch_id: str, *, timeout: float) -> BatchStatus:
    """Wait for the batch with a live bar of final items."""
    from reportfarm import submitting

    with submitting.progress() as bar:
        task = bar.add_task("rendering", total=None)

        def show(status: BatchStatus) -> None:
            bar.update(task, total=status.total, completed=status.succeeded + status.failed)

        return await client.wait_batch(batch_id, timeout_s=timeout, on_status=show)


def _report(status: BatchStatus) -> int:
    """The final table (done, failed, running, p50/p95) and the failed items with reasons; the
    exit status is 0 only for COMPLETED."""
    from rich.table import Table

    from reportfarm import submitting

    table = Table(title=f"batch {status.batch_id}: {status.state}")
    for column in ("items", "done", "failed", "running", "retries", "p50 s", "p95 s"):
        table.add_column(column, justify="right")
    table.add_row(
        str(status.total),
        str(status.succeeded),
        str(status.failed),
        str(status.running),
        str(status.retries),
        f"{status.p50_s:.2f}" if status.p50_s is not None else "-",
        f"{status.p95_s:.2f}" if status.p95_s is not None else "-",
    )
    submitting.console.print(table)
    if status.failed_items:
        errors = Table(title="failed items")
        for column in ("item", "job id", "attempts", "reason"):
            errors.add_column(column)
        for item in status.failed_items[:20]:
            errors.add_row(str(item.index), item.job_id, str(item.attempts), item.error[:200])
        if len(status.failed_items) > 20:
            errors.caption = f"and {len(status.failed_items) - 20} more (--json lists all)"
        submitting.console.print(errors)
    return 0 if status.state == "COMPLETED" else 1
