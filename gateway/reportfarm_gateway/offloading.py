"""CPU work on request bodies, in worker processes: the event loop only waits for it.

Threads are not enough: Python's JSON parser and encoder are C code that hold the interpreter's
lock for their whole run, so a 16 MiB body parsed in a thread still stops the loop for as long.
A worker gets the body's bytes and hands back bytes (reportfarm_gateway.checking).

The workers are shared, so they are shared per tenant first: a tenant has at most
``per_tenant`` bodies being checked at once (its others wait their turn, holding only their own
share of the body budget), and ``per_tenant`` is below the number of workers, so one tenant
flooding bodies leaves a worker free for everyone else.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from reportfarm_gateway import checking

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


WORKER_NICENESS = 10
"""Workers run at a lower CPU priority than the gateway's process: on a small machine, a worker
busy with a large body never takes the CPU the event loop needs to answer."""


def _yield_to_the_loop() -> None:
    os.nice(WORKER_NICENESS)


class Offloader:
    def __init__(self, *, workers: int) -> None:
        self.workers = workers
        self.per_tenant = max(1, workers - 1)
        """Bodies one tenant may have checked at once."""
        self._slots: dict[str, asyncio.Semaphore] = {}
        """One per tenant that sent a body (tenants are the configured few: kept)."""
        self._pool = self._new_pool()

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        # spawn: a fresh interpreter, nothing of the gateway's loop, threads or sockets inherited.
        context = multiprocessing.get_context("spawn")
        return concurrent.futures.ProcessPoolExecutor(
            self.workers, mp_context=context, initializer=_yield_to_the_loop
        )

    def start(self) -> None:
        """Start every worker now, its modules imported (not paid by a request)."""
        started = [self._pool.submit(checking.ready) for _ in range(self.workers)]
        for future in started:
            future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def run(
        self, tenant: str, call: Callable[..., _T], /, **kwargs: Any
    ) -> _T | checking.Refusal:
        """``call(**kwargs)`` in a worker, in the tenant's turn; its refusals come back as a
        :class:`checking.Refusal`. A worker that died (out of memory) is replaced and the
        request answered 503."""
        slots = self._slots.setdefault(tenant, asyncio.Semaphore(self.per_tenant))
        async with slots:
            loop = asyncio.get_running_loop()
            work = functools.partial(checking.refused, call, **kwargs)
            try:
                result: _T | checking.Refusal = await loop.run_in_executor(self._pool, work)
            except BrokenProcessPool:
                logger.error("a body-checking worker died: starting new ones")
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                return checking.Refusal(503, "the gateway could not check this body: try again")
        return result
