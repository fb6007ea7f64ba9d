"""The media types a body may declare: anything else is a 415 before a byte of it is read.

A body is read as what its ``Content-Type`` says, never guessed: a ``text/csv`` batch was once
read as JSON. The only charset is UTF-8 (JSON's own, RFC 8259); a ``charset`` parameter that
says otherwise is refused too.
"""

from __future__ import annotations

from collections.abc import Collection

from aiohttp import web

from reportfarm_gateway.bodies import BodyError

JSON = frozenset({"application/json"})
JSONL = frozenset({"application/x-ndjson", "application/jsonl", "application/jsonlines"})


def require(request: web.Request, allowed: Collection[str]) -> str:
    """The request's media type when it is one of ``allowed`` (and UTF-8), else BodyError(415)."""
    declared = request.headers.get("Content-Type")
    media = request.content_type if declared is not None else None
    charset = (request.charset or "utf-8").lower().replace("_", "-")
    if media is None or media not in allowed or charset not in ("utf-8", "utf8"):
        shown = repr(declared[:100]) if declared is not None else "none"
        raise BodyError(
            415, f"Content-Type is {shown}; this call takes {' or '.join(sorted(allowed))} (UTF-8)"
        )
    return media
