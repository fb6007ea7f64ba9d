"""Every settings class declares each variable once, with its default and its checks
(``reportfarm.settings.setting``), and the one reading by type gives exactly that: the default
when unset, the value set into that field and no other, a bad value refused naming its variable.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from reportfarm_gateway.settings import GatewaySettings
from reportfarm_gateway.webhooks.settings import WebhookSettings
from reportfarm_operator.settings import OperatorSettings
from reportfarm_renderer.settings import RendererSettings

from reportfarm import renderer_api
from reportfarm import settings as common

CLASSES: list[type[Any]] = [
    common.StorageSettings,
    WebhookSettings,
    GatewaySettings,
    OperatorSettings,
    RendererSettings,
    renderer_api.RendererEnvironment,
]


def read(cls: type[Any], env: Mapping[str, str]) -> Any:
    if cls is renderer_api.RendererEnvironment:
        return cls.parse(env)
    return cls.from_env(env)


def defaults(cls: type[Any]) -> Any:
    """The dataclass's own defaults (the storage, which has none, is an unconfigured one)."""
    needed = {"storage": common.StorageSettings()} if "storage" in cls.__dataclass_fields__ else {}
    return cls(**needed)


def declared(*kinds: Any) -> list[Any]:
    """Every field read from a variable (only those of ``kinds``, if given)."""
    return [
        pytest.param(cls, field, var, id=f"{cls.__name__}.{field.name}")
        for cls in CLASSES
        for field in dataclasses.fields(cls)
        if (var := common.variable(field)) is not None
        and (not kinds or plain(typing.get_type_hints(cls)[field.name]) in kinds)
    ]


def plain(kind: Any) -> Any:
    """``X | None`` as X; a manifest Value as the string a pod sees."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kinds = [each for each in typing.get_args(kind) if each is not type(None)]
        return str if str in kinds else kinds[0]
    return kind


def another_value(kind: Any, default: Any, var: common.Variable) -> tuple[str, Any]:
    """A value for the variable other than the default, as text and as the field then holds."""
    if var.parse is not None and kind is str:  # a key with a length to hold
        return "k" * common.HINT_KEY_MIN_CHARS, "k" * common.HINT_KEY_MIN_CHARS
    if var.parse is not None:
        return "k=v", {"k": "v"}
    if kind is bool:
        return ("0", False) if default else ("1", True)
    if kind in (int, float):
        given = var.minimum if default is None else kind(default / var.unit)
        given += -1 if var.only_lower else 1
        return str(kind(given)), kind(given) * var.unit
    if kind == tuple[str, ...]:
        return " a, b ,", ("a", "b")
    if kind is Path:
        return " /set/by/test ", Path("/set/by/test")
    assert kind is str, kind
    return "set-by-test", "set-by-test"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_an_empty_environment_leaves_every_default(cls: type[Any]) -> None:
    assert read(cls, {}) == defaults(cls)


@pytest.mark.parametrize(("cls", "field", "var"), declared())
def test_a_variable_sets_its_own_field_and_no_other(
    cls: type[Any], field: dataclasses.Field[Any], var: common.Variable
) -> None:
    before = defaults(cls)
    kind = plain(typing.get_type_hints(cls)[field.name])
    text, expected = another_value(kind, getattr(before, field.name), var)
    after = read(cls, {var.name: text})
    assert getattr(after, field.name) == expected
    assert dataclasses.replace(after, **{field.name: getattr(before, field.name)}) == before


@pytest.mark.parametrize(("cls", "field", "var"), declared(int, float))
def test_a_bad_number_names_its_variable(
    cls: type[Any], field: dataclasses.Field[Any], var: common.Variable
) -> None:
    kind = plain(typing.get_type_hints(cls)[field.name])
    what = "a whole number" if kind is int else "a number"
    with pytest.raises(common.SettingsError, match=f"^{var.name}='many' is not {what}$"):
        read(cls, {var.name: "many"})
    below = kind(var.minimum) - 1
    with pytest.raises(
        common.SettingsError, match=f"^{var.name}={below} is below {kind(var.minimum)}$"
    ):
        read(cls, {var.name: str(below)})


def test_a_bad_pair_and_a_bad_network_name_their_variable() -> None:
    with pytest.raises(common.SettingsError, match=r"^REPORTFARM_TOKENS: item 2 is not key=value$"):
        GatewaySettings.from_env({"REPORTFARM_TOKENS": "a=b,secret"})
    with pytest.raises(common.SettingsError, match=r"^REPORTFARM_WEBHOOK_ALLOWED_NETWORKS: "):
        WebhookSettings.from_env({"REPORTFARM_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/8,banana"})


def test_a_limit_from_the_contract_can_be_lowered_never_raised() -> None:
    assert GatewaySettings.from_env({"REPORTFARM_GATEWAY_MAX_BODY_MB": "4"}).max_body_bytes == (
        4 * 2**20
    )
    raised = {"REPORTFARM_GATEWAY_MAX_BODY_MB": "10000", renderer_api.Var.MAX_DATA_MB: "10000"}
    assert (
        GatewaySettings.from_env(raised).max_body_bytes == defaults(GatewaySettings).max_body_bytes
    )
    assert (
        RendererSettings.from_env(raised).max_data_bytes
        == defaults(RendererSettings).max_data_bytes
    )


def test_secrets_are_used_byte_for_byte_and_names_are_trimmed() -> None:
    env = {common.CONNECTION_STRING_VAR: "a=b;key=k \n", common.QUEUE_VAR: " jobs\n"}
    storage = common.StorageSettings.from_env(env)
    assert (storage.connection_string, storage.queue) == ("a=b;key=k \n", "jobs")


def test_a_short_hint_key_is_refused_naming_its_variable() -> None:
    short = {common.HINT_KEY_VAR: "k" * (common.HINT_KEY_MIN_CHARS - 1)}
    with pytest.raises(common.SettingsError, match=r"^REPORTFARM_HINT_KEY has 31 characters"):
        common.StorageSettings.from_env(short)
    padded = {common.HINT_KEY_VAR: " " + "k" * common.HINT_KEY_MIN_CHARS + "\n"}
    assert common.StorageSettings.from_env(padded).hint_key == "k" * common.HINT_KEY_MIN_CHARS


def test_each_variable_is_declared_once() -> None:
    """Across the services' settings (RendererEnvironment writes the same variables the renderer
    reads, so it is left out); the renderer's own fields named like RendererEnvironment's are
    read through it, not declared again."""
    names = [
        var.name
        for cls in CLASSES[:-1]
        for field in dataclasses.fields(cls)
        if (var := common.variable(field)) is not None
    ]
    assert len(names) == len(set(names)), sorted(names)
    told = {field.name for field in dataclasses.fields(renderer_api.RendererEnvironment)}
    assert not [
        field.name
        for field in dataclasses.fields(RendererSettings)
        if field.name in told and common.variable(field) is not None
    ]


_NAMED = re.compile(r"[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_a_field_docstring_names_the_variable_the_field_is_read_from(cls: type[Any]) -> None:
    """The docstrings, which people read, start with the
    variable's name: it must be the one declared."""
    told = {
        field.name: var.name
        for field in dataclasses.fields(renderer_api.RendererEnvironment)
        if (var := common.variable(field)) is not None
    }
    read_from = {
        field.name: var.name if (var := common.variable(field)) else told.get(field.name)
        for field in dataclasses.fields(cls)
    }
    if cls is WebhookSettings:  # read in its from_env, from two variables
        read_from["policy"] = "REPORTFARM_WEBHOOK_ALLOW_PRIVATE"
    tree = ast.parse(inspect.getsource(cls).lstrip())
    body = tree.body[0].body  # type: ignore[attr-defined]
    checked = 0
    for statement, after in itertools.pairwise(body):
        if not (isinstance(statement, ast.AnnAssign) and isinstance(after, ast.Expr)):
            continue
        if not isinstance(after.value, ast.Constant) or not isinstance(after.value.value, str):
            continue
        named = _NAMED.match(after.value.value)
        if named:
            name = statement.target.id  # type: ignore[union-attr]
            assert named.group() == read_from[name], name
            checked += 1
    assert checked


SETTINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "using" / "settings.md"


def documented_defaults() -> dict[str, str]:
    """The settings page's table (docs/using/settings.md): variable -> the default it states
    (``_X`` after a ``/`` is short for the first name's prefix + ``_X``)."""
    page = SETTINGS_PAGE.read_text()
    stated: dict[str, str] = {}
    for row in re.findall(r"^\| (`(?:REPORTFARM|AZURE)_[^|]*)\|([^|]*)\|", page, re.MULTILINE):
        names = re.findall(r"`([A-Z0-9_]+)`", row[0])
        values = [value.strip() for value in row[1].split(" / ")]
        prefix = names[0].split("_")[0]
        for name, value in zip(names, values, strict=False):
            stated[name if name.startswith(prefix) else prefix + name] = value
    return stated


def test_the_settings_page_states_the_defaults_the_code_declares() -> None:
    """The settings page's table repeats the defaults for readers: it must say what the code
    says."""
    code: dict[str, Any] = {}
    renderer = {field.name: field for field in dataclasses.fields(RendererSettings)}
    for cls in CLASSES:
        for field in dataclasses.fields(cls):
            if (var := common.variable(field)) is None:
                continue
            value = field.default
            if cls is renderer_api.RendererEnvironment and field.name in renderer:
                value = renderer[field.name].default  # read through it, its default kept there
            if value is not None and value is not dataclasses.MISSING:
                code[var.name] = value / var.unit if isinstance(value, int | float) else value
    compared = []
    for name, stated in documented_defaults().items():
        if name not in code or stated.strip("`") in ("unset", "empty"):
            continue
        if re.fullmatch(r"[0-9.]+", stated):
            assert float(stated) == code[name], f"docs say {name} = {stated}, code {code[name]}"
            compared.append(name)
        elif re.fullmatch(r"`[^`]+`", stated) and isinstance(code[name], str):
            assert stated.strip("`") == code[name], f"docs: {name} = {stated}, code {code[name]}"
            compared.append(name)
    assert len(compared) >= 10, compared
