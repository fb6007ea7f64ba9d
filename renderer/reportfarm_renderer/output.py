"""Where a job's PDF goes: one upload when it was held whole, blocks while it prints when not.

A :class:`PdfOutput` is the pool's :class:`~reportfarm_renderer.pool.Sink` for one job. The print
(:mod:`.printing`) returns a PDF that fits in its first chunk whole: :meth:`PdfOutput.store`
uploads it in one request, after the browser went back to the pool. A bigger one arrives through
:meth:`PdfOutput.write` while the browser waits, each full block staged as it comes, and
:meth:`PdfOutput.store` commits the blocks afterwards. Either way the size limit holds: checked on
the whole PDF, or on every chunk while streaming, where going over stops the print at once and
leaves only uncommitted blocks (discarded by the service; no blob appears, an old one stays).
"""

from __future__ import annotations

from reportfarm import outcomes
from reportfarm.storage import blobs as storing
from reportfarm.storage import errors as storage_errors

CONTENT_TYPE = "application/pdf"


class PdfOutput:
    """The PDF of one job, to the blob ``name``, at most ``limit`` bytes."""

    def __init__(
        self,
        store: storing.BlobStore,
        name: str,
        *,
        limit: int,
        block_bytes: int = storing.BLOCK_BYTES,
    ) -> None:
        self._store = store
        self._name = name
        self._limit = limit
        self._upload = store.blocks(name, content_type=CONTENT_TYPE, block_bytes=block_bytes)
        self.streamed = False
        """Whether the PDF came in chunks (staged as blocks) rather than whole."""

    @property
    def blocks(self) -> int:
        """Blocks staged so far (0 for a PDF stored in one request)."""
        return self._upload.blocks

    async def write(self, chunk: bytes) -> None:
        """The next chunk of a PDF too big to hold; raises once the PDF passes the limit."""
        self.streamed = True
        seen = self._upload.size + len(chunk)
        if seen > self._limit:
            raise self._too_big(f"more than {seen}")
        with storage_errors.classified("upload"):
            await self._upload.write(chunk)

    async def store(self, pdf: bytes | None) -> int:
        """Store what the print returned (None: the chunks written); returns the PDF's size."""
        if pdf is None:
            await self._upload.commit()
            return self._upload.size
        if len(pdf) > self._limit:
            raise self._too_big(str(len(pdf)))
        await self._store.put(self._name, pdf, content_type=CONTENT_TYPE)
        return len(pdf)

    def _too_big(self, size: str) -> outcomes.PermanentError:
        return outcomes.PermanentError(f"PDF is {size} bytes, over the limit of {self._limit}")


class HeldPdf:
    """The sink of a job whose PDF is finished before it is stored: chunks are held (up to
    ``limit``), not streamed to the blob, since finishing works on the whole document."""

    def __init__(self, *, limit: int) -> None:
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0

    async def write(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._limit:
            raise outcomes.PermanentError(
                f"PDF is more than {self._size} bytes, over the limit of {self._limit}"
            )
        self._chunks.append(chunk)

    def whole(self, pdf: bytes | None) -> bytes:
        """The PDF: as the print returned it, or the chunks written, joined."""
        if pdf is not None:
            return pdf
        joined = b"".join(self._chunks)
        self._chunks = []
        return joined
