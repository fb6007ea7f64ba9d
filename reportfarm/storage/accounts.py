"""The storage account, and the one place its SDK clients are built.

Two ways in, chosen by which setting is present (``reportfarm.settings.StorageSettings``): a
connection string (an account key or a SAS inside it), or an account URL signed in with Entra ID
through azure-identity's ``DefaultAzureCredential``. On AKS that credential is workload identity:
the pod's service account is federated with a managed identity, and the token is exchanged for a
storage token, with no key anywhere. On a laptop the same credential is ``az login``.

The queue and blob adapters take an :class:`Account` (or, as before, a connection string); the
renderer, the gateway, the client and the operator build theirs with :func:`opened`, which also
closes the credential it made.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from azure.core.credentials_async import AsyncTokenCredential
from azure.storage.blob.aio import BlobServiceClient
from azure.storage.queue.aio import QueueClient

from reportfarm import settings as common
from reportfarm.storage import retry


@dataclasses.dataclass(frozen=True, kw_only=True)
class Account:
    """How to reach one storage account: a connection string, or endpoints and a credential."""

    connection_string: str | None = None
    """Key or SAS sign-in; when set, the endpoints and the credential are not used."""
    queue_url: str | None = None
    """The queue endpoint (``https://<account>.queue.core.windows.net``)."""
    blob_url: str | None = None
    """The blob endpoint (``https://<account>.blob.core.windows.net``)."""
    credential: AsyncTokenCredential | None = None
    """Entra ID sign-in for the endpoints (DefaultAzureCredential unless given)."""
    owns_credential: bool = False
    """:meth:`close` closes the credential (it was made for this account alone)."""

    def __post_init__(self) -> None:
        if self.connection_string is None and not (
            self.queue_url and self.blob_url and self.credential is not None
        ):
            raise ValueError("an Account needs a connection string, or both URLs and a credential")

    @property
    def signed_in_with(self) -> str:
        """``connection string`` or ``token credential``: for log lines."""
        return "connection string" if self.connection_string else "token credential"

    async def close(self) -> None:
        if self.owns_credential and self.credential is not None:
            await self.credential.close()

    def queue_client(self, name: str) -> QueueClient:
        options = _sdk_options()
        if self.connection_string is not None:
            return QueueClient.from_connection_string(self.connection_string, name, **options)
        return QueueClient(str(self.queue_url), name, credential=self.credential, **options)

    def blob_service(self) -> BlobServiceClient:
        options = _sdk_options()
        if self.connection_string is not None:
            return BlobServiceClient.from_connection_string(self.connection_string, **options)
        return BlobServiceClient(str(self.blob_url), credential=self.credential, **options)


def _sdk_options() -> dict[str, Any]:
    return {**retry.SDK_OPTIONS, "use_env_settings": reads_environment()}


def reads_environment(environ: Mapping[str, str] = os.environ, home: Path | None = None) -> bool:
    """Whether the SDK's HTTP sessions read proxy variables and ``.netrc`` (aiohttp's
    ``trust_env``, the SDK's ``use_env_settings``): only when there is one to read.

    aiohttp reads them again on every request, each in a thread of its own (two thread hops a
    request): in an A/B run that was ~4 ms of the renderer's CPU a PDF, about a sixth of its
    Python. A proxy variable (``*_proxy``, any case: ``HTTPS_PROXY``, ``no_proxy``...) or a
    ``.netrc`` (``NETRC``, else the home folder's) turns it on, as the SDK's default would."""
    if any(name.lower().endswith("_proxy") and value for name, value in environ.items()):
        return True
    netrc = environ.get("NETRC") or Path(home or Path.home(), ".netrc")
    return Path(netrc).is_file()


def of(account: Account | str) -> Account:
    """An Account from an Account or a connection string (the adapters take either)."""
    return account if isinstance(account, Account) else Account(connection_string=account)


def blob_url_for(queue_url: str) -> str:
    """The blob endpoint of the account whose queue endpoint is given: Azure's host naming
    (``<account>.queue.<suffix>`` -> ``<account>.blob.<suffix>``). Raises SettingsError when
    the host does not follow it (an emulator, a custom domain): then set the blob URL."""
    parts = urllib.parse.urlsplit(queue_url)
    labels = (parts.hostname or "").split(".")
    if len(labels) < 3 or labels[1] != "queue":
        raise common.SettingsError(
            f"{common.ACCOUNT_URL_VAR}={queue_url!r} is not an <account>.queue.<suffix> URL: "
            f"set {common.BLOB_URL_VAR} to the account's blob endpoint"
        )
    labels[1] = "blob"
    netloc = ".".join(labels) + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def default_credential() -> AsyncTokenCredential:
    """azure-identity's DefaultAzureCredential: workload identity, managed identity, az login."""
    from azure.identity.aio import DefaultAzureCredential

    return DefaultAzureCredential()


def from_settings(
    storage: common.StorageSettings, *, credential: AsyncTokenCredential | None = None
) -> Account:
    """The account the settings name (the connection string wins when both are set); without a
    given credential, a DefaultAzureCredential the account owns (:meth:`Account.close`).
    SettingsError when neither setting is present."""
    if storage.connection_string:
        return Account(connection_string=storage.connection_string)
    if not storage.account_url:
        raise common.SettingsError(
            f"no storage account: set {common.CONNECTION_STRING_VAR}, or "
            f"{common.ACCOUNT_URL_VAR} (signed in with DefaultAzureCredential)"
        )
    blob_url = storage.blob_url or blob_url_for(storage.account_url)
    return Account(
        queue_url=storage.account_url,
        blob_url=blob_url,
        credential=credential or default_credential(),
        owns_credential=credential is None,
    )


@contextlib.asynccontextmanager
async def opened(
    storage: common.StorageSettings, *, credential: AsyncTokenCredential | None = None
) -> AsyncIterator[Account]:
    """:func:`from_settings`, closed on exit."""
    account = from_settings(storage, credential=credential)
    try:
        yield account
    finally:
        await account.close()
