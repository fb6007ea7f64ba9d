"""The PDF read together with its record when the done hint comes, not after it.

A synchronous report's answer used to be two storage round trips in a row once the renderer's
done hint came: the record, then the PDF it names. The PDF's name is known before the record is
read (a report's output is its default blob, :func:`reportfarm.contract.default_output_blob`), so
on the hint both reads start at once. The record stays the answer: the bytes are used only when
it says the job succeeded into that very blob; otherwise they are dropped and the PDF (if any) is
read as before. A forged or early hint costs one read, as the hints' contract says
(reportfarm_gateway.hinting).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from reportfarm import contract
from reportfarm.client import ReportFarmClient

logger = logging.getLogger(__name__)


class PdfPrefetch:
    """One job's PDF, read at most once in the background (:meth:`start`), then taken or
    dropped (:meth:`take`, :meth:`drop`)."""

    def __init__(self, client: ReportFarmClient, *, blob: str) -> None:
        self.client = client
        self.blob = blob
        self._task: asyncio.Task[bytes | None] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Begin the read (once): the hint says the record, hence the PDF, is stored."""
        if self._task is None:
            self._task = asyncio.create_task(self._read(), name=f"prefetch {self.blob}")

    async def take(self, record: contract.ResultRecord | None) -> bytes | None:
        """The bytes read, if the record says they are the job's PDF; else None (then read the
        PDF the usual way)."""
        if self._task is None:
            return None
        if record is None or record.state != "succeeded" or record.output_blob != self.blob:
            await self.drop()
            return None
        return await self._task

    async def drop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _read(self) -> bytes | None:
        try:
            return await self.client.blobs.get(self.blob)
        except KeyError:
            return None  # not there (yet): the record decides
        except Exception as error:  # a storage error: the usual read after the record retries
            logger.debug("prefetching %s failed: %r", self.blob, error)
            return None
