"""What a finishing process runs (:mod:`.processes` starts them, spawned, never forked: the
renderer's process runs Playwright's threads).

A child loads what every job would otherwise load again, once (:func:`start`): the signing key
and certificates, parsed (without the blank-page proof: the renderer's own process made it at
start), the stage modules, the faces' character maps and the stamp's font programs. Then it runs
every stage a job asks for, in order (:func:`finish`), and answers with the finished PDF and each
stage's wall and CPU time, or with the failure, as plain values: the job runner's exception types
do not cross a process boundary whole.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from reportfarm import outcomes
from reportfarm_renderer import finishing

from . import fonts, signers

if TYPE_CHECKING:
    from .signing import Signer

_SIGNER: dict[str, Signer] = {}
"""The child's one piece of state, set once by :func:`start` (a process runs one job at a time)."""

MODULES = ("metadata", "facturx", "attachments", "pdfua", "pdfa", "permissions", "signing")


@dataclasses.dataclass(frozen=True)
class Timing:
    stage: str
    wall_s: float
    cpu_s: float


@dataclasses.dataclass(frozen=True)
class Finished:
    """A job's PDF after its stages, with their times."""

    pdf: bytes
    timings: tuple[Timing, ...]


@dataclasses.dataclass(frozen=True)
class Failed:
    """A stage failed: permanent (:class:`finishing.FinishingFailed`) or temporary."""

    stage: str
    reason: str
    """Why (the stage's reason, or the temporary error's message)."""
    kind: str
    temporary: bool = False
    delay_s: float | None = None
    timings: tuple[Timing, ...] = ()


def start(signing_dir: str | None, tsa_url: str | None) -> None:
    """The process pool's initializer: the key, the libraries and the fonts, loaded once."""
    logging.basicConfig(level=logging.WARNING)
    for module in MODULES:
        importlib.import_module(f"{finishing.__name__}.{module}")
    fonts.faces()
    if signing_dir is not None:
        signer = signers.load(Path(signing_dir), timestamp_url=tsa_url, prove=False)
        if signer is not None:
            _SIGNER["farm"] = signer
            from . import stamp

            stamp.warm()


def ready() -> int:
    """Answered once :func:`start` ran: the process's id."""
    return os.getpid()


def finish(pdf: bytes, inputs: finishing.Inputs) -> Finished | Failed:
    """Every stage ``inputs.finish`` asks for, in order, with this process's signer."""
    inputs.signer = _SIGNER.get("farm")
    timings: list[Timing] = []
    for name, stage in finishing.plan(inputs.finish):
        wall, cpu = time.monotonic(), time.process_time()
        try:
            pdf = finishing.run_stage(name, stage, pdf, inputs)
        except finishing.FinishingFailed as error:
            timings.append(_timing(name, wall, cpu))
            return Failed(error.stage, error.reason, error.kind, timings=tuple(timings))
        except outcomes.TemporaryError as error:
            timings.append(_timing(name, wall, cpu))
            return Failed(
                name,
                str(error),
                "temporary",
                temporary=True,
                delay_s=error.delay_s,
                timings=tuple(timings),
            )
        timings.append(_timing(name, wall, cpu))
    return Finished(pdf, tuple(timings))


def _timing(stage: str, wall: float, cpu: float) -> Timing:
    return Timing(stage, time.monotonic() - wall, time.process_time() - cpu)
