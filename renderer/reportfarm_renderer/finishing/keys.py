"""The signing folder as the renderer sees it before it knows whether it signs at all: the file
names, the error, whether the folder holds a key, the refusal of a signature by a farm without a
key. It imports no signing library, and nothing of :mod:`.signing` (which builds on it);
:func:`.signers.load` brings both together (import-linter keeps the three in that order)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from reportfarm.finishing import FinishError

Loaded = TypeVar("Loaded")
"""A loaded :class:`.signing.Signer` (:func:`require`), named without importing it."""

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CHAIN_FILE = "ca.crt"


class SignerError(Exception):
    """The signing folder holds a key or certificate that cannot be used (or the stamp's font is
    missing): the renderer does not start."""


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


def require(signer: Loaded | None, folder: Path | None = None) -> Loaded:
    """``signer``, or the refusal of a signature by a farm without a key: a :class:`FinishError`
    (permanent), saying where the key was looked for when ``folder`` is given."""
    if signer is None:
        where = f"no {KEY_FILE} in {folder}; " if folder is not None else ""
        raise FinishError(f"this farm has no signing key ({where}see docs/finishing/signing.md)")
    return signer


def listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:  # absent (no Secret mounted) or not a folder
        return []
