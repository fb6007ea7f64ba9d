"""What a job's PDF must be when it leaves the farm: the ``finish`` options of the job contract.

A report is printed by Chromium; some must then be more than a print: described (metadata),
archival (PDF/A), carrying files (attachments, a Factur-X invoice's XML), signed (PAdES), marked
(a watermark) or locked (permissions). Each is a stage after the print, in the renderer
(``reportfarm_renderer.finishing``), timed in the job's ``stages_ms`` and in
``reportfarm_stage_seconds{stage="finish_<name>"}``; a job that asks for none pays nothing.
Tagged PDF and the document outline are print options (:class:`~reportfarm.contract.PdfOptions`):
Chromium makes them.

Validated here, on both sides (the client before sending, the renderer when decoding), so a job
that cannot be finished is refused before it is printed; a stage that fails anyway is a permanent
error with its reason (poison), never a browser restart.

Files a job brings (attachments, the Factur-X XML) travel as blobs of its own, under
``attachments/<job id>/<name>`` (see :func:`attachment_blob`): the client uploads them before it
sends the job, and a job may name only its own. The signing key is never in a job: the renderer
reads it from a mounted Secret, and a job only asks for a signature.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Literal

from reportfarm import outcomes


class FinishError(outcomes.PermanentError, ValueError):
    """A ``finish`` option the contract refuses (the contract raises it as a ContractError)."""

    default_kind = "contract"


PdfA = Literal["2b", "3b"]
PDFA_LEVELS: tuple[PdfA, ...] = ("2b", "3b")
FacturXLevel = Literal["minimum", "basicwl", "basic", "en16931", "extended"]
FACTURX_LEVELS: tuple[FacturXLevel, ...] = ("minimum", "basicwl", "basic", "en16931", "extended")
FACTURX_XML_NAME = "factur-x.xml"
"""The file name Factur-X requires for the embedded invoice XML."""
INVOICE_XML_NAMES = frozenset(
    {"factur-x.xml", "zugferd-invoice.xml", "zugferd_invoice.xml", "xrechnung.xml", "order-x.xml"}
)
"""File names a reader takes for an embedded e-invoice (the factur-x library's extractor does):
such a file enters only through ``facturx``, which checks it."""
RELATIONSHIPS = ("Data", "Source", "Alternative", "Supplement", "Unspecified")
"""PDF/A-3's ``AFRelationship`` of an attached file to the document."""
MAX_ATTACHMENTS = 16
MAX_TEXT = 1000
"""Longest metadata value, reason or location."""

FILE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$"
MIME_PATTERN = (
    r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}"
    r"(; ?[a-z0-9][a-z0-9!#$&^_.+-]{0,63}=[A-Za-z0-9!#$&^_.+-]{1,64})*$"
)
LANGUAGE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$"
r"""The patterns, as the OpenAPI document gives them too (``$`` there; ``\Z`` here)."""
_FILE_NAME_RE = re.compile(FILE_NAME_PATTERN[:-1] + r"\Z")
_FILE_NAME_MAX = 100
_MIME_RE = re.compile(MIME_PATTERN[:-1] + r"\Z")
_LANGUAGE_RE = re.compile(LANGUAGE_PATTERN[:-1] + r"\Z")
_COLOR_RE = re.compile(r"^#[0-9a-fA-F]{6}\Z")


def attachment_blob(job_id: str, name: str) -> str:
    """Where a job's file ``name`` is kept: ``attachments/<job id>/<name>``."""
    return f"attachments/{job_id}/{name}"


def owns_attachment(job_id: str, blob: str) -> bool:
    """Whether ``blob`` is one of this job's files (``attachments/<job id>/<name>``)."""
    folder = attachment_blob(job_id, "")
    name = blob[len(folder) :] if blob.startswith(folder) else ""
    return valid_file_name(name)


def valid_file_name(name: str) -> bool:
    return len(name) <= _FILE_NAME_MAX and _FILE_NAME_RE.match(name) is not None


def _text(value: object, where: str, *, optional: bool = True, limit: int = MAX_TEXT) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise FinishError(f"{where} must be a non-empty string")
    if len(value) > limit:
        raise FinishError(f"{where} is longer than {limit} characters")
    if any(ord(char) < 32 and char not in "\t\n" for char in value):
        raise FinishError(f"{where} holds a control character")
    refuse_unwritable(value, where)


EMOJI = (0x1F000, 0x1FAFF)
"""Emoji and pictographs (with U+FE0F, emoji presentation): no face the farm embeds draws them
(Debian's only emoji face is a colour bitmap font, which PDF/A cannot embed as a font)."""


def unwritable(char: str) -> str | None:
    """Why ``char`` cannot be in a PDF's text (None if it can)."""
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return "a lone surrogate (not a character: UTF-8 cannot encode it)"
    if 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:
        return "a noncharacter (Unicode reserves it for internal use)"
    category = unicodedata.category(char)
    if category == "Co":
        return "a private-use character (no standard font draws it)"
    if category == "Cn":
        return "unassigned in Unicode"
    if EMOJI[0] <= code <= EMOJI[1] or code == 0xFE0F:
        return "an emoji (no font of the farm draws emoji, and PDF/A embeds no colour bitmap font)"
    return None


def refuse_unwritable(value: str, where: str) -> None:
    for char in value:
        reason = unwritable(char)
        if reason is not None:
            name = unicodedata.name(char, "")
            raise FinishError(
                f"{where} holds U+{ord(char):04X}{f' {name}' if name else ''}: {reason}"
            )


def _flag(value: object, where: str) -> None:
    if not isinstance(value, bool):
        raise FinishError(f"{where} must be true or false")


def _number(value: object, where: str, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise FinishError(f"{where} must be a number from {low:g} to {high:g}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Metadata:
    """The document information and XMP metadata (PDF/A keeps the two in step)."""

    title: str | None = None
    author: str | None = None
    subject: str | None = None
    keywords: tuple[str, ...] = ()
    language: str | None = None
    """BCP 47 (``de``, ``en-GB``): the document's ``/Lang``, which screen readers use."""
    created: str | None = None
    """ISO 8601 with a time zone (``2026-12-03T10:00:00+01:00``); default: when it is finished."""

    def validate(self) -> None:
        for name in ("title", "author", "subject"):
            _text(getattr(self, name), f"finish.metadata.{name}")
        if not isinstance(self.keywords, tuple | list) or len(self.keywords) > 50:
            raise FinishError("finish.metadata.keywords must be a list of at most 50 strings")
        for keyword in self.keywords:
            _text(keyword, "finish.metadata.keywords[]", optional=False, limit=200)
        if self.language is not None and (
            not isinstance(self.language, str) or not _LANGUAGE_RE.match(self.language)
        ):
            raise FinishError(f"finish.metadata.language {self.language!r} is not BCP 47 (en-GB)")
        if self.created is not None:
            created_at(self.created)


def created_at(text: object) -> datetime.datetime:
    """``finish.metadata.created`` as an aware datetime (a FinishError if it is not one)."""
    try:
        moment = datetime.datetime.fromisoformat(str(text)) if isinstance(text, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise FinishError(
            f"finish.metadata.created {text!r} is not ISO 8601 with a time zone "
            "(2026-12-03T10:00:00+01:00)"
        )
    return moment


@dataclasses.dataclass(frozen=True, kw_only=True)
class Attachment:
    """A file embedded in the PDF (PDF/A-3 ``/AF``): one of the job's own blobs."""

    blob: str
    """``attachments/<job id>/<name>``: uploaded by the client before the job is sent."""
    name: str | None = None
    """The file name in the PDF; default: the blob's name."""
    mime: str = "application/octet-stream"
    description: str | None = None
    relationship: str = "Supplement"

    @property
    def file_name(self) -> str:
        return self.name or self.blob.rsplit("/", 1)[-1]

    def validate(self, job_id: str, where: str) -> None:
        if not isinstance(self.blob, str) or not owns_attachment(job_id, self.blob):
            raise FinishError(
                f"{where}.blob {self.blob!r} is not one of this job's files "
                f"({attachment_blob(job_id, '<name>')!r}): a job reads only its own"
            )
        if self.name is not None and (
            not isinstance(self.name, str) or not valid_file_name(self.name)
        ):
            raise FinishError(f"{where}.name {self.name!r} must be 1-100 of [A-Za-z0-9._-]")
        if not isinstance(self.mime, str) or not _MIME_RE.match(self.mime):
            raise FinishError(
                f"{where}.mime {self.mime!r} is not a media type (text/csv; charset=utf-8)"
            )
        _text(self.description, f"{where}.description")
        if self.relationship not in RELATIONSHIPS:
            raise FinishError(f"{where}.relationship must be one of {', '.join(RELATIONSHIPS)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FacturX:
    """An e-invoice: the Factur-X / ZUGFeRD XML (CII) embedded as ``factur-x.xml`` in PDF/A-3."""

    xml_blob: str
    """The XML, one of the job's files (``attachments/<job id>/factur-x.xml``)."""
    level: FacturXLevel | None = None
    """The profile; default: read from the XML (its guideline ID)."""

    def validate(self, job_id: str) -> None:
        if not isinstance(self.xml_blob, str) or not owns_attachment(job_id, self.xml_blob):
            raise FinishError(
                f"finish.facturx.xml_blob {self.xml_blob!r} is not one of this job's files "
                f"({attachment_blob(job_id, FACTURX_XML_NAME)!r})"
            )
        if self.level is not None and self.level not in FACTURX_LEVELS:
            raise FinishError(f"finish.facturx.level must be one of {', '.join(FACTURX_LEVELS)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Signature:
    """A PAdES signature by the farm's key (a mounted Secret; never in the job)."""

    visible: bool = False
    """A visible stamp (signer, time, reason) on ``page`` in ``box``; else an invisible one."""
    page: int = -1
    """The page of a visible signature: 0 the first, -1 the last."""
    box: tuple[float, float, float, float] = (36.0, 36.0, 236.0, 96.0)
    """x1, y1, x2, y2 in points from the page's lower left corner."""
    reason: str | None = None
    location: str | None = None
    contact: str | None = None

    def validate(self) -> None:
        _flag(self.visible, "finish.sign.visible")
        if isinstance(self.page, bool) or not isinstance(self.page, int) or self.page < -1:
            raise FinishError("finish.sign.page must be 0 (the first page) or more, or -1")
        if not isinstance(self.box, tuple | list) or len(self.box) != 4:
            raise FinishError("finish.sign.box is [x1, y1, x2, y2] in points")
        for value in self.box:
            _number(value, "finish.sign.box[]", 0, 14400)
        x1, y1, x2, y2 = self.box
        if x2 - x1 < 20 or y2 - y1 < 10:
            raise FinishError("finish.sign.box must be at least 20 x 10 points")
        for name in ("reason", "location", "contact"):
            _text(getattr(self, name), f"finish.sign.{name}", limit=200)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Watermark:
    """Text across every page (DRAFT, COPY, PAID), printed by Chromium with the page."""

    text: str
    opacity: float = 0.15
    color: str = "#c00000"
    angle: float = -35.0
    """Degrees, counter-clockwise negative as CSS rotates."""
    font_size_pt: float = 96.0

    def validate(self) -> None:
        _text(self.text, "finish.watermark.text", optional=False, limit=60)
        _number(self.opacity, "finish.watermark.opacity", 0.02, 1.0)
        if not isinstance(self.color, str) or not _COLOR_RE.match(self.color):
            raise FinishError("finish.watermark.color must be #rrggbb")
        _number(self.angle, "finish.watermark.angle", -90, 90)
        _number(self.font_size_pt, "finish.watermark.font_size_pt", 6, 400)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Permissions:
    """What a reader may do (PDF standard security: AES-256 with an owner password the farm
    makes and forgets; no password to open). Readers honour it; it is not secrecy."""

    print: bool = True
    copy: bool = True
    modify: bool = True
    annotate: bool = True

    def validate(self) -> None:
        for name in ("print", "copy", "modify", "annotate"):
            _flag(getattr(self, name), f"finish.permissions.{name}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finish:
    """The finishing a job asks for; empty (the default) asks for nothing."""

    metadata: Metadata | None = None
    pdfa: PdfA | None = None
    """``2b``, or ``3b`` (required, and chosen, when files are attached)."""
    attachments: tuple[Attachment, ...] = ()
    facturx: FacturX | None = None
    sign: Signature | None = None
    watermark: Watermark | None = None
    permissions: Permissions | None = None

    @property
    def empty(self) -> bool:
        return self == Finish()

    @property
    def after_print(self) -> bool:
        """Whether any stage works on the printed PDF (the watermark is printed with it)."""
        return dataclasses.replace(self, watermark=None) != Finish()

    @property
    def archival(self) -> PdfA | None:
        """The PDF/A level the result will claim: 3b with files attached, else what was asked."""
        if self.attachments or self.facturx is not None:
            return "3b"
        return self.pdfa

    def validate(self, job_id: str) -> None:
        if self.metadata is not None:
            self.metadata.validate()
        if self.pdfa is not None and self.pdfa not in PDFA_LEVELS:
            raise FinishError(f"finish.pdfa {self.pdfa!r} is not one of {', '.join(PDFA_LEVELS)}")
        self._validate_files(job_id)
        if self.sign is not None:
            self.sign.validate()
        if self.watermark is not None:
            self.watermark.validate()
        if self.permissions is not None:
            self.permissions.validate()
            if self.pdfa is not None:
                raise FinishError("PDF/A forbids encryption: permissions cannot go with pdfa")
            if self.archival is not None:
                raise FinishError(
                    "attached files make the PDF PDF/A-3, and PDF/A forbids encryption: "
                    "permissions cannot go with attachments or facturx"
                )

    def _validate_files(self, job_id: str) -> None:
        if not isinstance(self.attachments, tuple | list):
            raise FinishError("finish.attachments must be a list")
        if len(self.attachments) > MAX_ATTACHMENTS:
            raise FinishError(f"finish.attachments has more than {MAX_ATTACHMENTS} files")
        names: set[str] = set()
        for index, attachment in enumerate(self.attachments):
            attachment.validate(job_id, f"finish.attachments[{index}]")
            if attachment.file_name.casefold() in INVOICE_XML_NAMES:
                raise FinishError(
                    f"finish.attachments[{index}] is named {attachment.file_name!r}, a name "
                    "readers take for the e-invoice: an invoice XML enters only through "
                    "finish.facturx (which checks it)"
                )
            if attachment.file_name in names:
                raise FinishError(f"finish.attachments: {attachment.file_name!r} appears twice")
            names.add(attachment.file_name)
        if self.facturx is not None:
            self.facturx.validate(job_id)
            if FACTURX_XML_NAME in names:
                raise FinishError(
                    f"{FACTURX_XML_NAME} is the Factur-X XML's name: not an attachment"
                )
        if (self.attachments or self.facturx) and self.pdfa == "2b":
            raise FinishError("attached files need PDF/A-3: ask for pdfa 3b (or leave it out)")

    def to_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        return {key: value for key, value in body.items() if value not in (None, [], ())}

    @classmethod
    def from_dict(cls, body: object) -> Finish:
        if not isinstance(body, Mapping):
            raise FinishError("'finish' must be a JSON object")
        fields = _known(body, cls, "finish")
        parts: dict[str, type] = {
            "metadata": Metadata,
            "facturx": FacturX,
            "sign": Signature,
            "watermark": Watermark,
            "permissions": Permissions,
        }
        for name, part in parts.items():
            if fields.get(name) is not None:
                fields[name] = _build(part, fields[name], f"finish.{name}")
        if "attachments" in fields:
            items = fields["attachments"]
            if not isinstance(items, list):
                raise FinishError("finish.attachments must be a list")
            fields["attachments"] = tuple(
                _build(Attachment, item, f"finish.attachments[{index}]")
                for index, item in enumerate(items)
            )
        if isinstance(fields.get("metadata"), Metadata) and isinstance(
            fields["metadata"].keywords, list
        ):
            metadata = fields["metadata"]
            fields["metadata"] = dataclasses.replace(metadata, keywords=tuple(metadata.keywords))
        sign = fields.get("sign")
        if isinstance(sign, Signature) and isinstance(sign.box, list):
            fields["sign"] = dataclasses.replace(sign, box=tuple(sign.box))
        return cls(**fields)


def _known(body: Mapping[str, Any], cls: type, where: str) -> dict[str, Any]:
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(body) - known)
    if unknown:
        raise FinishError(f"unknown {where} option(s): {', '.join(map(str, unknown))[:300]}")
    return dict(body)


def _build(cls: type, body: object, where: str) -> Any:
    if not isinstance(body, Mapping):
        raise FinishError(f"{where} must be a JSON object")
    try:
        return cls(**_known(body, cls, where))
    except TypeError as error:
        raise FinishError(f"{where}: {error}") from None
