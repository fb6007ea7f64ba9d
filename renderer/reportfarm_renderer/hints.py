"""The done hint: tell the gateway replica a client waits at that its job's record is stored.

The job names the replica (``contract.Job.notify``, set by the gateway for synchronous reports);
the POST is sent without waiting for it, after the record is written, with a short timeout. The
record stays the answer: a hint that is lost, late or refused costs the gateway's polling
interval, never a job (see ``reportfarm_gateway.hinting``).
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from prometheus_client import Counter

from reportfarm import contract

logger = logging.getLogger(__name__)

TIMEOUT_S = 1.0
"""A hint not delivered within this is dropped."""
MAX_PENDING = 256
"""Hints in flight at most; past it new ones are dropped (a gateway that does not answer must
not pile up tasks in the renderer)."""


class DoneHints:
    def __init__(self, *, counter: Counter | None = None) -> None:
        self.counter = counter
        """``reportfarm_hints``, labelled kind and outcome."""
        self.sent = 0
        self.failed = 0
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, job: contract.Job | None) -> None:
        """Tell the job's gateway its record is stored, if the job names one."""
        url = contract.done_url(job) if job is not None else None
        if url is None or len(self._tasks) >= MAX_PENDING:
            return
        task = asyncio.create_task(self._post(url), name="done-hint")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, url: str) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S))
        try:
            async with self._session.post(url):
                self.sent += 1
                outcome = "sent"
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            self.failed += 1
            outcome = "failed"
            logger.debug("done hint to %s failed: %s", url, error)
        if self.counter is not None:
            self.counter.labels(kind="done", outcome=outcome).inc()

    async def close(self) -> None:
        """Let the hints in flight finish (each within its timeout), then close."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
