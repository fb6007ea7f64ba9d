"""The event loop's lag: how late a timer set for now + ``interval`` actually runs.

The loop receives jobs, extends their leases and answers ``/readyz`` and ``/metrics``; any
CPU-bound work on it (or holding the GIL in one of its threads) shows here first. The samples go
to ``reportfarm_event_loop_lag_seconds``; :func:`watch` runs for the renderer's lifetime.
"""

from __future__ import annotations

import asyncio

from reportfarm_renderer.metrics import RendererMetrics

INTERVAL_S = 0.1


async def watch(metrics: RendererMetrics, *, interval_s: float = INTERVAL_S) -> None:
    """Sample the loop's lag every ``interval_s`` until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        planned = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        metrics.loop_lag.observe(max(0.0, loop.time() - planned))
