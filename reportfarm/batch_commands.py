"""The command line of batches: ``reportfarm submit --batch``, ``reportfarm batch
status|retry|download``: live bars while items finish, the final table, the failed items.

The batch state itself (pure) is :mod:`reportfarm.batches`; the client computes it, this module
shows it. Beside :mod:`reportfarm.submitting`, whose console, bars and client it shares.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from reportfarm import batches, contract, naming, submitting
from reportfarm.client import ReportFarmClient


def submit_main(
    *,
    template: str,
    data: Path,
    batch_id: str | None,
    callback_url: str | None,
    wait: bool,
    timeout: float,
    extras: submitting.Extras | None = None,
) -> int:
    """Submit a JSONL as one batch; with ``wait``, a live bar and the final table."""
    try:
        items = submitting.with_extras(
            submitting.read_submissions(data, template=template), extras or submitting.Extras()
        )
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
    async def run() -> batches.BatchStatus | None:
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


def download_main(batch_id: str, *, out: Path, merge: bool, name: str = "{job_id}") -> int:
    """Each succeeded item as ``OUT/<name>.pdf`` (``name`` a :mod:`reportfarm.naming` pattern;
    default the item's job id, ``<batch id>-<index>``) with ``OUT/index.csv``, or with ``merge``
    one ``OUT/<batch id>.pdf``."""
    try:
        naming.check(name)
    except naming.PatternError as error:
        submitting.console.print(f"[red]error:[/] {error}", soft_wrap=True, highlight=False)
        return 2

    async def run() -> int:
        async with _client() as client:
            try:
                pdfs = await client.batch_pdfs(batch_id)
            except KeyError:
                print(f"no batch {batch_id}", file=sys.stderr)
                return 2
            items = [] if merge else await client.batch_items(batch_id)
        out.mkdir(parents=True, exist_ok=True)
        if merge:
            target = out / f"{batch_id}.pdf"
            merged = await asyncio.to_thread(batches.merge_pdfs, [pdf for _, pdf in pdfs])
            target.write_bytes(merged)
            submitting.console.print(f"{len(pdfs)} item(s) merged into {target}")
            return 0
        rows = _write_named(batch_id, items=items, pdfs=dict(pdfs), out=out, pattern=name)
        index_path = naming.write_index(out, rows)
        submitting.console.print(submitting.index_table(rows, out=out, index=index_path))
        return 0

    return asyncio.run(run())


def _write_named(
    batch_id: str,
    *,
    items: Sequence[Mapping[str, Any]],
    pdfs: Mapping[int, bytes],
    out: Path,
    pattern: str,
) -> list[naming.IndexRow]:
    """Write the succeeded items' PDFs under their names; the index rows of every item."""
    jobs = [
        naming.Job(
            job_id=contract.batch_item_job_id(batch_id, index),
            template=str(item.get("template") or ""),
            data=item["data"] if isinstance(item.get("data"), dict) else {},
            index=index + 1,
        )
        for index, item in enumerate(items)
    ]
    names = naming.file_names(jobs, pattern=pattern)
    rows = []
    with submitting.progress() as bar:
        task = bar.add_task("writing", total=len(pdfs))
        for index, job in enumerate(jobs):
            file = names[job.job_id] if index in pdfs else ""
            if file:
                (out / file).write_bytes(pdfs[index])
                bar.advance(task)
            state = "succeeded" if file else "not succeeded"
            rows.append(
                naming.IndexRow(file=file, job_id=job.job_id, template=job.template, state=state)
            )
    return rows


def _client() -> ReportFarmClient:
    return submitting._client()


async def _watch(client: ReportFarmClient, batch_id: str, *, timeout: float) -> batches.BatchStatus:
    """Wait for the batch with a live bar of final items."""
    with submitting.progress() as bar:
        task = bar.add_task("rendering", total=None)

        def show(status: batches.BatchStatus) -> None:
            bar.update(task, total=status.total, completed=status.succeeded + status.failed)

        return await client.wait_batch(batch_id, timeout_s=timeout, on_status=show)


def _report(status: batches.BatchStatus) -> int:
    """The final table (done, failed, running, p50/p95) and the failed items with reasons; the
    exit status is 0 only for COMPLETED."""
    table = Table(title=f"batch {status.batch_id}: {status.state}")
    for column in ("items", "done", "failed", "running", "retries", "p50 s", "p95 s"):
        table.add_column(column, justify="right")
    table.add_row(
        str(status.total),
        str(status.succeeded),
        str(status.failed),
        str(status.running),
        str(status.retries),
        submitting.seconds_cell(status.p50_s),
        submitting.seconds_cell(status.p95_s),
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
