"""Request bodies: read within the farm's one size limit, under a memory budget, parsed strictly.

- **Size** (:func:`read`): the limit is ``contract.MAX_DATA_BYTES`` (or a lower setting). A
  ``Content-Length`` past it is answered 413 before a byte of the body is read; a chunked body is
  read chunk by chunk and answered 413 as soon as it passes the limit.
- **Memory** (:class:`BodyBudget`): the raw bytes of the bodies being read and processed at once
  are bounded; a request whose body does not fit waits (its body stays in the socket, not here)
  and after ``wait_s`` gets 503 + Retry-After. Parsing multiplies a body's size, so this budget is
  what bounds the gateway's memory under concurrent large requests.
- **Parsing** (:func:`parse`): strict JSON. ``NaN``, ``Infinity`` and numbers too large for a
  float (``1e999``) are refused, as is nesting deeper than :data:`MAX_DEPTH`, each with a 400
  that says why (Python's parser accepts the first two, and raises RecursionError on the last
  past about 1,000 levels; below that, the job's later steps would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from reportfarm import contract

MAX_DEPTH = 200
"""Deepest nesting of arrays and objects a request body may have."""
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


class BodyError(Exception):
    """A body the gateway refuses; ``status`` is the HTTP answer (400, 413 or 503)."""

    def __init__(self, status: int, detail: str, *, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.retry_after = retry_after


class BodyBudget:
    """At most ``limit_bytes`` of request bodies in the gateway at once (see the module doc)."""

    def __init__(self, *, limit_bytes: int, wait_s: float) -> None:
        self.limit_bytes = limit_bytes
        self.wait_s = wait_s
        self.in_use = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def reserve(self, size: int) -> AsyncIterator[None]:
        """Hold ``size`` bytes of the budget (a body larger than the whole budget holds all)."""
        size = min(size, self.limit_bytes)
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.in_use + size <= self.limit_bytes),
                    self.wait_s,
                )
            except TimeoutError:
                raise BodyError(
                    503,
                    f"the gateway is reading {self.in_use} bytes of other bodies: try again",
                    retry_after=1,
                ) from None
            self.in_use += size
        try:
            yield
        finally:
            async with self._changed:
                self.in_use -= size
                self._changed.notify_all()


@contextlib.asynccontextmanager
async def received(request: web.Request, budget: BodyBudget, *, limit: int) -> AsyncIterator[bytes]:
    """The request's body, read within ``limit``, while its share of the budget is held: keep
    what is parsed from it inside the block."""
    declared = request.content_length
    if declared is not None and declared > limit:  # before waiting for the budget, too
        raise BodyError(413, _too_large(f"the body ({declared} bytes, Content-Length)", limit))
    async with budget.reserve(limit if declared is None else declared):
        yield await read(request, limit=limit)


async def read(request: web.Request, *, limit: int) -> bytes:
    """The whole body, or BodyError(413) as soon as it is known to pass ``limit``."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise BodyError(413, _too_large(f"the body ({declared} bytes, Content-Length)", limit))
    body = bytearray()
    async for chunk in request.content.iter_chunked(256 * 1024):
        body += chunk
        if len(body) > limit:
            raise BodyError(413, _too_large("the body", limit))
    return bytes(body)


def _too_large(what: str, limit: int) -> str:
    try:
        contract.check_data_size(limit + 1, what=what, limit=limit)
    except contract.ContractError as error:
        return str(error).replace(f"is {limit + 1} bytes, over", "is over")
    raise AssertionError("unreachable")


def parse(raw: bytes | str, *, what: str = "the body") -> Any:
    """Strict JSON: BodyError(400) for invalid text, NaN/Infinity, 1e999, or deep nesting."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise BodyError(400, f"{what} is not UTF-8 text: {error}") from None
    if nested_deeper(text):
        raise BodyError(400, f"{what} is nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite as error:
        raise BodyError(400, f"{what} is not strict JSON: {error}") from None
    except RecursionError:  # depth() said no, but stay safe
        raise BodyError(400, f"{what} is nested too deep") from None
    except ValueError as error:
        raise BodyError(400, f"{what} is not JSON: {error}") from None


def nested_deeper(text: str, *, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects in JSON text nest deeper than ``limit``, with the regular
    expression engine doing the walking (no recursion, no Python loop per character): strings
    out, everything but brackets out, then one innermost level off per pass."""
    if text.count("[") + text.count("{") <= limit:
        return False  # too few brackets to nest that deep
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    for _ in range(limit):
        brackets = _INNERMOST.sub("", brackets)
        if not brackets:
            return False
    return True


class _NotFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"{text[:40]} is too large for a number")
    return value
