"""The event loop the services and their benchmarks run on: uvloop's where it installs."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop's loop, or on asyncio's own when uvloop does not import.

    uvloop measured ~1.05x end-to-end PDFs/s and ~0.9x Python CPU per PDF against asyncio's loop
    (docs/benchmarks/rendering.md, "What made the difference"); it has no Windows build, hence
    the fallback. Like
    ``asyncio.run``, the first Ctrl-C cancels ``main`` (both run an ``asyncio.Runner``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
