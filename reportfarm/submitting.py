"""``reportfarm submit`` and ``reportfarm status``: jobs in, progress bars and tables out."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reportfarm import contract
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings

console = Console(stderr=True)


class InputError(ValueError):
    """The data file cannot be turned into jobs."""


def read_submissions(path: Path, *, template: str) -> list[Submission]:
    """A ``.json`` object is one job; each line of a ``.jsonl`` is one job, either a data object
    or ``{"template": ..., "data": {...}, "job_id"?: ..., "pdf"?: {...}}``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot read {path}: {error}") from None
    if path.suffix == ".jsonl":
        lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    else:
        lines = [(1, text)]
    items = []
    for number, line in lines:
        try:
            body = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not JSON: {error}") from None
        if not isinstance(body, dict):
            raise InputError(f"{path}:{number}: a job is a JSON object")
        items.append(_submission(body, template=template, where=f"{path}:{number}"))
    if not items:
        raise InputError(f"{path} holds no job")
    return items


def _submission(body: dict[str, Any], *, template: str, where: str) -> Submission:
    if "data" not in body or not isinstance(body["data"], dict):
        return Submission(template=template, data=body)
    pdf = body.get("pdf")
    try:
        options = contract.PdfOptions(**pdf) if isinstance(pdf, dict) else None
    except TypeError as error:
        raise InputError(f"{where}: bad pdf options: {error}") from None
    return Submission(
        template=str(body.get("template") or template),
        data=body["data"],
        job_id=body.get("job_id"),
        pdf=options,
    )


def connection_string() -> str:
    value = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if not value:
        raise SystemExit(
            "AZURE_STORAGE_CONNECTION_STRING is not set: point it at your storage account, "
            "or run `reportfarm up --serve`, which starts Azurite and prints one"
        )
    return value


def _client() -> ReportFarmClient:
    storage = StorageSettings.from_env()
    return ReportFarmClient(connection_string(), queue=storage.queue, container=storage.container)


def main(*, template: str, data: Path, wait: bool, out: Path | None, timeout: float) -> int:
    try:
        items = read_submissions(data, template=template)
    except InputError as error:
        console.print(f"[red]error:[/] {error}")
        return 2
    try:
        return asyncio.run(_submit(items, wait=wait, out=out, timeout=timeout))
    except contract.ContractError as error:
        console.print(f"[red]invalid job:[/] {error}")
        return 2


async def _submit(items: list[Submission], *, wait: bool, out: Path | None, timeout: float) -> int:
    async with _client() as client:
        await client.ensure()
        with progress() as bar:
            task = bar.add_task("submitting", total=len(items))
            job_ids = await client.submit_many(items, on_submitted=lambda _: bar.advance(task))
        if not wait:
            for job_id in job_ids:
                print(job_id)
            console.print(f"submitted {len(job_ids)} job(s) to queue {client.queue.name}")
            return 0
        with progress() as bar:
            task = bar.add_task("rendering", total=len(job_ids))
            results = await client.wait(
                job_ids, timeout_s=timeout, on_result=lambda _: bar.advance(task)
            )
        if out is not None:
            await download(client, results, out)
    return report(results)


async def download(
    client: ReportFarmClient, results: dict[str, contract.ResultRecord | None], out: Path
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    done = [r for r in results.values() if r is not None and r.state == "succeeded"]
    with progress() as bar:
        task = bar.add_task("downloading", total=len(done))
        for record in done:
            (out / f"{record.job_id}.pdf").write_bytes(await client.download(record))
            bar.advance(task)
    console.print(f"PDFs in {out}/")


def report(results: dict[str, contract.ResultRecord | None]) -> int:
    """The final table; the exit status is 1 if any job failed or did not finish."""
    records = [r for r in results.values() if r is not None]
    done = [r for r in records if r.state == "succeeded"]
    failed = [r for r in records if r.state == "failed"]
    missing = len(results) - len(records)
    times = sorted(
        (r.finished_at - r.submitted_at)
        for r in done
        if r.finished_at is not None and r.submitted_at is not None
    )
    table = Table(title="jobs")
    for column in ("done", "failed", "not finished", "p50 s", "p95 s"):
        table.add_column(column, justify="right")
    table.add_row(
        str(len(done)),
        str(len(failed)),
        str(missing),
        f"{_quantile(times, 0.50):.2f}" if times else "-",
        f"{_quantile(times, 0.95):.2f}" if times else "-",
    )
    console.print(table)
    if failed:
        errors = Table(title="failed jobs")
        errors.add_column("job id")
        errors.add_column("reason")
        for record in failed[:20]:
            errors.add_row(record.job_id, record.error or "")
        console.print(errors)
    return 1 if failed or missing else 0


def _quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def progress() -> Progress:
    return Progress(
        TextColumn("{task.description:>12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def status_main(*, as_json: bool) -> int:
    async def read() -> list[dict[str, Any]]:
        async with _client() as client:
            lanes = await client.status()
        return [
            {
                "lane": lane.lane,
                "queue": lane.queue,
                "depth": lane.depth,
                "poison": lane.poison_depth,
            }
            for lane in lanes
        ]

    state = asyncio.run(read())
    if as_json:
        json.dump({"lanes": state}, sys.stdout)
        print()
        return 0
    table = Table(title="reportfarm queues")
    for column, justify in (
        ("lane", "left"),
        ("queue", "left"),
        ("depth", "right"),
        ("poison", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for lane in state:
        table.add_row(lane["lane"], lane["queue"], str(lane["depth"]), str(lane["poison"]))
    table.caption = "depth is approximate and includes jobs being rendered"
    Console().print(table)
    return 0
