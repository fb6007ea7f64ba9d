"""CPU work on request bodies, in worker processes: the event loop only waits for it.

Threads are not enough: Python's JSON parser and encoder are C code that hold the interpreter's
lock for their whole run, so a 16 MiB body parsed in a thread still stops the loop for as long.
A worker gets the body's bytes and hands back bytes (reportfarm_gateway.checking).

The workers are shared, so they are shared per tenant first: a tenant has at most
``per_tenant`` bodies being checked at once (its others wait their turn, holding only their own
share of the body budget), and ``per_tenant`` is below the number of workers, so one tenant
flooding bodies leaves a worker free for everyone else.

A small body is checked on the event loop instead (``inline_bytes``, 16 KiB by default): a report
of the example documents (2-10 KB) takes ~1 ms to check, and the hop to a worker costs about as
much again in the gateway (pickling, the pipe) plus the worker's own turn. The loop's time for
this is bounded per tenant first (:class:`InlineBudget`): each check is charged its CPU time
(the thread's), and one is run inline only while the tenant's bucket and everyone's hold its
worst case (:data:`WORST_S_PER_BYTE` x its size, ~5 ms at 16 KiB); past either, the body goes
to a worker as before. A tenant that floods small bodies thus spends at most its share of the
loop (:data:`TENANT_SHARE`), and all tenants together at most :data:`TOTAL_SHARE`. The workers
are started with the first body that needs one: a gateway whose bodies are all small runs none
(two worker processes and multiprocessing's resource tracker, ~35 MiB, not started).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from reportfarm_gateway import checking

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


INLINE_BYTES = 16 * 1024
"""Bodies up to this size may be checked on the event loop (REPORTFARM_GATEWAY_INLINE_CHECK_KB)."""
WORST_S_PER_BYTE = 0.4e-6
"""A check's CPU per body byte, at worst (measured: 0.27 us/B for 16-80 KiB of small objects or
numbers, the slowest shapes; 0.1 us/B for the example reports): what an inline check is
expected to cost before it runs."""
TENANT_SHARE = 0.1
"""CPU seconds per second of the event loop one tenant's inline checks may take."""
TOTAL_SHARE = 0.25
"""... and all tenants' together."""
BURST_S = 0.1
"""What a tenant's bucket holds at most: inline checks back to back after a quiet spell (the
total's bucket holds 0.25 s, in proportion to its share)."""


class InlineBudget:
    """Token buckets of event-loop CPU for inline body checks: one per tenant and one for all.
    A check runs inline when both hold its expected cost; its measured CPU is charged to both
    (a bucket may go below zero: the tenant's next bodies go to workers until it refills)."""

    def __init__(
        self,
        *,
        tenant_share: float = TENANT_SHARE,
        total_share: float = TOTAL_SHARE,
        burst_s: float = BURST_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tenant_share, self.total_share, self.burst_s = tenant_share, total_share, burst_s
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        """Per tenant (and "" for all): (seconds held, when last refilled)."""

    def _held(self, key: str, share: float) -> float:
        """What the bucket holds now; a bucket holds ``share`` x (burst_s / tenant_share) at most:
        a tenant's burst, and the total's in proportion (one tenant's burst leaves the others
        theirs)."""
        now = self._clock()
        most = self.burst_s * share / self.tenant_share
        held, at = self._buckets.get(key, (most, now))
        held = min(most, held + (now - at) * share)
        self._buckets[key] = (held, now)
        return held

    def allows(self, tenant: str, cost_s: float) -> bool:
        return (
            self._held(_ALL, self.total_share) >= cost_s
            and self._held(_TENANT + tenant, self.tenant_share) >= cost_s
        )

    def charge(self, tenant: str, cpu_s: float) -> None:
        for key, share in ((_ALL, self.total_share), (_TENANT + tenant, self.tenant_share)):
            held = self._held(key, share)
            self._buckets[key] = (held - cpu_s, self._clock())


_ALL, _TENANT = "", "tenant:"

WORKER_NICENESS = 10
"""Workers run at a lower CPU priority than the gateway's process: on a small machine, a worker
busy with a large body never takes the CPU the event loop needs to answer."""


def _yield_to_the_loop() -> None:
    os.nice(WORKER_NICENESS)


class Offloader:
    def __init__(
        self,
        *,
        workers: int,
        inline_bytes: int = INLINE_BYTES,
        budget: InlineBudget | None = None,
    ) -> None:
        self.workers = workers
        self.per_tenant = max(1, workers - 1)
        """Bodies one tenant may have checked at once."""
        self.inline_bytes = inline_bytes
        """Bodies up to this size may be checked on the loop (0: never)."""
        self.budget = budget or InlineBudget()
        self.inline = 0
        """Checks run on the event loop."""
        self.offloaded = 0
        """Checks run in a worker."""
        self._slots: dict[str, asyncio.Semaphore] = {}
        """One per tenant that sent a body (tenants are the configured few: kept)."""
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        """Created with the first body that needs a worker (or by :meth:`start`)."""

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        # spawn: a fresh interpreter, nothing of the gateway's loop, threads or sockets inherited.
        context = multiprocessing.get_context("spawn")
        return concurrent.futures.ProcessPoolExecutor(
            self.workers, mp_context=context, initializer=_yield_to_the_loop
        )

    def start(self) -> None:
        """Start every worker now, its modules imported (not paid by a request)."""
        pool = self._workers()
        started = [pool.submit(checking.ready) for _ in range(self.workers)]
        for future in started:
            future.result()

    @property
    def started(self) -> bool:
        """Whether the worker processes exist."""
        return self._pool is not None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _workers(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            logger.info("starting %d body-checking worker process(es)", self.workers)
            self._pool = self._new_pool()
        return self._pool

    async def run(
        self, tenant: str, call: Callable[..., _T], /, *, raw: bytes, **kwargs: Any
    ) -> _T | checking.Refusal:
        """``call(raw=raw, **kwargs)`` on the loop when ``raw`` is small and the tenant's
        inline budget allows (:class:`InlineBudget`), else in a worker, in the tenant's turn; its
        refusals come back as a :class:`checking.Refusal`. A worker that died (out of memory) is
        replaced and the request answered 503."""
        work = functools.partial(checking.refused, call, raw=raw, **kwargs)
        if len(raw) <= self.inline_bytes and self.budget.allows(
            tenant, len(raw) * WORST_S_PER_BYTE
        ):
            began = time.thread_time()
            try:
                inline: _T | checking.Refusal = work()
            finally:
                self.budget.charge(tenant, time.thread_time() - began)
            self.inline += 1
            return inline
        self.offloaded += 1
        slots = self._slots.setdefault(tenant, asyncio.Semaphore(self.per_tenant))
        async with slots:
            loop = asyncio.get_running_loop()
            pool = self._workers()
            try:
                result: _T | checking.Refusal = await loop.run_in_executor(pool, work)
            except BrokenProcessPool:
                logger.error("a body-checking worker died: starting new ones")
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                return checking.Refusal(503, "the gateway could not check this body: try again")
        return result
