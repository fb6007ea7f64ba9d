"""``reportfarm submit`` and ``reportfarm status``: jobs in, progress bars and tables out."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reportfarm import connecting, contract, finishing, naming, quantiles
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings

console = Console(stderr=True)


class InputError(ValueError):
    """The data file cannot be turned into jobs."""


@dataclasses.dataclass(frozen=True)
class Extras:
    """What ``reportfarm submit`` adds to every job: finishing (``--finish``), files
    (``--file``), a tagged PDF and an outline (``--tagged``, ``--outline``)."""

    finish: finishing.Finish | None = None
    files: Mapping[str, bytes] = dataclasses.field(default_factory=dict)
    tagged: bool = False
    outline: bool = False


def read_extras(
    *, finish: Path | None, files: Sequence[str], tagged: bool = False, outline: bool = False
) -> Extras:
    """``--finish FILE.json`` and ``--file NAME=PATH`` (or ``--file PATH``: its own name)."""
    options = None
    if finish is not None:
        try:
            options = finishing.Finish.from_dict(json.loads(finish.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InputError(f"cannot read {finish}: {error}") from None
        except finishing.FinishError as error:
            raise InputError(f"{finish}: {error}") from None
    contents: dict[str, bytes] = {}
    for given in files:
        name, _, where = given.rpartition("=") if "=" in given else ("", "", given)
        name = name or Path(where).name
        if not finishing.valid_file_name(name):
            raise InputError(f"--file {given}: the name {name!r} must be 1-100 of [A-Za-z0-9._-]")
        try:
            contents[name] = Path(where).read_bytes()
        except OSError as error:
            raise InputError(f"--file {given}: {error}") from None
    return Extras(finish=options, files=contents, tagged=tagged, outline=outline)


def with_extras(items: Sequence[Submission], extras: Extras) -> list[Submission]:
    """Each job with the extras (a line's own ``finish`` wins over ``--finish``)."""
    done = []
    for item in items:
        pdf = item.pdf or contract.PdfOptions()
        if extras.tagged or extras.outline:
            pdf = dataclasses.replace(
                pdf, tagged=pdf.tagged or extras.tagged, outline=pdf.outline or extras.outline
            )
        done.append(
            dataclasses.replace(
                item,
                pdf=pdf,
                finish=item.finish or extras.finish,
                files={**extras.files, **(item.files or {})} or None,
            )
        )
    return done


def read_submissions(path: Path, *, template: str) -> list[Submission]:
    """A ``.json`` object is one job; each line of a ``.jsonl`` is one job, either a data object
    or ``{"template": ..., "data": {...}, "job_id"?: ..., "pdf"?: {...}, "finish"?: {...}}``."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {path}: {error}") from None
    # Lines are split at "\n" only: str.splitlines() also splits at characters that JSON strings
    # may hold (U+2028, U+0085, form feed...), which would shift every later line number.
    if path.suffix == ".jsonl":
        lines = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
    else:
        lines = [(1, text)]
    items = []
    for number, line in lines:
        try:
            body = json.loads(line)
        except json.JSONDecodeError as error:
            where = f"line {number + error.lineno - 1}, column {error.colno}"
            raise InputError(f"{path}, {where}: not JSON ({error.msg}); fix that line") from None
        if not isinstance(body, dict):
            raise InputError(f"{path}, line {number}: a job is a JSON object, not {_kind(body)}")
        items.append(_submission(body, template=template, where=f"{path}, line {number}"))
    if not items:
        raise InputError(f"{path} holds no job")
    return items


def _kind(value: object) -> str:
    return {list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


def _submission(body: dict[str, Any], *, template: str, where: str) -> Submission:
    if "data" not in body or not isinstance(body["data"], dict):
        return Submission(template=template, data=body)
    pdf = body.get("pdf")
    try:
        options = contract.PdfOptions(**pdf) if isinstance(pdf, dict) else None
    except TypeError as error:
        raise InputError(f"{where}: bad pdf options: {error}") from None
    try:
        finish = finishing.Finish.from_dict(body["finish"]) if body.get("finish") else None
    except finishing.FinishError as error:
        raise InputError(f"{where}: {error}") from None
    return Submission(
        template=str(body.get("template") or template),
        data=body["data"],
        job_id=body.get("job_id"),
        pdf=options,
        finish=finish,
    )


def _client() -> ReportFarmClient:
    """A client of the configured account; :class:`connecting.ConnectionProblem` if it is
    unusable (the command line prints that one line)."""
    account, source = connecting.account()
    if source != "the environment":
        console.print(f"[dim]using the farm in {source}[/]")
    storage = StorageSettings.from_env()
    return ReportFarmClient(account, queue=storage.queue, container=storage.container)


def main(
    *,
    template: str,
    data: Path,
    wait: bool,
    out: Path | None,
    timeout: float,
    name: str = naming.DEFAULT_PATTERN,
    extras: Extras | None = None,
) -> int:
    try:
        naming.check(name)
        items = with_extras(read_submissions(data, template=template), extras or Extras())
    except (InputError, naming.PatternError) as error:
        console.print(f"[red]error:[/] {error}", soft_wrap=True)
        return 2
    try:
        return asyncio.run(_submit(items, wait=wait, out=out, timeout=timeout, name=name))
    except contract.ContractError as error:
        console.print(f"[red]invalid job:[/] {error}", soft_wrap=True)
        return 2


async def _submit(
    items: list[Submission], *, wait: bool, out: Path | None, timeout: float, name: str
) -> int:
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
            await download(client, results, out, jobs=jobs_of(items, job_ids), pattern=name)
    return report(results)


def jobs_of(items: Sequence[Submission], job_ids: Sequence[str]) -> list[naming.Job]:
    """What file names may use, for the submitted jobs in input order."""
    return [
        naming.Job(job_id=job_id, template=item.template, data=item.data, index=number)
        for number, (item, job_id) in enumerate(zip(items, job_ids, strict=True), 1)
    ]


async def download(
    client: ReportFarmClient,
    results: dict[str, contract.ResultRecord | None],
    out: Path,
    *,
    jobs: Sequence[naming.Job],
    pattern: str,
) -> None:
    """Each succeeded job's PDF as ``OUT/<name>.pdf`` (see :mod:`reportfarm.naming`), then
    ``OUT/index.csv`` and a table of which file is which job."""
    out.mkdir(parents=True, exist_ok=True)
    names = naming.file_names(jobs, pattern=pattern)
    rows: list[naming.IndexRow] = []
    with progress() as bar:
        task = bar.add_task("downloading", total=len(jobs))
        for job in jobs:
            record = results.get(job.job_id)
            state = record.state if record is not None else "not finished"
            file = ""
            if record is not None and record.state == "succeeded":
                file = names[job.job_id]
                (out / file).write_bytes(await client.download(record))
            error = (record.error or "") if record is not None else ""
            rows.append(
                naming.IndexRow(
                    file=file, job_id=job.job_id, template=job.template, state=state, error=error
                )
            )
            bar.advance(task)
    index = naming.write_index(out, rows)
    console.print(index_table(rows, out=out, index=index))


def index_table(
    rows: Sequence[naming.IndexRow], *, out: Path, index: Path, limit: int = 20
) -> Table:
    table = Table(title=f"PDFs in {out}/")
    table.add_column("file", overflow="fold")
    table.add_column("template", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("job id", no_wrap=True, overflow="ellipsis", max_width=14)
    for row in rows[:limit]:
        table.add_row(row.file or "-", row.template, row.state, row.job_id)
    more = f"{len(rows) - limit} more; " if len(rows) > limit else ""
    table.caption = f"{more}every job is listed in {index}"
    return table


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
        seconds_cell(quantiles.quantile(times, 0.50)),
        seconds_cell(quantiles.quantile(times, 0.95)),
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


def seconds_cell(value: float | None) -> str:
    """A table cell for a time in seconds; ``-`` for none."""
    return "-" if value is None else f"{value:.2f}"


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
