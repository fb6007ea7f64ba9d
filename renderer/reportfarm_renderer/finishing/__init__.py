"""Finishing: the stages between the print and the upload (what a job may ask for is in
:mod:`reportfarm.finishing`).

Each stage is a function ``(pdf bytes, Inputs) -> pdf bytes``, run in a thread after the
browser went back to the pool, in this order:

1. ``metadata``: title, author, subject, keywords, language, dates (document info and XMP);
2. ``facturx``: the invoice XML as ``factur-x.xml``, with Factur-X's XMP (the factur-x library,
   which rewrites the catalogue's files, so it goes before ``attach``);
3. ``attach``: the job's files, embedded with their relationship (PDF/A-3 ``/AF``);
4. ``pdfua``: with metadata, a tagged PDF made PDF/UA-1 (identification, artifacts);
5. ``pdfa``: PDF/A-2b or -3b (output intent, XMP identification, what PDF/A forbids removed);
6. ``permissions``: AES-256 with an owner password made here and kept only for ``sign``;
7. ``sign``: a PAdES signature by the farm's key, always last (any later change would break it).

The watermark is not a stage here: it is HTML, printed by Chromium with the page
(:mod:`.watermark`), so its text is real text in an embedded font (PDF/A needs that) and costs
nothing after the print. A stage that fails raises :class:`FinishingFailed`, a permanent error
naming the stage: the job is poisoned with that reason, and no browser is replaced.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from reportfarm import outcomes
from reportfarm.finishing import Finish

if TYPE_CHECKING:
    from . import signing


class FinishingFailed(outcomes.PermanentError):
    """A stage could not finish the PDF; permanent (the same PDF would fail again)."""

    default_kind = "finish"

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"finishing stage {stage!r} failed: {reason}")
        self.stage = stage
        self.reason = reason


@dataclasses.dataclass(kw_only=True)
class Inputs:
    """What the stages of one job read besides the PDF."""

    job_id: str
    finish: Finish
    files: Mapping[str, bytes] = dataclasses.field(default_factory=dict)
    """The job's files by blob name (attachments, the Factur-X XML), loaded before the stages."""
    signer: signing.Signer | None = None
    """The farm's signing key and certificate, when the renderer has them (a mounted Secret)."""
    moment: datetime.datetime = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.UTC)
    )
    """When finishing began: the creation date unless the job gives one."""
    business_rules: Path | None = None
    """EN 16931's rules for the ``facturx`` stage (the renderer's ``en16931_xslt`` setting)."""
    rules_checked: bool = False
    """The XML passed EN 16931's rules already (in the renderer's process, whose Saxon process
    runs them: see ``processes``), so the ``facturx`` stage does not run them again."""
    owner_password: str | None = None
    """Set by ``permissions`` for ``sign`` (an encrypted PDF is signed with it), then dropped."""


Stage = Callable[[bytes, Inputs], bytes]


def plan(finish: Finish) -> list[tuple[str, Stage]]:
    """The stages ``finish`` asks for, in order (empty: the PDF is stored as printed)."""
    stages: list[tuple[str, Stage]] = []
    if finish.metadata is not None or finish.archival is not None:
        stages.append(("metadata", _stage("metadata")))
    if finish.facturx is not None:
        stages.append(("facturx", _stage("facturx")))
    if finish.attachments:
        stages.append(("attach", _stage("attachments")))
    if finish.metadata is not None:  # a tagged PDF becomes PDF/UA (an untagged one is left)
        stages.append(("pdfua", _stage("pdfua")))
    if finish.archival is not None:
        stages.append(("pdfa", _stage("pdfa")))
    if finish.permissions is not None:
        stages.append(("permissions", _stage("permissions")))
    if finish.sign is not None:
        stages.append(("sign", _stage("signing")))
    return stages


def _stage(module: str) -> Stage:
    """The ``apply`` of stage module ``module``, imported when the stage first runs: the PDF
    libraries (pikepdf, lxml, factur-x, pyHanko: ~45 MiB of the renderer's Python process) load
    with the first job that asks for finishing, not with every renderer (the first such job pays
    the import once, in its stage's thread)."""

    def run(pdf: bytes, inputs: Inputs) -> bytes:
        apply: Stage = importlib.import_module(f"{__name__}.{module}").apply
        return apply(pdf, inputs)

    run.__qualname__ = run.__name__ = f"{module}.apply"
    return run


def files_needed(finish: Finish) -> list[str]:
    """The blobs the stages read (loaded by the job runner before they start)."""
    names = [attachment.blob for attachment in finish.attachments]
    if finish.facturx is not None:
        names.append(finish.facturx.xml_blob)
    return names


def run_stage(name: str, stage: Stage, pdf: bytes, inputs: Inputs) -> bytes:
    """One stage; whatever it raises becomes a :class:`FinishingFailed` naming it."""
    try:
        return stage(pdf, inputs)
    except (FinishingFailed, outcomes.TemporaryError):
        raise
    except outcomes.PermanentError as error:
        raise FinishingFailed(name, error.description) from error
    except Exception as error:
        raise FinishingFailed(name, f"{type(error).__name__}: {error}"[:500]) from error
