"""Backpressure: each lane's queue depth, read at most once per ``ttl_s`` whatever the traffic."""

from __future__ import annotations

import asyncio
import logging
import time

from reportfarm import contract
from reportfarm.client import ReportFarmClient

logger = logging.getLogger(__name__)


class QueueDepths:
    def __init__(self, client: ReportFarmClient, *, ttl_s: float = 1.0) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._values: dict[contract.Lane, tuple[float, int]] = {}
        self._locks = {lane: asyncio.Lock() for lane in contract.LANES}
        self.last_error: str | None = None
        """The last failed read (None after a good one): /readyz reports it."""

    async def depth(self, lane: contract.Lane) -> int:
        """The lane's approximate depth (in-flight jobs included), at most ``ttl_s`` old; on a
        failed read, the last known value (a storage outage fails the submission itself)."""
        cached = self._values.get(lane)
        if cached and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        async with self._locks[lane]:  # one read per lane at a time: the rest use its answer
            cached = self._values.get(lane)
            if cached and time.monotonic() - cached[0] < self.ttl_s:
                return cached[1]
            try:
                value = await self.client.queues[lane].depth()
            except Exception as error:
                self.last_error = f"{type(error).__name__}: {error}"[:300]
                logger.warning("reading the %s lane's depth failed: %s", lane, self.last_error)
                value = cached[1] if cached else 0
            else:
                self.last_error = None
            self._values[lane] = (time.monotonic(), value)
            return value

    def known(self) -> dict[str, int]:
        return {lane: value for lane, (_, value) in self._values.items()}
