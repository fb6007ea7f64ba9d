"""Request bodies as JSON: strict, bounded, and never at more than linear cost in the event loop.

One pass of the C parser, then one iterative walk of what it built; both run in a worker thread
(:func:`parse_off_loop`), so the event loop only waits for them. What each refuses, with a 400
that names why (and where, for text):

- Text that is not UTF-8; ``NaN``/``Infinity``; numbers too large for a float (``1e999``);
  integers of more than :data:`MAX_INT_DIGITS` digits (``10**400`` in ``wait_s`` once was a 500).
- An object with the same key twice (JSON leaves it open; last-wins hides a client's bug).
- Nesting deeper than :data:`MAX_DEPTH`, or more than :data:`MAX_VALUES` values in one body.
- Text the farm cannot store or print: a lone surrogate (``"\\ud800"`` is valid JSON escape
  syntax but no character, and UTF-8 cannot encode it) or a Unicode noncharacter, in any key or
  value; the 400 names the field (``data.rows[3].name``).
- A body whose checking takes more than ``cpu_s`` of CPU time (the per-request budget).

The walk replaces a regular-expression pre-check whose cost grew with the square of a hostile
body's size (24 KB froze the loop for seconds). Python's parser nests by recursion: past about
1,000 levels it raises RecursionError, which is a 400 here too; the walk has no recursion.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from typing import Any


class BodyError(Exception):
    """A body the gateway refuses; ``status`` is the HTTP answer (400, 408, 413, 415 or 503; 499
    when the client left, counted as such and never sent)."""

    def __init__(
        self, status: int, detail: str, *, retry_after: int | None = None, unread: bool = False
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.retry_after = retry_after
        self.unread = unread
        """The body was not read to its end: the answer closes the connection."""


MAX_DEPTH = 200
"""Deepest nesting of arrays and objects a request body may have."""
MAX_VALUES = 4_000_000
"""Most JSON values (scalars, arrays, objects; keys not counted) in one body: a 16 MiB body of
``[0,0,...]`` is 8 million, of typical report data a few hundred thousand."""
MAX_INT_DIGITS = 300
"""Longest integer literal accepted (a float holds up to ~1.8e308)."""
CPU_S = 5.0
"""Default CPU seconds one body's parse and walk may take (see GatewaySettings.parse_cpu_s)."""
_CHECK_EVERY = 4096
"""Values walked between two looks at the CPU clock."""

# Lone surrogates, and the 66 noncharacters (U+FDD0..U+FDEF and the last two of every plane).
_BAD_TEXT = re.compile(
    "[\ud800-\udfff\ufdd0-\ufdef"
    + "".join(chr(plane * 0x10000 + last) for plane in range(17) for last in (0xFFFE, 0xFFFF))
    + "]"
)


class _Refused(ValueError):
    """Raised from inside the parser's hooks: becomes a 400 with this message."""


def bad_text(text: str) -> str | None:
    """Why ``text`` cannot be stored as UTF-8 or printed (None: it can)."""
    found = _BAD_TEXT.search(text)
    if found is None:
        return None
    code = ord(found.group())
    kind = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a Unicode noncharacter"
    return f"holds {kind} (U+{code:04X}) at character {found.start()}"


def parse(raw: bytes | str, *, what: str = "the body", cpu_s: float = CPU_S) -> Any:
    """Strict JSON within every bound of the module doc, or BodyError(400)."""
    deadline = time.thread_time() + cpu_s
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise BodyError(400, f"{what} is not UTF-8 text: {error}") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except _Refused as error:
        raise BodyError(400, f"{what} is not strict JSON: {error}") from None
    except RecursionError:
        raise BodyError(400, f"{what} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise BodyError(400, f"{what} is not JSON: {error}") from None
    if time.thread_time() > deadline:
        raise BodyError(400, f"{what} took more than {cpu_s} s of CPU to parse")
    walk(value, what=what, deadline=deadline)
    return value


async def parse_off_loop(raw: bytes | str, *, what: str = "the body", cpu_s: float = CPU_S) -> Any:
    """:func:`parse` in a worker thread: the loop keeps answering while a large body is read."""
    return await asyncio.to_thread(parse, raw, what=what, cpu_s=cpu_s)


def walk(value: Any, *, what: str, deadline: float = math.inf) -> None:
    """Depth, count and text of a parsed body, without recursion (BodyError(400))."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen % _CHECK_EVERY == 0 and time.thread_time() > deadline:
            raise BodyError(400, f"{what} took too much CPU to check")
        if isinstance(item, str):
            if _BAD_TEXT.search(item) is not None:
                _refuse_text(value, what)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise BodyError(400, f"{what} is nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key in item:
                    if _BAD_TEXT.search(key) is not None:
                        _refuse_text(value, what)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    if seen > MAX_VALUES:
        raise BodyError(400, f"{what} holds {seen} JSON values, more than {MAX_VALUES}")


def _refuse_text(value: Any, what: str) -> None:
    """The 400 for the first bad text in ``value``, naming its field (found again, with paths:
    this runs once, on refusal)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            reason = bad_text(item)
            if reason is not None:
                raise BodyError(400, f"{path or what}: the text {reason}")
        elif isinstance(item, dict):
            for key, child in item.items():
                reason = bad_text(key)
                if reason is not None:
                    raise BodyError(400, f"{path or what}: a key {reason}")
                stack.append((child, f"{path}.{key}" if path else key))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
    raise AssertionError("bad text vanished")  # pragma: no cover


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        counts: dict[str, int] = {}
        for key, _ in pairs:
            counts[key] = counts.get(key, 0) + 1
        twice = sorted(key for key, count in counts.items() if count > 1)
        raise _Refused(f"key {twice[0][:100]!r} appears more than once in one object")
    return result


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:40]} is too large for a number")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text)} digits is too large")
    return int(text)
