"""The blob store (Azure Blob Storage): PDFs, result records and claim-check payloads."""

from __future__ import annotations

from azure.core import exceptions as azure_errors
from azure.storage.blob import ContentSettings

from reportfarm import contract
from reportfarm.storage import accounts


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
