"""Finishing processes: the stages of a job run in a process of their own, one job at a time per
process, as many processes as the pod has CPUs (:mod:`reportfarm_renderer.cpus`).

pyHanko, pikepdf's callers, fontTools and lxml's Python side hold the GIL: run in a thread of the
renderer's process (as they were), a signature took the event loop's turn that receives jobs and
extends their leases, and a pod could never finish on more than one core. Here each process is a
:class:`~concurrent.futures.ProcessPoolExecutor` of one worker, spawned (never forked: the
renderer's process runs Playwright's threads), which loads the key, the libraries and the fonts
once (:func:`.child.start`). A job borrows a free process, hands it the printed PDF (pickled once
into the pipe, the finished PDF once back: the only copies; the job's files go the same way) and
gets the finished PDF and its stages' wall and CPU times.

A process that dies (killed, out of memory, a crash in a C library) fails only the job it ran,
with a :class:`FinisherDied` naming the process and its exit (a temporary error: another delivery
may finish it, up to the queue's delivery limit), and is replaced; the other processes and their
jobs go on. One executor per process is what makes that so: a ProcessPoolExecutor whose worker
dies breaks every job it holds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import multiprocessing
import signal
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from reportfarm import outcomes
from reportfarm_renderer import finishing

from . import child

logger = logging.getLogger(__name__)


class FinisherDied(outcomes.TemporaryError):
    """The finishing process of a job died while it worked: the job is delivered again."""


@dataclasses.dataclass(eq=False)
class _Process:
    executor: concurrent.futures.ProcessPoolExecutor
    ready: asyncio.Future[int]
    """The process's id, once its start (key, libraries, fonts) is done."""
    signature: asyncio.Future[float | None]
    """The CPU seconds its start-up signature took (``child.signature_cpu_s``)."""
    working: bool = False


class FinishingProcesses:
    """``size`` finishing processes, each started at once (:meth:`start`) or with its first job."""

    def __init__(
        self,
        *,
        size: int,
        signing_dir: Path | None = None,
        tsa_url: str | None = None,
        at_once: int | None = None,
    ) -> None:
        self.size = max(1, size)
        self.at_once = self.size if at_once is None else max(1, min(self.size, at_once))
        """Processes started together; each further one starts when one of those is ready. A
        process's start is CPU-bound (~3 s of CPU here: the libraries, the fonts, the key, two
        signatures): on a 1-CPU pod two at once were both ready only after twice that, and the
        first jobs of a burst waited for them (``finish_handover``); one after the other, the
        first is ready in half the time. The pod's whole CPUs is the right number."""
        self._unstarted = 0
        self.signing_dir = signing_dir
        """The signing folder each process loads its key from (None: no signing)."""
        self.tsa_url = tsa_url
        self._free: asyncio.Queue[_Process] | None = None
        self._all: list[_Process] = []
        self.replaced = 0
        """Processes replaced after one died."""
        self._closed = False
        self._warm = False

    @property
    def busy(self) -> int:
        return 0 if self._free is None else len(self._all) - self._free.qsize()

    async def pids(self) -> list[int]:
        """The processes' ids (each once it is ready, all of them started)."""
        await self.wait_ready()
        return [await process.ready for process in list(self._all)]

    def signature_cpu_s(self) -> float | None:
        """The median CPU seconds of the processes' start-up signatures, of those that answered
        (None: none yet, or they do not sign)."""
        known = sorted(
            figure
            for process in self._all
            if process.signature.done()
            and not process.signature.cancelled()
            and process.signature.exception() is None
            and (figure := process.signature.result()) is not None
        )
        return known[len(known) // 2] if known else None

    def unable(self) -> tuple[str, bool] | None:
        """Why the processes cannot take jobs at their full rate yet, and whether for good
        (``True``: each start failed, a key it could not load or a death, and none is left to
        start); None once every process of the first start is up (and after that while one is),
        or before :meth:`start`. The renderer's readiness waits for it in a farm that signs: a
        pod whose jobs would wait for their finishing, or share its CPU with a process still
        starting, is not yet the capacity the operator counts it as (on the real node's 1-CPU
        pods, the second process's start took the CPU from a burst's first jobs)."""
        if self._free is None or self._closed:
            return None
        able = sum(1 for process in self._all if _pid(process.ready) is not None)
        starting = self._unstarted > 0 or any(not p.ready.done() for p in self._all)
        if able and (self._warm or not starting):
            self._warm = True
            return None
        if not starting:
            failed = [
                error
                for process in self._all
                if not process.ready.cancelled() and (error := process.ready.exception())
            ]
            return f"no finishing process can sign: {failed[-1] if failed else 'none runs'}", True
        return f"finishing processes starting: {able} of {self.size} ready", False

    def working_pids(self) -> list[int]:
        """The ids of the processes running a job now (those that are ready)."""
        return [pid for process in self._all if process.working and (pid := _pid(process.ready))]

    def start(self) -> None:
        """Spawn the processes now (each loads its libraries in the background): ``at_once``
        of them, the others each when one before it is ready."""
        if self._free is not None:
            return
        self._free = asyncio.Queue()
        self._unstarted = self.size
        for _ in range(self.at_once):
            self._launch()

    def _launch(self, _: object = None) -> None:
        if self._closed or self._unstarted <= 0 or self._free is None:
            return
        self._unstarted -= 1
        process = self._spawn()
        self._free.put_nowait(process)
        if self._unstarted > 0:  # ready or dead: the next one starts
            process.ready.add_done_callback(self._launch)

    async def wait_ready(self) -> None:
        self.start()
        while True:
            waiting = [process.ready for process in self._all if not process.ready.done()]
            if self._closed or (not waiting and self._unstarted <= 0):
                return
            await asyncio.gather(*waiting, return_exceptions=True)
            if not waiting:
                await asyncio.sleep(0)  # a callback is about to start the next one

    def _spawn(self) -> _Process:
        executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=child.start,
            initargs=(
                str(self.signing_dir) if self.signing_dir is not None else None,
                self.tsa_url,
            ),
        )
        ready = asyncio.wrap_future(executor.submit(child.ready))
        ready.add_done_callback(_retrieve)  # a child that cannot sign raises its reason here
        signature = asyncio.wrap_future(executor.submit(child.signature_cpu_s))
        signature.add_done_callback(_retrieve)  # a process that died first answers nothing
        process = _Process(executor, ready, signature)
        self._all.append(process)
        return process

    async def run(self, pdf: bytes, inputs: finishing.Inputs) -> child.Finished:
        """``pdf`` through the stages ``inputs.finish`` asks for, in a free process. Raises
        :class:`finishing.FinishingFailed` (permanent), a temporary error a stage raised, or
        :class:`FinisherDied`."""
        if self._closed:
            raise outcomes.TemporaryError("the renderer is stopping: finishing processes closed")
        self.start()
        assert self._free is not None
        handed = dataclasses.replace(inputs, signer=None)  # each process has its own
        while True:
            process = await self._free.get()
            try:  # a process that died while it waited is replaced, and the job takes another
                future = process.executor.submit(child.finish, pdf, handed)
            except BrokenProcessPool:
                await self._replace(process, job=False)
                continue
            break
        process.working = True
        try:
            answer = await asyncio.wrap_future(future)
        except BrokenProcessPool:
            raise FinisherDied(await self._replace(process, job=True)) from None
        except BaseException:
            process.working = False
            self._free.put_nowait(process)
            raise
        process.working = False
        self._free.put_nowait(process)
        if isinstance(answer, child.Failed):
            if answer.temporary:
                raise outcomes.TemporaryError(answer.reason, delay_s=answer.delay_s)
            failed = finishing.FinishingFailed(answer.stage, answer.reason)
            failed.kind = answer.kind
            raise failed
        return answer

    async def _replace(self, dead: _Process, *, job: bool) -> str:
        """A new process for ``dead`` (which is shut down); what to say about its death
        (``job``: while it ran a job)."""
        self._all.remove(dead)
        pid, exit_code = await asyncio.to_thread(_death, dead)
        dead.executor.shutdown(wait=False, cancel_futures=True)
        self.replaced += 1
        how = f"exited with {exit_code}" if exit_code is not None else "ended"
        if exit_code is not None and exit_code < 0:
            with contextlib.suppress(ValueError):
                how = f"killed by {signal.Signals(-exit_code).name}"
        reason = (
            f"the finishing process {pid} died ({how}) while it finished this job; "
            "it was replaced, and the job is delivered again"
            if job
            else f"the finishing process {pid} died ({how}) while idle; it was replaced"
        )
        logger.warning("%s", reason)
        assert self._free is not None
        if not self._closed:
            self._free.put_nowait(self._spawn())
        return reason

    async def close(self) -> None:
        self._closed = True
        for process in self._all:
            process.ready.cancel()
            await asyncio.to_thread(process.executor.shutdown, wait=True, cancel_futures=True)
        self._all.clear()


def _death(process: _Process, *, wait_s: float = 2.0) -> tuple[int | None, int | None]:
    """The dead process's id and exit code (negative: the signal), as far as they are known
    within ``wait_s`` (blocking: run it in a thread).

    The executor's manager thread reaps its broken worker at the same moment: whichever thread's
    ``waitpid`` loses sees ``ECHILD`` and an exit code of None until the winner has recorded it on
    the shared ``Popen``, so the code is read again until it is there."""
    pid = _pid(process.ready)
    # the executor's own record of its process (CPython's ``_processes``: pid -> Process)
    known = getattr(process.executor, "_processes", None) or {}
    for found_pid, found in dict(known).items():
        deadline = time.monotonic() + wait_s
        with contextlib.suppress(Exception):
            found.join(timeout=wait_s)
            while found.exitcode is None and time.monotonic() < deadline:
                time.sleep(0.01)
            return found_pid, found.exitcode
    return pid, None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _pid(ready: asyncio.Future[int]) -> int | None:
    """A process's id once it is ready (None before, or if its start failed)."""
    if not ready.done() or ready.cancelled() or ready.exception() is not None:
        return None
    return ready.result()
