"""Settings read from the environment, one typed object per concern, every field documented.

All variables share the ``REPORTFARM_`` prefix, except the storage connection string, which keeps
the name every Azure tool uses: ``AZURE_STORAGE_CONNECTION_STRING``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping


class SettingsError(ValueError):
    """An environment variable holds a value that cannot be used."""


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name, "").strip() or default


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = _get(env, name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise SettingsError(f"{name}={value} is below {minimum}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = _get(env, name, str(default))
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={value} is below {minimum}")
    return value


def env_list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in env.get(name, "").split(",") if item.strip())


@dataclasses.dataclass(frozen=True, kw_only=True)
class StorageSettings:
    """Where jobs and their outputs live."""

    connection_string: str | None
    """AZURE_STORAGE_CONNECTION_STRING; None means: start the embedded Azurite (local use only)."""
    queue: str = "reports"
    """REPORTFARM_QUEUE: the job queue; its poison queue is ``<queue>-poison``."""
    container: str = "reports"
    """REPORTFARM_CONTAINER: the blob container for PDFs, result records and payloads."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StorageSettings:
        env = os.environ if env is None else env
        return cls(
            connection_string=env.get("AZURE_STORAGE_CONNECTION_STRING") or None,
            queue=_get(env, "REPORTFARM_QUEUE", "reports"),
            container=_get(env, "REPORTFARM_CONTAINER", "reports"),
        )

    def with_connection(self, connection_string: str) -> StorageSettings:
        return dataclasses.replace(self, connection_string=connection_string)
