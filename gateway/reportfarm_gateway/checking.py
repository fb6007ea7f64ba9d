"""Request bodies -> jobs in the form they are stored, before anything is written (issue 25).

Pure functions of the body's bytes and a few settings: no I/O, no event loop. The gateway runs
them in worker processes (:mod:`reportfarm_gateway.offloading`), so parsing a 16 MiB body,
walking it and encoding its data (C code that holds the interpreter's lock for its whole run)
never stops the loop; what comes back is bytes (queue messages, payload blobs) or a refusal.

Everything the farm stores is checked in its stored form here: the data cap on the payload as
encoded, text that cannot be encoded (lone surrogates, noncharacters: reportfarm_gateway.parsing)
refused with a 400 naming the field, files counted and each one used by ``finish``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Mapping
from typing import Any

from reportfarm import contract, encoding, finishing, preparing
from reportfarm.encoding import EncodedJob, Submission
from reportfarm_gateway import parsing

_REPORT_FIELDS = frozenset({"template", "data", "wait_s", "pdf", "callback_url", "finish", "files"})
_ITEM_FIELDS = frozenset({"template", "data", "pdf", "finish", "files"})


class BadRequest(ValueError):
    """The request cannot become a job; the message says why (400)."""


@dataclasses.dataclass(frozen=True)
class Refusal:
    """What a worker answers instead of raising (exceptions do not all cross processes whole)."""

    status: int
    detail: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckedReport:
    """A POST /v1/reports in its stored form."""

    job: EncodedJob
    files: Mapping[str, bytes] | None
    wait_s: float
    callback_url: str | None
    """As given: the gateway checks it against the network policy (I/O) before writing; the job
    carries it when it is an http(s) URL (the policy refuses any other)."""
    note: dict[str, Any]
    """The gateway's note of the job: owner, template, lane, callback, and ``digest``, of the
    body's canonical JSON (an Idempotency-Key reused with another body is a 422)."""
    keyed: bool


def ready() -> bool:
    """Called once in each new worker: importing this module is its start-up."""
    return True


def refused(call: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, its refusals (400, 413) as a :class:`Refusal`."""
    try:
        return call(*args, **kwargs)
    except TooMany as error:
        return Refusal(413, str(error))
    except parsing.BodyError as error:
        return Refusal(error.status, str(error))
    except BadRequest as error:
        return Refusal(400, str(error))
    except contract.ContractError as error:
        return Refusal(400, f"invalid job: {error}")


def check_report(
    raw: bytes,
    *,
    tenant: str,
    key: str | None,
    default_wait_s: float,
    cpu_s: float,
    notify: str | None = None,
) -> CheckedReport:
    """The body of POST /v1/reports as its job on the interactive lane, stored form; ``notify``
    is this gateway replica's address for the renderer's done hint (contract.Job.notify)."""
    body = parsing.parse(raw, cpu_s=cpu_s)
    if not isinstance(body, dict):
        raise BadRequest("the body is a JSON object")
    unknown = sorted(set(body) - _REPORT_FIELDS)
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(unknown)}")
    nulls = sorted(key for key, value in body.items() if value is None)
    if nulls:
        raise BadRequest(f"leave out what you do not set, no null: {', '.join(nulls)}")
    wait_s = _seconds(body.get("wait_s", default_wait_s))
    if not isinstance(body.get("data"), dict):
        raise BadRequest("data must be a JSON object")
    if not isinstance(body.get("template"), str):
        raise BadRequest("template must be a template name")
    callback_url = body.get("callback_url")
    if callback_url is not None and (not isinstance(callback_url, str) or len(callback_url) > 2048):
        raise BadRequest("callback_url must be an http(s) URL of at most 2048 characters")
    if callback_url is not None and not callback_url.startswith(("https://", "http://")):
        callback_url = None  # the gateway's network policy refuses it (and says so) first
    finish = finish_options(body.get("finish"))
    files = job_files(body.get("files"))
    job = encoding.build(
        Submission(
            template=body["template"],
            data=body["data"],
            job_id=_job_id(tenant, key),
            pdf=pdf_options(body.get("pdf")),
            finish=finish,
            files=files,
            tenant=tenant,
            lane="interactive",
            callback_url=callback_url,
            notify=notify,
        )
    )
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    note = {
        "job_id": job.job_id,
        "tenant": job.tenant,
        "template": job.template,
        "lane": job.lane,
        "callback_url": job.callback_url,
        "submitted_at": job.submitted_at,
        "digest": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
    }
    return CheckedReport(
        job=encoding.encode(job),
        files=files,
        wait_s=wait_s,
        callback_url=body.get("callback_url"),
        note=note,
        keyed=key is not None,
    )


def pdf_options(value: object) -> contract.PdfOptions | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest("pdf must be an object of PDF options")
    try:
        options = contract.PdfOptions(**value)
        options.validate()  # every field's type too, as the contract reads it
    except (TypeError, contract.ContractError) as error:
        raise BadRequest(f"bad pdf options: {error}") from None
    return options


def finish_options(value: object) -> finishing.Finish | None:
    """The ``finish`` object as the contract reads it (its files are checked with the job)."""
    if value is None:
        return None
    nulls = _nulls(value, "finish")
    if nulls:
        raise BadRequest(f"leave out what you do not set, no null: {', '.join(nulls[:5])}")
    try:
        finish = finishing.Finish.from_dict(value)
    except finishing.FinishError as error:
        raise BadRequest(f"bad finish options: {error}") from None
    return None if finish.empty else finish


def _nulls(value: object, where: str) -> list[str]:
    """Where ``value`` (a small options object) holds a JSON null."""
    if value is None:
        return [where]
    if isinstance(value, dict):
        return [null for key, item in value.items() for null in _nulls(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [
            null for index, item in enumerate(value) for null in _nulls(item, f"{where}[{index}]")
        ]
    return []


MAX_FILES = finishing.MAX_ATTACHMENTS + 1
"""Files one job may bring: its attachments and a Factur-X XML."""


def job_files(value: object) -> dict[str, bytes] | None:
    """``files``: an object of file name -> content in base64 (standard alphabet, padded), at
    most :data:`MAX_FILES` of them, each within the farm's size limit once decoded."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise BadRequest("files must be an object of file name -> base64 content")
    if len(value) > MAX_FILES:
        raise BadRequest(f"files holds {len(value)} files, more than {MAX_FILES}")
    files: dict[str, bytes] = {}
    for name, content in value.items():
        if not finishing.valid_file_name(name):
            raise BadRequest(f"file name {name[:100]!r} must be 1-100 of [A-Za-z0-9._-]")
        try:
            if not isinstance(content, str):
                raise binascii.Error("not text")
            files[name] = base64.b64decode(content, validate=True)
        except ValueError:  # binascii.Error, or text with non-ASCII characters
            raise BadRequest(f"file {name!r} is not base64 text") from None
        try:
            contract.check_data_size(len(files[name]), what=f"file {name!r}")
        except contract.ContractError as error:
            raise BadRequest(str(error)) from None
    return files


def _job_id(tenant: str, key: str | None) -> str | None:
    if key is None:
        return None
    digest = hashlib.sha256(f"{tenant}\0{key}".encode()).hexdigest()
    return f"k{digest[:39]}"


def _seconds(value: object) -> float:
    """``wait_s`` as a float: any JSON number from 0 up (past a float's range is a 400 too)."""
    try:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        seconds = float(value)
    except (ValueError, OverflowError):
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise BadRequest("wait_s must be a number of seconds, 0 or more")
    return seconds


def read_items(raw: bytes, *, jsonl: bool, cpu_s: float) -> list[Any]:
    """The items of a JSON array or JSONL body (strict JSON, see gateway.parsing)."""
    if jsonl:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadRequest(f"the body is not UTF-8 text: {error}") from None
        lines = [(number, line) for number, line in enumerate(text.splitlines(), 1)]
        deadline = time.thread_time() + cpu_s
        items = []
        for n, line in lines:
            if line.strip():
                left = deadline - time.thread_time()
                if left <= 0:
                    raise BadRequest(f"the body took more than {cpu_s} s of CPU to parse")
                items.append(parsing.parse(line, what=f"line {n}", cpu_s=left))
        return items
    items = parsing.parse(raw, cpu_s=cpu_s)
    if not isinstance(items, list):
        raise BadRequest("the body is a JSON array of items (or JSONL, one item a line)")
    return items


def to_submission(item: Any, *, index: int, template: str | None) -> Submission:
    if not isinstance(item, dict):
        raise BadRequest(f"item {index}: an item is a JSON object")
    if not isinstance(item.get("data"), dict):
        if template is None:
            raise BadRequest(f"item {index}: no data object (or give a template parameter)")
        return Submission(template=template, data=item)
    unknown = sorted(set(item) - _ITEM_FIELDS)
    if unknown:
        raise BadRequest(f"item {index}: unknown field(s): {', '.join(unknown)}")
    name = item.get("template", template)
    if not isinstance(name, str):
        raise BadRequest(f"item {index}: no template")
    try:
        options = pdf_options(item.get("pdf"))
        finish = finish_options(item.get("finish"))
        files = job_files(item.get("files"))
    except BadRequest as error:
        raise BadRequest(f"item {index}: {error}") from None
    return Submission(template=name, data=item["data"], pdf=options, finish=finish, files=files)


class TooMany(BadRequest):
    """More items than a batch may have (413)."""


def check_batch(
    raw: bytes,
    *,
    jsonl: bool,
    cpu_s: float,
    max_items: int,
    template: str | None,
    batch_id: str,
    tenant: str,
    callback_url: str | None,
    item_webhooks: bool,
) -> preparing.PreparedBatch:
    """The whole batch parsed, built and checked as stored; nothing written (off the loop)."""
    raw_items = read_items(raw, jsonl=jsonl, cpu_s=cpu_s)
    if not raw_items:
        raise BadRequest("a batch has at least one item")
    if len(raw_items) > max_items:
        raise TooMany(f"a batch has at most {max_items} items")
    items = [
        to_submission(item, index=index, template=template) for index, item in enumerate(raw_items)
    ]
    return preparing.prepare_batch(
        items,
        batch_id=batch_id,
        tenant=tenant,
        callback_url=callback_url,
        item_webhooks=item_webhooks,
    )
