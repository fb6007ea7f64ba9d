"""The ``sign`` stage (being built: see issue 16)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reportfarm.finishing import FinishError

if TYPE_CHECKING:
    from . import Inputs


class Signer:
    """The farm's key and certificate (being built)."""


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    raise FinishError("sign: not built yet")
