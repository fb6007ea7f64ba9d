"""The done hint: tell the gateway replica a client waits at that its job's record is stored.

The job names the replica (``contract.Job.notify``, set by the gateway for synchronous reports);
the POST is sent without waiting for it, after the record is written, with a short timeout. The
record stays the answer: a hint that is lost, late or refused costs the gateway's polling
interval, never a job (see ``reportfarm_gateway.hinting``). A succeeded job's hint carries the
record and the PDF, signed, when the renderer has a key (:mod:`reportfarm.carrying`): the gateway
then answers without reading them back.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from prometheus_client import Counter

from reportfarm import carrying, contract

logger = logging.getLogger(__name__)

TIMEOUT_S = 1.0
"""A hint not delivered within this is dropped."""
MAX_PENDING = 256
"""Hints in flight at most; past it new ones are dropped (a gateway that does not answer must
not pile up tasks in the renderer)."""
MAX_CARRIED_BYTES = 16 * 2**20
"""PDF bytes carried by hints in flight at most; past it a hint carries nothing (a slow gateway
must not make the renderer hold PDFs it has stored)."""


class DoneHints:
    def __init__(self, *, counter: Counter | None = None, key: bytes | None = None) -> None:
        self.counter = counter
        """``reportfarm_hints``, labelled kind and outcome."""
        self.key = key
        """Signs the answers hints carry (:func:`reportfarm.carrying.key_for`); None: they carry
        nothing."""
        self.carrying = 0
        """PDF bytes in the hints in flight (at most :data:`MAX_CARRIED_BYTES`)."""
        self.sent = 0
        self.failed = 0
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def send(
        self,
        job: contract.Job | None,
        *,
        record: contract.ResultRecord | None = None,
        pdf: bytes | None = None,
    ) -> None:
        """Tell the job's gateway its record is stored, if the job names one; with the stored
        ``record`` and ``pdf`` when they can be carried (a succeeded job's, into its default
        blob, small enough, with a key to sign them)."""
        url = contract.done_url(job) if job is not None else None
        if job is None or url is None or len(self._tasks) >= MAX_PENDING:
            return
        body, headers = self._carried(job, record, pdf)
        size = len(body) if body is not None else 0
        if self.carrying + size > MAX_CARRIED_BYTES:
            body, headers, size = None, None, 0
        self.carrying += size
        task = asyncio.create_task(self._post(url, body, headers), name="done-hint")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if size:
            task.add_done_callback(lambda _: self._carried_done(size))

    def _carried_done(self, size: int) -> None:
        self.carrying -= size

    def _carried(
        self, job: contract.Job, record: contract.ResultRecord | None, pdf: bytes | None
    ) -> tuple[bytes | None, dict[str, str] | None]:
        if (
            self.key is None
            or record is None
            or pdf is None
            or len(pdf) > carrying.MAX_PDF_BYTES
            or not carrying.answers(record, job.job_id, pdf_bytes=len(pdf))
        ):
            return None, None
        record_json = record.to_json()
        if len(record_json) > carrying.MAX_RECORD_BYTES:
            return None, None
        signature = carrying.sign(self.key, job.job_id, record_json, pdf)
        headers = {
            carrying.RECORD_HEADER: carrying.encode_record(record_json),
            carrying.SIGNATURE_HEADER: signature,
            "Content-Type": "application/pdf",
        }
        return pdf, headers

    async def _post(self, url: str, body: bytes | None, headers: dict[str, str] | None) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S))
        try:
            async with self._session.post(url, data=body, headers=headers):
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
