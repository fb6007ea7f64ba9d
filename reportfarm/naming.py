"""PDF file names a person can find, and the index that says which file is which job.

A pattern names each downloaded PDF from the job: ``{template}``, ``{job_id}``, ``{index}`` (the
job's position in the input, from 1) and ``{data.FIELD.SUBFIELD}`` (a field of the job's data),
e.g. ``{template}-{data.student.name}``. A data field that is missing, empty or not a plain value
becomes the job id, so every job still gets a file. Names are made safe for any file system
(separators, control and reserved characters become ``-``; at most 150 bytes) and unique (a
repeated name gets ``-2``, ``-3``...). Letters of any script are kept: ``achievement-林雨桐.pdf``.
"""

from __future__ import annotations

import csv
import dataclasses
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_PATTERN = "{template}-{job_id}"
"""The default: the template's name, then the job id."""

_FIELDS = ("template", "job_id", "index")
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|\s]+')
_MAX_BYTES = 150


class PatternError(ValueError):
    """The naming pattern is malformed or names a field that does not exist."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job:
    """What a name may use: one submitted job."""

    job_id: str
    template: str
    data: Mapping[str, Any]
    index: int


def check(pattern: str) -> list[str]:
    """The pattern's field names, or :class:`PatternError` saying what is wrong."""
    try:
        parsed = list(string.Formatter().parse(pattern))
    except ValueError as error:
        raise PatternError(f"bad --name pattern {pattern!r}: {error}") from None
    fields = [name for _, name, _, _ in parsed if name is not None]
    for name in fields:
        if name not in _FIELDS and not (name.startswith("data.") and len(name) > 5):
            raise PatternError(
                f"bad --name pattern {pattern!r}: unknown field {{{name}}}; use {{template}}, "
                "{job_id}, {index} or {data.FIELD}, e.g. '{template}-{data.student.name}'"
            )
    if not fields:
        raise PatternError(f"bad --name pattern {pattern!r}: it has no {{field}}")
    return fields


def file_names(jobs: Sequence[Job], *, pattern: str) -> dict[str, str]:
    """Job id to a unique, safe ``NAME.pdf`` for each job, in the jobs' order."""
    check(pattern)
    names: dict[str, str] = {}
    taken: set[str] = set()
    for job in jobs:
        stem = _sanitize(_expand(pattern, job)) or _sanitize(job.job_id)
        candidate, number = stem, 1
        while candidate.casefold() in taken:
            number += 1
            candidate = f"{stem}-{number}"
        taken.add(candidate.casefold())
        names[job.job_id] = f"{candidate}.pdf"
    return names


def _expand(pattern: str, job: Job) -> str:
    parts = []
    for literal, name, _, _ in string.Formatter().parse(pattern):
        parts.append(literal)
        if name is not None:
            parts.append(_value(name, job))
    return "".join(parts)


def _value(name: str, job: Job) -> str:
    if name == "template":
        return job.template
    if name == "index":
        return str(job.index)
    if name == "job_id":
        return job.job_id
    value: Any = job.data
    for key in name.removeprefix("data.").split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
        return job.job_id
    return str(value)


def _sanitize(text: str) -> str:
    text = _UNSAFE.sub("-", unicodedata.normalize("NFC", text))
    text = re.sub(r"-{2,}", "-", text).strip(" .-_")
    encoded = text.encode("utf-8")[:_MAX_BYTES]
    return encoded.decode("utf-8", "ignore").rstrip(" .-_")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndexRow:
    """One line of the index: which file holds which job (no file if the job did not succeed)."""

    file: str
    job_id: str
    template: str
    state: str
    error: str = ""


def write_index(out: Path, rows: Sequence[IndexRow]) -> Path:
    """``OUT/index.csv`` (UTF-8, a header line), one row per job."""
    path = out / "index.csv"
    fields = [field.name for field in dataclasses.fields(IndexRow)]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow(dataclasses.asdict(row))
    return path
