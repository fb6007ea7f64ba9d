"""Settings read from the environment, one typed object per concern, every field documented.

All variables share the ``REPORTFARM_`` prefix, except the storage account's, which keep the names
every Azure tool uses: ``AZURE_STORAGE_CONNECTION_STRING`` or ``AZURE_STORAGE_ACCOUNT_URL``.

A field read from a variable says so once, where it is declared: ``queue: str =
setting(QUEUE_VAR, "reports")`` names the variable, the default and how a value is checked.
:meth:`FromEnv.from_env` reads every such field by the field's type (``str``, ``int``,
``float``, ``bool``, ``tuple[str, ...]`` from a comma-separated list, ``Path``, each also
``| None``); a variable unset or blank leaves the field's default, and a value that cannot be
used raises :class:`SettingsError` naming the variable.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

CONNECTION_STRING_VAR = "AZURE_STORAGE_CONNECTION_STRING"
ACCOUNT_URL_VAR = "AZURE_STORAGE_ACCOUNT_URL"
BLOB_URL_VAR = "AZURE_STORAGE_BLOB_URL"
QUEUE_VAR = "REPORTFARM_QUEUE"
CONTAINER_VAR = "REPORTFARM_CONTAINER"
HINT_KEY_VAR = "REPORTFARM_HINT_KEY"
HINT_KEY_MIN_CHARS = 32
"""A hint key shorter than this is refused: whoever holds it can hand a renderer a job."""

_T = TypeVar("_T")
_D = TypeVar("_D", bound="DataclassInstance")
_FLAGS = {"1": True, "true": True, "0": False, "false": False}


class SettingsError(ValueError):
    """An environment variable holds a value that cannot be used."""


Parse = Callable[[Mapping[str, str], str], object]
"""A field's own reading of its variable: (environment, variable name) -> the value."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Variable:
    """How one field is read from the environment (what :func:`setting` declares)."""

    name: str
    minimum: float = 0
    """A number below it is refused (in the variable's unit)."""
    unit: int = 1
    """The variable counts in these: ``2**20`` for a field in bytes set in MiB."""
    only_lower: bool = False
    """The variable may lower the default, never raise it (a larger value gives the default)."""
    secret: bool = False
    """Used byte for byte, white space and all (the other side holds the same bytes)."""
    parse: Parse | None = None
    """The field's own reading, instead of one by its type."""


def setting(
    name: str,
    default: _T,
    *,
    minimum: float = 0,
    unit: int = 1,
    only_lower: bool = False,
    secret: bool = False,
    parse: Parse | None = None,
) -> _T:
    """A dataclass field read from the variable ``name``; ``default`` when it is unset or blank
    (a mutable default, such as ``{}``, is copied for each object)."""
    var = Variable(
        name=name, minimum=minimum, unit=unit, only_lower=only_lower, secret=secret, parse=parse
    )
    metadata = {Variable: var}
    if isinstance(default, dict | list | set):
        factory = functools.partial(copy.copy, default)
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def variable(field: dataclasses.Field[Any]) -> Variable | None:
    """The variable a field is read from (declared with :func:`setting`), if any."""
    return field.metadata.get(Variable)


def env_list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in env.get(name, "").split(",") if item.strip())


def env_flag(env: Mapping[str, str], name: str) -> bool | None:
    """``1``/``true`` or ``0``/``false``; None when unset or anything else (the default holds)."""
    return _FLAGS.get(env.get(name, "").strip())


def _number(name: str, raw: str, kind: type[float], minimum: float) -> float:
    try:
        value = kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise SettingsError(f"{name}={raw!r} is not {what}") from None
    if value < minimum:
        raise SettingsError(f"{name}={value} is below {kind(minimum)}")
    return value


def _read(env: Mapping[str, str], var: Variable, kind: object) -> Any:
    """The variable's value as ``kind``; None when it is unset (the field keeps its default)."""
    raw = env.get(var.name, "")
    if not raw.strip():
        return None
    if var.parse is not None:
        return var.parse(env, var.name)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # X | None; a manifest Value
        kinds = [each for each in typing.get_args(kind) if each is not type(None)]
        kind = str if str in kinds else kinds[0]
    if kind is str:
        return raw if var.secret else raw.strip()
    if kind is bool:
        return env_flag(env, var.name)
    if kind is int or kind is float:
        return _number(var.name, raw.strip(), kind, var.minimum) * var.unit
    if kind == tuple[str, ...]:
        return env_list(env, var.name)
    if kind is Path:
        return Path(raw.strip())
    raise TypeError(f"{var.name}: no reading of {kind} (give the setting a parse)")


def from_env(cls: type[_D], env: Mapping[str, str] | None = None, /, **overrides: object) -> _D:
    """A ``cls`` with every field declared by :func:`setting` read from ``env`` (default: the
    process's), every field of a :class:`FromEnv` type read by its ``from_env``, and
    ``overrides`` as given (they are not read)."""
    env = os.environ if env is None else env
    kinds = typing.get_type_hints(cls)
    values: dict[str, object] = {}
    for field in dataclasses.fields(cls):
        if field.name in overrides:
            continue
        kind, var = kinds[field.name], variable(field)
        if var is not None:
            value = _read(env, var, kind)
            if var.only_lower and value is not None and value > field.default:
                value = field.default
            if value is not None:
                values[field.name] = value
        elif isinstance(kind, type) and issubclass(kind, FromEnv):
            values[field.name] = kind.from_env(env)
    return cls(**values, **overrides)


class FromEnv:
    """A settings dataclass's ``from_env``: see :func:`from_env`."""

    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, /, **overrides: object) -> Self:
        return from_env(cls, env, **overrides)


def _hint_key(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    if len(value) < HINT_KEY_MIN_CHARS:
        raise SettingsError(
            f"{name} has {len(value)} characters: at least {HINT_KEY_MIN_CHARS} (whoever holds it "
            "can hand a renderer a job; e.g. `openssl rand -hex 32`)"
        )
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class StorageSettings(FromEnv):
    """Where jobs and their outputs live, and how to sign in to that account.

    Two ways in, chosen by which is set: a connection string (an account key or SAS in it), or an
    account URL signed in with Entra ID through azure-identity's ``DefaultAzureCredential``
    (workload identity on AKS). When both are set the connection string wins: it is the explicit
    key, and ``reportfarm up`` writes one for its local farm.
    """

    connection_string: str | None = setting(CONNECTION_STRING_VAR, None, secret=True)
    """AZURE_STORAGE_CONNECTION_STRING; with no account URL either, None means: start the embedded
    Azurite (local use only)."""
    account_url: str | None = setting(ACCOUNT_URL_VAR, None)
    """AZURE_STORAGE_ACCOUNT_URL: the account's queue endpoint
    (``https://<account>.queue.core.windows.net``), signed in with DefaultAzureCredential."""
    blob_url: str | None = setting(BLOB_URL_VAR, None)
    """AZURE_STORAGE_BLOB_URL: the same account's blob endpoint; default: the account URL with its
    ``.queue.`` host label read as ``.blob.`` (set it for emulators and custom domains)."""
    queue: str = setting(QUEUE_VAR, "reports")
    """REPORTFARM_QUEUE: the job queue; its poison queue is ``<queue>-poison``."""
    container: str = setting(CONTAINER_VAR, "reports")
    """REPORTFARM_CONTAINER: the blob container for PDFs, result records and payloads."""
    hint_key: str | None = setting(HINT_KEY_VAR, None, secret=True, parse=_hint_key)
    """REPORTFARM_HINT_KEY: the secret the gateway and the renderers sign hand-offs and carried
    answers with (``reportfarm.carrying``), at least 32 characters, the same on both sides;
    unset: derived from the account key or SAS of the connection string, so an account reached
    with Entra ID (no secret in a connection string) has hand-offs and carried answers only
    with it."""

    @property
    def configured(self) -> bool:
        """An account is named (by either setting); False: the embedded Azurite is wanted."""
        return bool(self.connection_string or self.account_url)

    def with_connection(self, connection_string: str) -> StorageSettings:
        return dataclasses.replace(self, connection_string=connection_string)
