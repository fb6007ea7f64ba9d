"""The command line's storage connection: where the connection string comes from, whether it can
be used, and one line (what is wrong, what to do) instead of a traceback when it cannot.

The string comes from ``AZURE_STORAGE_CONNECTION_STRING``, else from ``.reportfarm/env`` in the
current folder (the file ``reportfarm up --serve`` writes while its farm runs, and removes when
it stops); with neither, ``AZURE_STORAGE_ACCOUNT_URL`` signs in with Entra ID
(DefaultAzureCredential: ``az login`` on a laptop, workload identity in a pod). Before any call a
malformed string is refused, and a loopback endpoint (the embedded Azurite) that refuses
connections is reported at once: a stopped farm is the likeliest mistake, and the SDK would
otherwise retry for seconds and print a 150-line traceback.
"""

from __future__ import annotations

import base64
import os
import shlex
import socket
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import azure.core.exceptions

from reportfarm import settings as common
from reportfarm.storage import accounts

ENV_VAR = common.CONNECTION_STRING_VAR
ENV_FILE = Path(".reportfarm") / "env"
"""Written by ``reportfarm up --serve`` (relative to the folder it runs in)."""
RENDERERS_VAR = "REPORTFARM_RENDERERS"
"""Comma-separated base URLs of renderers (``http://host:port``) for ``status --watch``."""

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_UP_HINT = "start the farm with `reportfarm up --serve` and use the connection string it prints"


class ConnectionProblem(Exception):
    """The storage account cannot be used; the message is one line: what is wrong, what to do."""


def read_env_file(path: Path = ENV_FILE) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and shell quoting allowed) of the farm's env file."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text(encoding="utf-8").splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            words = words[1:]
        if len(words) == 1 and "=" in words[0]:
            key, _, value = words[0].partition("=")
            values[key] = value
    return values


def setting(name: str) -> tuple[str | None, str]:
    """A variable's value and where it came from: the environment, else the farm's env file."""
    value = os.environ.get(name)
    if value:
        return value, "the environment"
    value = read_env_file().get(name)
    if value:
        return value, str(ENV_FILE)
    return None, ""


def connection_string() -> tuple[str, str]:
    """The connection string and where it came from, checked: :class:`ConnectionProblem` if it
    is missing, malformed or a loopback endpoint that refuses connections."""
    value, source = setting(ENV_VAR)
    if not value:
        raise ConnectionProblem(f"{ENV_VAR} is not set: {_UP_HINT}, or point it at your account")
    check(value, source=source)
    return value, source


def account() -> tuple[accounts.Account, str]:
    """The account the command line uses and where its setting came from: the connection string
    (checked, see :func:`connection_string`) if there is one, else the account URL signed in with
    DefaultAzureCredential; :class:`ConnectionProblem` when there is neither."""
    value, source = setting(ENV_VAR)
    url, url_source = setting(common.ACCOUNT_URL_VAR)
    if value or not url:
        return accounts.Account(connection_string=connection_string()[0]), source
    storage = common.StorageSettings(
        connection_string=None, account_url=url, blob_url=setting(common.BLOB_URL_VAR)[0]
    )
    try:
        return accounts.from_settings(storage), url_source
    except common.SettingsError as error:
        raise ConnectionProblem(str(error)) from None


def parse(value: str) -> dict[str, str]:
    """``Key=Value;...`` pairs, keys as written; empty segments allowed."""
    pairs: dict[str, str] = {}
    for segment in value.strip().split(";"):
        if not segment.strip():
            continue
        key, sep, item = segment.partition("=")
        if not sep or not key.strip():
            raise ConnectionProblem(
                f"{ENV_VAR} is malformed: {_shown(segment)!r} is not Key=Value; "
                "copy the whole string again (Key=Value pairs separated by ';')"
            )
        pairs[key.strip()] = item.strip()
    return pairs


def check(value: str, *, source: str = "the environment") -> None:
    """Refuse a string the SDK cannot use; try a loopback endpoint's port."""
    pairs = {key.lower(): item for key, item in parse(value).items()}
    if pairs.get("usedevelopmentstorage", "").lower() == "true":
        return
    missing = [
        name
        for name, present in (
            ("AccountName", "accountname" in pairs or "blobendpoint" in pairs),
            ("AccountKey or SharedAccessSignature", bool(_credential(pairs))),
        )
        if not present
    ]
    if missing:
        raise ConnectionProblem(
            f"{ENV_VAR} is malformed: no {' and no '.join(missing)}; copy the whole string from "
            "your storage account's Access keys, or the one `reportfarm up --serve` prints"
        )
    for name, url in _endpoints(pairs):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConnectionProblem(f"{ENV_VAR} is malformed: {name}={url!r} is not an http(s) URL")
        if parsed.hostname in _LOOPBACK:
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            if not _accepts(parsed.hostname, port):
                raise ConnectionProblem(
                    f"nothing listens at {parsed.hostname}:{port} ({name} of {ENV_VAR} from "
                    f"{source}): the farm it names has stopped; {_UP_HINT}"
                )


def explain(error: BaseException) -> str | None:
    """One line for a storage failure a user can fix, else None (a bug: let it raise)."""
    for cause in _causes(error):
        if isinstance(cause, ConnectionProblem):
            return str(cause)
        if type(cause).__name__ == "CredentialUnavailableError":  # azure.identity's
            return (
                f"no Entra ID sign-in for {common.ACCOUNT_URL_VAR} ({_first_line(cause)}): run "
                f"`az login`, or set {ENV_VAR} instead"
            )
        if isinstance(cause, azure.core.exceptions.ClientAuthenticationError) and _by_identity():
            return (
                f"the storage account refused the Entra ID sign-in for {common.ACCOUNT_URL_VAR} "
                f"({_first_line(cause)}): give the identity a Storage Queue and Blob Data role "
                "on the account"
            )
        if isinstance(cause, azure.core.exceptions.ClientAuthenticationError):
            return (
                f"the storage account refused the key in {ENV_VAR} (authentication failed): "
                "copy the key again from the account's Access keys"
            )
        if isinstance(cause, azure.core.exceptions.ServiceRequestError):
            return f"cannot reach the storage account in {ENV_VAR}: {_first_line(cause)}; " + (
                "check the endpoint and the network, or " + _UP_HINT
            )
        if type(cause).__name__ == "AzureSigningError" or (
            isinstance(cause, ValueError) and "connection string" in str(cause).lower()
        ):
            return f"{ENV_VAR} is malformed ({_first_line(cause)}): copy the whole string again"
    return None


def _by_identity() -> bool:
    """The command line signs in with the account URL (no connection string is set)."""
    return not setting(ENV_VAR)[0] and bool(setting(common.ACCOUNT_URL_VAR)[0])


def _credential(pairs: dict[str, str]) -> str:
    key = pairs.get("accountkey", "")
    try:
        base64.b64decode(key, validate=True)
    except ValueError:  # binascii.Error, or a key with non-ASCII characters
        raise ConnectionProblem(
            f"{ENV_VAR} is malformed: AccountKey is not base64; copy it again"
        ) from None
    return key or pairs.get("sharedaccesssignature", "")


def _endpoints(pairs: dict[str, str]) -> Iterator[tuple[str, str]]:
    for name in ("BlobEndpoint", "QueueEndpoint"):
        url = pairs.get(name.lower())
        if url:
            yield name, url


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:200] if lines else type(error).__name__


def _shown(segment: str) -> str:
    return segment.strip()[:40]
