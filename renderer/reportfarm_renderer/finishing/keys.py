"""The signing folder as the renderer sees it before it knows whether it signs at all: the file
names, the error, the refusal of a signature by a farm without a key, and :func:`load`, which
imports :mod:`.signing` (pyHanko, pikepdf, fontTools) only when the folder holds a key or a
certificate. A renderer that never signs or finishes never loads those libraries (~45 MiB of
the Python process, measured at import)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reportfarm.finishing import FinishError

if TYPE_CHECKING:
    from .signing import Signer

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CHAIN_FILE = "ca.crt"


class SignerError(Exception):
    """The signing folder holds a key or certificate that cannot be used (or the stamp's font is
    missing): the renderer does not start."""


def load(folder: Path, *, timestamp_url: str | None = None, prove: bool = True) -> Signer | None:
    """:meth:`.signing.Signer.load` when ``folder`` holds a key or a certificate; None, without
    importing the signing libraries, when it holds neither (signing is off). Blocking."""
    if absent(folder):
        return None
    from . import signing

    return signing.Signer.load(folder, timestamp_url=timestamp_url, prove=prove)


def absent(folder: Path) -> bool:
    """True when ``folder`` holds neither key nor certificate (signing is off); a folder that
    holds other files instead raises :class:`SignerError`."""
    if (folder / KEY_FILE).exists() or (folder / CERT_FILE).exists():
        return False
    others = sorted(p.name for p in listing(folder) if not p.name.startswith("."))
    if others:  # a Secret of another shape: better said now than by every signed job
        raise SignerError(
            f"{folder} holds {', '.join(others)[:200]} but no {KEY_FILE} and "
            f"{CERT_FILE}: mount a kubernetes.io/tls Secret (kubectl create secret tls)"
        )
    return True


def require(signer: Signer | None, folder: Path | None = None) -> Signer:
    """``signer``, or the refusal of a signature by a farm without a key: a :class:`FinishError`
    (permanent), saying where the key was looked for when ``folder`` is given."""
    if signer is None:
        where = f"no {KEY_FILE} in {folder}; " if folder is not None else ""
        raise FinishError(f"this farm has no signing key ({where}see README: Signed PDFs)")
    return signer


def listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:  # absent (no Secret mounted) or not a folder
        return []
