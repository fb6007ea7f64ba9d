"""The signer a signing folder holds, loaded only when it holds one: :mod:`.signing` (pyHanko,
pikepdf, fontTools) is imported only when the folder holds a key or a certificate. A renderer that
never signs or finishes never loads those libraries (~45 MiB of the Python process, measured at
import)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from . import keys

if TYPE_CHECKING:
    from .signing import Signer


def load(folder: Path, *, timestamp_url: str | None = None, prove: bool = True) -> Signer | None:
    """:meth:`.signing.Signer.load` when ``folder`` holds a key or a certificate; None, without
    importing the signing libraries, when it holds neither (signing is off); a folder of another
    shape raises :class:`.keys.SignerError`. Blocking."""
    if keys.absent(folder):
        return None
    from . import signing

    return signing.Signer.load(folder, timestamp_url=timestamp_url, prove=prove)
