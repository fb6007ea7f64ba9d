"""The job contract: the one place that says what a job, a result and their names are.

Every side imports this module (the client and CLI that submit, the renderer that consumes, the
operator that watches the queue); none re-implements it.

Wire format of a queue message: the job's JSON (UTF-8), base64-encoded (what Azure Functions'
queue trigger expects, and safe for any character). Decoding also accepts raw JSON text, so a
message put on the queue by hand with the portal or another SDK is still understood.

Blob names, inside the farm's container:
- ``pdf/<job id>.pdf``         the default output;
- ``pdf/<job id>/<name>``      an output the job names itself (``output_blob``), in its own folder;
- ``results/<job id>.json``    the job's one result record (overwritten on redelivery);
- ``payloads/<job id>.json``   the data of a job too large to travel inline (claim-check).

A job reads only its own payload and writes only under its own names: anyone who can write to the
queue could otherwise point ``data_blob`` at another job's payload, or ``output_blob`` at another
job's result, PDF, a batch manifest or a gateway note. :meth:`Job.validate` refuses both (the
client before sending, the renderer when decoding: poisoned with the reason), and the renderer
checks again with :func:`owns_blob` before it reads or writes.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import ipaddress
import json
import re
import reprlib
import uuid
from collections.abc import Mapping
from typing import Any, Literal, NewType

from reportfarm import finishing, margins, outcomes

JobId = NewType("JobId", str)

SCHEMA_VERSION = 1
MAX_QUEUE_MESSAGE_BYTES = 64 * 1024
"""Azure Queue's limit on one message, as stored (that is, after base64)."""
INLINE_DATA_LIMIT = 48 * 1024 - 2048
"""Largest JSON job sent inline: base64 of it stays below the queue's 64 KiB, with room."""
MAX_DATA_BYTES = 16 * 2**20
"""The farm's one size limit: the largest request body the gateway reads (413 past it, before
buffering), the largest job data (JSON, UTF-8) the client sends and the renderer loads. Settings
may lower it (REPORTFARM_GATEWAY_MAX_BODY_MB, REPORTFARM_MAX_DATA_MB), never raise it."""


def check_data_size(size: int, *, what: str = "job data", limit: int = MAX_DATA_BYTES) -> None:
    """Raise ContractError when ``size`` bytes are past the limit (the same words everywhere)."""
    if size > limit:
        raise ContractError(
            f"{what} is {size} bytes, over the farm's limit of {limit} bytes "
            f"({limit / 2**20:g} MiB)"
        )


def payload_bytes(data: Mapping[str, Any]) -> bytes:
    """Job data as its payload blob stores it: the bytes the farm's limit counts. Raises
    ContractError for text UTF-8 cannot encode (a lone surrogate)."""
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError as error:
        raise ContractError(f"job data holds text that is not Unicode: {error.reason}") from None


_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
_OUTPUT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\Z")
OUTPUT_NAME_MAX = 100
_LENGTH_RE = re.compile(r"^\d+(\.\d+)?(px|in|cm|mm)?\Z")
PAPER_FORMATS = frozenset(
    {"Letter", "Legal", "Tabloid", "Ledger", "A0", "A1", "A2", "A3", "A4", "A5", "A6"}
)


class ContractError(outcomes.PermanentError, ValueError):
    """A message or a job that breaks the contract. Permanent: retrying will not help."""

    default_kind = "contract"


_OPTIONAL_TEXT = (str, type(None))
_NUMBER = (int, float)
_PDF_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("format", "width", "height"),
        _OPTIONAL_TEXT,
    ),
    **dict.fromkeys(
        ("margin_top", "margin_right", "margin_bottom", "margin_left"),
        (str,),
    ),
    **dict.fromkeys(("header_template", "footer_template"), (str,)),
    **dict.fromkeys(
        (
            "landscape",
            "print_background",
            "display_header_footer",
            "prefer_css_page_size",
            "tagged",
            "outline",
        ),
        (bool,),
    ),
    "scale": _NUMBER,
}
_JOB_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("data_blob", "output_blob", "batch_id", "tenant", "lane", "callback_url", "notify"),
        _OPTIONAL_TEXT,
    ),
    "item_index": (int, type(None)),
    "submitted_at": (*_NUMBER, type(None)),
    "version": (int,),
}


def _check_types(value: object, types: Mapping[str, tuple[type, ...]], *, prefix: str = "") -> None:
    """JSON gives any type anywhere: refuse a wrong one with a ContractError, never a TypeError."""
    for name, allowed in types.items():
        field = getattr(value, name)
        wrong_bool = isinstance(field, bool) and bool not in allowed
        if not isinstance(field, allowed) or wrong_bool:
            shown = reprlib.repr(field)  # a long string is cut, not echoed whole
            raise ContractError(f"{prefix}{name} {shown} has the wrong type")


Lane = Literal["interactive", "bulk"]
LANES: tuple[Lane, ...] = ("interactive", "bulk")


def poison_queue_name(queue: str) -> str:
    """The queue where jobs that cannot succeed go, with their reason."""
    return f"{queue}-poison"


def lane_queue_name(queue: str, lane: Lane | None) -> str:
    """The queue of a priority lane: bulk (and no lane) is the farm's queue itself, so a farm
    without lanes works unchanged; the interactive lane is ``<queue>-interactive``."""
    return f"{queue}-interactive" if lane == "interactive" else queue


def events_queue_name(queue: str) -> str:
    """Where renderers put job-completion events for webhook delivery (``<queue>-events``)."""
    return f"{queue}-events"


def default_output_blob(job_id: str) -> str:
    return f"pdf/{job_id}.pdf"


def named_output_blob(job_id: str, name: str) -> str:
    """An output the job names itself: ``pdf/<job id>/<name>``, in the job's own folder."""
    return f"pdf/{job_id}/{name}"


def owns_blob(job_id: str, blob: str, *, kind: Literal["output", "payload"]) -> bool:
    """Whether a job may write this output (``pdf/<job id>.pdf`` or ``pdf/<job id>/<name>``,
    name: 1-100 of [A-Za-z0-9._-], no empty or dot-only segments) or read this payload
    (exactly ``payloads/<job id>.json``)."""
    if kind == "payload":
        return blob == payload_blob(job_id)
    if blob == default_output_blob(job_id):
        return True
    folder = named_output_blob(job_id, "")
    name = blob[len(folder) :] if blob.startswith(folder) else ""
    return len(name) <= OUTPUT_NAME_MAX and _OUTPUT_NAME_RE.match(name) is not None


def result_blob(job_id: str) -> str:
    return f"results/{job_id}.json"


def payload_blob(job_id: str) -> str:
    return f"payloads/{job_id}.json"


def new_job_id() -> JobId:
    return JobId(uuid.uuid4().hex)


def batch_item_job_id(batch_id: str, item_index: int) -> JobId:
    """A batch item's job id is derived from its place: submitting it again creates no duplicate."""
    return JobId(f"{batch_id}-{item_index:06d}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PdfOptions:
    """How Chromium prints the page. Field names follow Playwright's ``page.pdf()``."""

    format: str | None = "A4"
    """A paper format (A4, Letter, ...); ignored when width and height are given."""
    width: str | None = None
    height: str | None = None
    margin_top: str = "0"
    margin_right: str = "0"
    margin_bottom: str = "0"
    margin_left: str = "0"
    landscape: bool = False
    scale: float = 1.0
    """0.1 to 2, as Chromium allows."""
    print_background: bool = True
    display_header_footer: bool = False
    header_template: str = ""
    """HTML; Chromium fills elements of class pageNumber, totalPages, date, title, url."""
    footer_template: str = ""
    prefer_css_page_size: bool = True
    """A template's CSS ``@page`` size wins over the format."""
    tagged: bool = False
    """A tagged PDF (structure tree from the HTML: headings, tables, lists, alt text), which
    screen readers navigate; see docs/finishing/index.md."""
    outline: bool = False
    """A document outline (bookmarks) from the headings."""

    def validate(self) -> None:
        _check_types(self, _PDF_TYPES, prefix="pdf.")
        if self.format is not None and self.format not in PAPER_FORMATS:
            raise ContractError(f"pdf.format {self.format!r} is not one of {sorted(PAPER_FORMATS)}")
        if (self.width is None) != (self.height is None):
            raise ContractError("pdf.width and pdf.height go together")
        for name in (
            "width",
            "height",
            "margin_top",
            "margin_right",
            "margin_bottom",
            "margin_left",
        ):
            value = getattr(self, name)
            if value is not None and not _LENGTH_RE.match(str(value)):
                raise ContractError(f"pdf.{name} {value!r} is not a length such as '10mm' or '1in'")
        if not 0.1 <= self.scale <= 2.0:
            raise ContractError(f"pdf.scale {self.scale} is outside 0.1..2")
        for name in ("header_template", "footer_template"):
            if len(getattr(self, name)) > 16 * 1024:
                raise ContractError(f"pdf.{name} is longer than 16 KiB")
            found = margins.external_references(getattr(self, name))
            if found:
                raise ContractError(
                    f"pdf.{name} references {found[0][:200]!r}: header and footer templates "
                    "may only use inline data: resources"
                )

    def playwright_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for Playwright's ``page.pdf()``."""
        kwargs: dict[str, Any] = {
            "landscape": self.landscape,
            "scale": self.scale,
            "print_background": self.print_background,
            "prefer_css_page_size": self.prefer_css_page_size,
            "margin": {
                "top": self.margin_top,
                "right": self.margin_right,
                "bottom": self.margin_bottom,
                "left": self.margin_left,
            },
            "display_header_footer": self.display_header_footer,
            "tagged": self.tagged,
            "outline": self.outline,
        }
        if self.width is not None and self.height is not None:
            kwargs.update(width=self.width, height=self.height)
        elif self.format is not None:
            kwargs["format"] = self.format
        if self.display_header_footer:
            # Chromium prints its own default header when given an empty one: send a blank span.
            kwargs["header_template"] = self.header_template or "<span></span>"
            kwargs["footer_template"] = self.footer_template or "<span></span>"
        return kwargs


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job:
    """One report to render: the queue message, decoded and validated."""

    job_id: JobId
    template: str
    data: Mapping[str, Any] | None = None
    """The template's data, inline. Exactly one of data and data_blob is set."""
    data_blob: str | None = None
    """Claim-check: the blob (in the farm's container) holding the data as JSON."""
    output_blob: str | None = None
    """Where the PDF goes: ``pdf/<job id>.pdf`` (the default) or ``pdf/<job id>/<name>``
    (see named_output_blob); any other name is refused."""
    pdf: PdfOptions = dataclasses.field(default_factory=PdfOptions)
    batch_id: str | None = None
    item_index: int | None = None
    tenant: str | None = None
    lane: Lane | None = None
    """The priority lane; it names the queue the job is sent to (see lane_queue_name)."""
    callback_url: str | None = None
    """A webhook to POST the signed result to when the job ends (at least once)."""
    submitted_at: float | None = None
    """Unix time the client sent the job (for submit-to-stored latency)."""
    finish: finishing.Finish | None = None
    """What the PDF must be when it leaves (metadata, PDF/A, files, signature, watermark,
    permissions): stages after the print; see :mod:`reportfarm.finishing`."""
    notify: str | None = None
    """``address:port`` (an IP address) of the gateway replica a client waits at: once the
    job's result record is stored, the renderer POSTs :data:`DONE_PATH` there. Only a hint that
    shortens the wait; the record stays the answer (see :func:`done_url`)."""
    version: int = SCHEMA_VERSION

    @property
    def output(self) -> str:
        return self.output_blob or default_output_blob(self.job_id)

    def validate(self) -> None:
        _check_types(self, _JOB_TYPES)
        if self.version != SCHEMA_VERSION:
            raise ContractError(f"unknown message version {self.version!r} (this farm speaks 1)")
        if not isinstance(self.job_id, str) or not _ID_RE.match(self.job_id):
            raise ContractError(f"job id {self.job_id!r} must be 1-128 of [A-Za-z0-9._-]")
        if not isinstance(self.template, str) or not _NAME_RE.match(self.template):
            raise ContractError(f"template name {self.template!r} must be 1-64 of [A-Za-z0-9_-]")
        if (self.data is None) == (self.data_blob is None):
            raise ContractError("a job carries exactly one of 'data' and 'data_blob'")
        if self.data is not None and not isinstance(self.data, Mapping):
            raise ContractError("'data' must be a JSON object")
        if self.data_blob is not None and not owns_blob(
            self.job_id, self.data_blob, kind="payload"
        ):
            raise ContractError(
                f"data_blob {self.data_blob!r} is not this job's payload "
                f"({payload_blob(self.job_id)!r}): a job reads only its own payload"
            )
        if self.output_blob is not None and not owns_blob(
            self.job_id, self.output_blob, kind="output"
        ):
            raise ContractError(
                f"output_blob {self.output_blob!r} is outside this job's names "
                f"({default_output_blob(self.job_id)!r} or "
                f"{named_output_blob(self.job_id, '<name>')!r}, name 1-{OUTPUT_NAME_MAX} of "
                "[A-Za-z0-9._-]): a job writes only its own outputs"
            )
        if (self.batch_id is None) != (self.item_index is None):
            raise ContractError("batch_id and item_index go together")
        if self.batch_id is not None and not _ID_RE.match(str(self.batch_id)):
            raise ContractError(f"batch id {self.batch_id!r} must be 1-128 of [A-Za-z0-9._-]")
        if self.item_index is not None and (
            not isinstance(self.item_index, int) or self.item_index < 0
        ):
            raise ContractError("item_index must be a non-negative integer")
        self._validate_delivery()
        self.pdf.validate()
        self._validate_finish()

    def _validate_finish(self) -> None:
        if self.finish is None:
            return
        if not isinstance(self.finish, finishing.Finish):
            raise ContractError("'finish' must be a JSON object")
        try:
            self.finish.validate(self.job_id)
        except finishing.FinishError as error:
            raise ContractError(str(error)) from None

    def _validate_delivery(self) -> None:
        if self.lane not in (None, *LANES):
            raise ContractError(f"lane {self.lane!r} is not 'interactive' or 'bulk'")
        if self.callback_url is not None and (
            not isinstance(self.callback_url, str)
            or not self.callback_url.startswith(("https://", "http://"))
            or len(self.callback_url) > 2048
        ):
            raise ContractError("callback_url must be an http(s) URL of at most 2048 characters")
        if self.notify is not None:
            check_notify(self.notify)

    def to_dict(self) -> dict[str, Any]:
        """Shallow: the data is not walked or copied here (it may be large or deep)."""
        body = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        body["pdf"] = dataclasses.asdict(self.pdf)
        body["finish"] = self.finish.to_dict() if self.finish and not self.finish.empty else None
        return {key: value for key, value in body.items() if value is not None}

    @classmethod
    def from_dict(cls, body: Any) -> Job:
        if not isinstance(body, Mapping):
            raise ContractError("a job message is a JSON object")
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ContractError(f"unknown job field(s): {', '.join(unknown)}")
        missing = [name for name in ("job_id", "template") if name not in body]
        if missing:
            raise ContractError(f"missing job field(s): {', '.join(missing)}")
        fields = dict(body)
        pdf = fields.pop("pdf", None) or {}
        if not isinstance(pdf, Mapping):
            raise ContractError("'pdf' must be a JSON object")
        pdf_known = {field.name for field in dataclasses.fields(PdfOptions)}
        if set(pdf) - pdf_known:
            raise ContractError(f"unknown pdf option(s): {', '.join(sorted(set(pdf) - pdf_known))}")
        if fields.get("finish") is not None:
            try:
                finish = finishing.Finish.from_dict(fields["finish"])
                fields["finish"] = None if finish.empty else finish
            except finishing.FinishError as error:
                raise ContractError(str(error)) from None
        try:
            job = cls(pdf=PdfOptions(**pdf), **fields)
        except TypeError as error:
            raise ContractError(f"malformed job: {error}") from None
        job.validate()
        return job


DONE_PATH = "/internal/v1/done/{job_id}"
"""Where a gateway hears that a job it waits for has its result record (POST, no body, 204).
The gateway then reads the record: a hint, never the answer, so a forged or lost one costs
at most a read or the gateway's polling interval."""


def check_notify(address: str) -> tuple[str, int]:
    """``address:port`` (IPv4, or ``[IPv6]:port``) as (host, port); ContractError if not."""
    host, _, port = address.rpartition(":")
    try:
        ip = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
        number = int(port)
    except ValueError:
        raise ContractError(f"notify {address!r} must be an IP address and port") from None
    if not 0 < number < 65536 or (ip.version == 6) != host.startswith("["):
        raise ContractError(f"notify {address!r} must be an IP address and port") from None
    return str(ip), number


def done_url(job: Job) -> str | None:
    """The URL a renderer tells that ``job`` has its record, if its message names a gateway."""
    if job.notify is None:
        return None
    return f"http://{job.notify}{DONE_PATH.format(job_id=job.job_id)}"


def encode_message(job: Job) -> str:
    """The queue message text for a job (validated first)."""
    job.validate()
    text = _dumps(job.to_dict())
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    if len(encoded) > MAX_QUEUE_MESSAGE_BYTES:
        raise ContractError(
            f"job {job.job_id} is {len(encoded)} bytes encoded, over the queue's 64 KiB: "
            "send its data as a payload blob"
        )
    return encoded


def fits_inline(job: Job) -> bool:
    """Whether the job's message stays under the queue's limit with its data inline."""
    text = _dumps(job.to_dict())
    return len(text.encode("utf-8")) <= INLINE_DATA_LIMIT


def _dumps(body: Mapping[str, Any]) -> str:
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise ContractError("job data is nested too deep to send") from None
    except (TypeError, ValueError) as error:
        raise ContractError(f"job data is not JSON: {error}") from None


def decode_message(content: str | bytes) -> Job:
    """Parse a queue message into a validated job, or raise ContractError saying why not."""
    raw = _as_bytes(content)
    if len(raw) > MAX_QUEUE_MESSAGE_BYTES:
        raise ContractError(f"message is {len(raw)} bytes, over the queue's 64 KiB")
    text = _unwrap(raw)
    try:
        body = json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractError(f"message is not JSON: {error}") from None
    except RecursionError:
        raise ContractError("message is JSON nested too deep to be a job") from None
    return Job.from_dict(body)


def _as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content


def _unwrap(raw: bytes) -> str:
    stripped = raw.strip()
    if not stripped.startswith((b"{", b"[")):
        try:
            raw = base64.b64decode(stripped, validate=True)
        except (binascii.Error, ValueError):
            raise ContractError("message is neither base64 nor JSON") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ContractError(f"message is not UTF-8 text: {error}") from None


def peek_job_id(content: str | bytes) -> str | None:
    """Best effort: the job id of a message that failed to decode, to name its result record."""
    try:
        body = json.loads(_unwrap(_as_bytes(content)))
    except (ContractError, ValueError, RecursionError):
        return None
    job_id = body.get("job_id") if isinstance(body, dict) else None
    return job_id if isinstance(job_id, str) and _ID_RE.match(job_id) else None


JobState = Literal["succeeded", "failed"]


@dataclasses.dataclass(kw_only=True)
class ResultRecord:
    """What happened to a job: one JSON blob per job, written before its message is deleted."""

    job_id: str
    state: JobState
    template: str | None = None
    attempts: int = 1
    """How many times the queue delivered the job (its dequeue count when it ended)."""
    stages_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    """Per-stage durations: load_data, render_html, pdf_generation, storage_upload, ..."""
    output_blob: str | None = None
    output_bytes: int | None = None
    error: str | None = None
    error_kind: str | None = None
    """'permanent' (went to poison at once) or 'exhausted' (too many failed deliveries)."""
    batch_id: str | None = None
    item_index: int | None = None
    tenant: str | None = None
    lane: str | None = None
    callback_url: str | None = None
    worker: str | None = None
    submitted_at: float | None = None
    finished_at: float | None = None
    version: int = SCHEMA_VERSION

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes | str) -> ResultRecord:
        """Read a result blob; a corrupt one raises ContractError (never another error)."""
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as error:
            raise ContractError(f"result record is not JSON: {error}") from None
        if not isinstance(body, dict) or not isinstance(body.get("job_id"), str):
            raise ContractError("result record is not an object with a job_id")
        if body.get("state") not in ("succeeded", "failed"):
            raise ContractError(f"result record has an unknown state {body.get('state')!r}")
        known = {field.name for field in dataclasses.fields(cls)}
        try:
            return cls(**{key: value for key, value in body.items() if key in known})
        except TypeError as error:
            raise ContractError(f"malformed result record: {error}") from None


def completion_event(record: ResultRecord) -> str:
    """The message a renderer puts on the events queue when a job with a callback ends."""
    return json.dumps({"kind": "job", "job_id": record.job_id}, separators=(",", ":"))


def batch_event(batch_id: str) -> str:
    """The message the webhook dispatcher puts on the events queue to check (and, once all its
    items are final, announce) a batch; it is the batch webhook's retry timer too."""
    return json.dumps({"kind": "batch", "batch_id": batch_id}, separators=(",", ":"))


# Batches and the gateway's records, all in the farm's container:
# - ``batches/<batch id>/manifest.json``   the batch: tenant, item count, webhook (BatchManifest);
# - ``batches/<batch id>/items.jsonl``     each item's job as submitted, one line per item;
# - ``batches/<batch id>/sent.json``       written once every item was put on the queue;
# - ``batches/<batch id>/retries/<t>.json`` one per retry: when, and which items (BatchRetry);
# - ``jobs/<job id>.json``                 the gateway's note of a single report it accepted;
# - ``webhooks/<subject>/<t>.json``        the webhook delivery log, one blob per attempt
#   (subject: a job id, or ``batch-<batch id>``).
BATCH_ID_MAX = 100
"""Longest batch id: its items' job ids (``<batch id>-<index:06d>``) must stay within 128."""
BATCH_ITEMS_MAX = 100_000
_BATCH_ITEM_RE = re.compile(r"^(?P<batch>[A-Za-z0-9][A-Za-z0-9._-]*)-(?P<index>\d{6})\Z")


def validate_batch_id(batch_id: object) -> str:
    if not isinstance(batch_id, str) or len(batch_id) > BATCH_ID_MAX or not _ID_RE.match(batch_id):
        raise ContractError(f"batch id {batch_id!r} must be 1-{BATCH_ID_MAX} of [A-Za-z0-9._-]")
    return batch_id


def split_batch_item_job_id(job_id: str) -> tuple[str, int] | None:
    """The (batch id, item index) a batch item's job id was made from, or None."""
    match = _BATCH_ITEM_RE.match(job_id)
    return (match["batch"], int(match["index"])) if match else None


def batch_manifest_blob(batch_id: str) -> str:
    return f"batches/{batch_id}/manifest.json"


def batch_items_blob(batch_id: str) -> str:
    return f"batches/{batch_id}/items.jsonl"


def batch_sent_blob(batch_id: str) -> str:
    return f"batches/{batch_id}/sent.json"


def batch_retries_prefix(batch_id: str) -> str:
    return f"batches/{batch_id}/retries/"


def batch_retry_blob(batch_id: str, at: float) -> str:
    return f"{batch_retries_prefix(batch_id)}{int(at * 1000):015d}-{uuid.uuid4().hex[:8]}.json"


def batch_results_prefix(batch_id: str) -> str:
    """Listing this prefix finds the batch's result records (filter with split_batch_item_job_id:
    another batch's id may start with this one's)."""
    return f"results/{batch_id}-"


def job_note_blob(job_id: str) -> str:
    return f"jobs/{job_id}.json"


def webhook_log_prefix(subject: str) -> str:
    return f"webhooks/{subject}/"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchManifest:
    """A batch as submitted; written before its first item is sent, never changed after."""

    batch_id: str
    count: int
    """Items 0..count-1; item i is the job ``batch_item_job_id(batch_id, i)``."""
    tenant: str | None = None
    lane: Lane = "bulk"
    callback_url: str | None = None
    """The batch's webhook: POSTed once every item is final (and again after a retry ends)."""
    item_webhooks: bool = False
    """Also POST the callback for each item as it ends."""
    digest: str = ""
    """SHA-256 of the items as submitted: the same batch id with other items is a conflict."""
    created_at: float = 0.0
    version: int = SCHEMA_VERSION

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes | str) -> BatchManifest:
        body = json.loads(raw)
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in body.items() if key in known})


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchRetry:
    """One retry of a batch's failed items. A result record of a listed item whose
    ``submitted_at`` is older than ``at`` is stale: the item counts as running again."""

    at: float
    items: tuple[int, ...]

    def to_json(self) -> bytes:
        return json.dumps({"at": self.at, "items": list(self.items)}).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes | str) -> BatchRetry:
        body = json.loads(raw)
        return cls(at=float(body["at"]), items=tuple(int(index) for index in body["items"]))


POISON_INLINE_LIMIT = 24 * 1024
"""Longest original message a poison message carries whole; a longer one is kept in a blob,
so that a poison message always fits the queue's 64 KiB (reason and escaping included)."""


def poison_original_blob(message_id: str) -> str:
    """Where the whole original of a long poisoned message is kept."""
    return f"poison/{message_id}.txt"


def poison_message(
    *,
    reason: str,
    original: str,
    job_id: str | None,
    attempts: int,
    original_blob: str | None = None,
) -> str:
    """The text put on the poison queue: the original message and why it failed (plain JSON).

    With ``original_blob``, the original is cut to its first KiB here and kept whole in that blob.
    """
    body: dict[str, Any] = {
        "reason": reason[:4096],
        "job_id": job_id,
        "attempts": attempts,
        "original": original if original_blob is None else original[:1024],
    }
    if original_blob is not None:
        body.update(original_blob=original_blob, original_chars=len(original))
    return json.dumps(body, ensure_ascii=False)
