"""Waiting in tests: poll until something holds, fail with a clear message after a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def eventually(
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float = 120.0,
    every: float = 0.5,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds, with
    ``detail()`` (a component's log, say) in the message."""
    deadline = time.monotonic() + timeout
    while not (result := probe()):
        if time.monotonic() > deadline:
            more = f"\n{detail()}" if detail else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{more}")
        time.sleep(every)
    return result
