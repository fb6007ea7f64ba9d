"""The blob store (Azure Blob Storage): PDFs, result records and claim-check payloads."""

from __future__ import annotations

import secrets

from azure.core import exceptions as azure_errors
from azure.storage.blob import BlobBlock, ContentSettings
from azure.storage.blob.aio import BlobClient

from reportfarm import contract
from reportfarm.storage import accounts

BLOCK_BYTES = 4 * 2**20
"""Bytes per staged block: few requests for big PDFs, little held at once."""


class BlobStore:
    """One container of the farm's storage account."""

    def __init__(self, account: accounts.Account | str, container: str) -> None:
        self.container_name = container
        self._service = accounts.of(account).blob_service()
        self._container = self._service.get_container_client(container)

    async def __aenter__(self) -> BlobStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._service.close()

    async def ensure(self) -> None:
        try:
            await self._container.create_container()
        except azure_errors.ResourceExistsError:
            pass

    async def put(self, name: str, data: bytes, *, content_type: str) -> None:
        """Write (or overwrite: outputs are idempotent) one blob."""
        await self._container.upload_blob(
            name,
            data,
            overwrite=True,
            content_settings=ContentSettings(content_type=content_type),
        )

    async def create(self, name: str, data: bytes, content_type: str) -> bool:
        """Write the blob only if it does not exist (If-None-Match: *): True when this call
        created it, False when it was there already. Atomic: of writers racing, one wins."""
        try:
            await self._container.upload_blob(
                name,
                data,
                overwrite=False,
                content_settings=ContentSettings(content_type=content_type),
            )
        except azure_errors.ResourceExistsError:
            return False
        return True

    def blocks(
        self, name: str, *, content_type: str, block_bytes: int = BLOCK_BYTES
    ) -> BlockUpload:
        """Write one blob block by block (:class:`BlockUpload`), for data too big to hold."""
        client = self._container.get_blob_client(name)
        return BlockUpload(client, content_type=content_type, block_bytes=block_bytes)

    async def get(self, name: str) -> bytes:
        """The blob's bytes; raises KeyError when it does not exist."""
        try:
            downloader = await self._container.download_blob(name)
        except azure_errors.ResourceNotFoundError:
            raise KeyError(name) from None
        return bytes(await downloader.readall())

    async def exists(self, name: str) -> bool:
        return bool(await self._container.get_blob_client(name).exists())

    async def list(self, prefix: str) -> list[str]:
        return [blob.name async for blob in self._container.list_blobs(name_starts_with=prefix)]

    async def put_result(self, record: contract.ResultRecord) -> None:
        await self.put(
            contract.result_blob(record.job_id), record.to_json(), content_type="application/json"
        )

    async def get_result(self, job_id: str) -> contract.ResultRecord | None:
        try:
            return contract.ResultRecord.from_json(await self.get(contract.result_blob(job_id)))
        except KeyError:
            return None


class BlockUpload:
    """One blob written as staged blocks, visible (and overwriting the old one: outputs are
    idempotent) only once :meth:`commit` lists them.

    An upload that stops before its commit leaves only uncommitted blocks, which the service
    discards (at the blob's next commit, or after a week). Block ids carry a random prefix per
    upload: two deliveries of one job writing the same blob at once never mix their blocks, and
    whichever commits last wins whole.
    """

    def __init__(self, client: BlobClient, *, content_type: str, block_bytes: int) -> None:
        if block_bytes < 1:
            raise ValueError(f"block size {block_bytes} is not positive")
        self._client = client
        self._content_type = content_type
        self._block_bytes = block_bytes
        self._prefix = secrets.token_hex(8)
        self._ids: list[str] = []
        self._buffer = bytearray()
        self.size = 0
        """Bytes written so far."""

    @property
    def blocks(self) -> int:
        """Blocks staged so far."""
        return len(self._ids)

    async def write(self, data: bytes) -> None:
        """Add ``data``; every full block is staged at once, the rest waits for more."""
        self.size += len(data)
        self._buffer += data
        while len(self._buffer) >= self._block_bytes:
            await self._stage(bytes(self._buffer[: self._block_bytes]))
            del self._buffer[: self._block_bytes]

    async def commit(self) -> None:
        """Stage what is left and make the blob the blocks written, in order."""
        if self._buffer or not self._ids:
            await self._stage(bytes(self._buffer))
            self._buffer.clear()
        await self._client.commit_block_list(
            [BlobBlock(block_id=block_id) for block_id in self._ids],
            content_settings=ContentSettings(content_type=self._content_type),
        )

    async def _stage(self, block: bytes) -> None:
        block_id = f"{self._prefix}-{len(self._ids):06d}"  # same length for every block
        await self._client.stage_block(block_id, block, length=len(block))
        self._ids.append(block_id)
