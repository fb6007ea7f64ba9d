"""What a finishing process runs (:mod:`.processes` starts them, spawned, never forked: the
renderer's process runs Playwright's threads).

A child loads what every job would otherwise load again, once (:func:`start`): the signing key
and certificates, parsed (without the blank-page proof: the renderer's own process made it at
start), the stage modules, the faces' character maps and the stamp's font programs, and signs a
blank page twice (the first signature's one-time costs paid here; the second's CPU measured:
:func:`signature_cpu_s`). A child whose own load or signatures fail (the Secret's folder changed
since the renderer proved it, a stamp that cannot be set) keeps the reason: :func:`ready` raises
it and a job that signs is refused there as temporary, with it (another process or pod may sign
it), where an initializer that raised broke the process, lost the reason in the child's stderr
and was replaced by one that broke again at each signing job. Then it runs
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

from . import fonts, keys, signers

if TYPE_CHECKING:
    from .signing import Signer

_SIGNER: dict[str, Signer] = {}
"""The child's one piece of state, set once by :func:`start` (a process runs one job at a time)."""
_MEASURED: dict[str, float] = {}
"""What :func:`start` measured: ``signature_cpu_s`` (see :func:`signature_cpu_s`)."""
_REFUSED: dict[str, str] = {}
"""Why this process cannot sign (``reason``), if its start found that its key or stamp fails."""

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
    if signing_dir is None:
        return
    try:
        signer = signers.load(Path(signing_dir), timestamp_url=tsa_url, prove=False)
        if signer is None:
            raise keys.SignerError(f"{signing_dir} holds no key any more")
        from . import stamp

        stamp.warm()
        _MEASURED["signature_cpu_s"] = _warm_signature(signer)
    except keys.SignerError as error:
        _REFUSED["reason"] = str(error)
        return
    _SIGNER["farm"] = signer


def _warm_signature(signer: Signer) -> float:
    """Sign a blank page twice with a visible stamp, as a job's signature would: the first pays
    what a process pays once (pyHanko's first signature, the stamp's appearance, the signature's
    reserved size), so the first job does not; the second's CPU seconds are returned. The first
    is the proof (:meth:`.signing.Signer.prove`): raises :class:`.keys.SignerError`."""
    signer.prove()
    started = time.process_time()
    signer.prove()
    return time.process_time() - started


def ready() -> int:
    """Answered once :func:`start` ran: the process's id. Raises :class:`.keys.SignerError` with
    the reason when its key or stamp failed the proof."""
    if "reason" in _REFUSED:
        raise keys.SignerError(_REFUSED["reason"])
    return os.getpid()


def signature_cpu_s() -> float | None:
    """CPU seconds a signature of a blank page took in this process at its start (None: it does
    not sign). The operator's estimate of a job's finishing CPU until a job's finishing ended
    (``reportfarm.capacity.finish_cpu_s``): a lower bound (a job's other stages and a longer
    document cost more), measured here on this pod's CPU, not assumed."""
    return _MEASURED.get("signature_cpu_s")


def finish(pdf: bytes, inputs: finishing.Inputs) -> Finished | Failed:
    """Every stage ``inputs.finish`` asks for, in order, with this process's signer."""
    if inputs.finish.sign is not None and "reason" in _REFUSED:
        reason = f"this finishing process cannot sign: {_REFUSED['reason']}"
        return Failed("finishing", reason, "temporary", temporary=True)
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
