"""What an idle farm costs in storage requests: our path (renderer, gateway with its webhook
dispatcher, as in production) left idle against Azurite, every request counted from Azurite's
debug log (a line per request: ``<Service>StorageContextMiddleware: RequestMethod=...``).

The kubelet's probes are played too: each part's ``/readyz`` every :data:`PROBE_EVERY_S` (the
chart's readinessProbe period), since the gateway's reads the queue's depth (cached 1 s).
"""

from __future__ import annotations

import asyncio
import collections
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from reportfarm_bench import synchronous as sync

PROBE_EVERY_S = 5.0
SETTLE_S = 8.0
"""Idle time before counting: the renderer's idle pause has grown to its longest by then."""
_REQUEST = re.compile(r"(\w+)StorageContextMiddleware: RequestMethod=(\w+) RequestURL=(\S+)")


def kind(service: str, method: str, url: str) -> str:
    """A request's kind: ``queue GET <queue>/messages`` (a receive), ``queue GET <queue>
    metadata`` (a depth read), ``blob GET``..., the queue or container named without the run's
    random prefix."""
    path, _, query = url.partition("?")
    parts = path.split("/")[4:]  # after http://host/account/
    what = parts[1] if len(parts) > 1 else ""  # messages, or a blob's first folder
    name = parts[0] if parts else ""
    lane = name.rsplit("-", 1)[-1] if "-" in name else "(farm)"
    comp = re.search(r"comp=(\w+)", query)
    detail = " ".join(word for word in (what, comp.group(1) if comp else "") if word)
    return f"{service.lower()} {method} {lane} {detail}".strip()


def count(log: Path, *, start: int) -> collections.Counter[str]:
    """Requests in ``log`` past byte ``start``, by kind."""
    with log.open("rb") as source:
        source.seek(start)
        text = source.read().decode(errors="replace")
    return collections.Counter(kind(*found.groups()) for found in _REQUEST.finditer(text))


async def idle_requests(*, seconds: float, pool_size: int = 2) -> dict[str, Any]:
    """Leave our path idle for ``seconds`` (after :data:`SETTLE_S`); requests per hour by kind."""
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as scratch:
        folder = Path(scratch)
        log = folder / "azurite-debug.log"
        async with sync.our_path(
            pool_size=pool_size, logs=folder, dispatcher=True, debug_log=log
        ) as ours:
            urls = [ours.url + "/readyz", ours.renderer_url + "/readyz"]
            async with aiohttp.ClientSession() as session:
                await _probe(session, urls, SETTLE_S)
                start = log.stat().st_size
                began = time.monotonic()
                await _probe(session, urls, seconds)
                span = time.monotonic() - began
                counted = count(log, start=start)
    per_hour = {name: round(n * 3600 / span) for name, n in sorted(counted.items())}
    return {"seconds": round(span, 1), "requests": dict(counted), "per_hour": per_hour}


async def _probe(session: aiohttp.ClientSession, urls: list[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        for url in urls:
            async with session.get(url) as response:
                await response.read()
        await asyncio.sleep(min(PROBE_EVERY_S, left))
