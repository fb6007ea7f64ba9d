"""The renderer's contract (reportfarm.renderer_api) and the storage sign-in choice, as pure logic:
what the operator writes is what the renderer reads back."""

from __future__ import annotations

import pytest
from reportfarm_renderer.settings import RendererSettings

from reportfarm import renderer_api
from reportfarm import settings as common
from reportfarm.storage import accounts


def test_what_the_operator_writes_the_renderer_reads_back() -> None:
    written = renderer_api.RendererEnvironment(
        account_url="https://acct.queue.core.windows.net",
        queue="jobs",
        container="pdfs",
        pool_size=3,
        templates="/etc/reportfarm/templates",
        visibility_timeout=90,
        drain_timeout=40,
        port=9090,
        log_format="json",
        worker_id="renderer-7",
        admin_token="s3cret",
        hint_key="k" * 32,
    )
    env = dict(written.variables())
    assert all(isinstance(value, str) for value in env.values())
    assert renderer_api.RendererEnvironment.parse(env) == written
    settings = RendererSettings.from_env(env)
    assert (settings.pool_size, settings.port, settings.visibility_timeout) == (3, 9090, 90)
    assert (settings.drain_timeout, settings.worker_id, settings.admin_token) == (
        40.0,
        "renderer-7",
        "s3cret",
    )
    assert settings.storage.account_url == "https://acct.queue.core.windows.net"
    assert (settings.storage.queue, settings.storage.container) == ("jobs", "pdfs")
    assert settings.storage.hint_key == "k" * 32


def test_unset_variables_keep_the_renderers_defaults() -> None:
    assert renderer_api.RendererEnvironment.parse({}) == renderer_api.RendererEnvironment()
    settings = RendererSettings.from_env({})
    assert settings.port == renderer_api.PORT and settings.visibility_timeout == 60


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        pytest.param(renderer_api.Var.POOL_SIZE, "many", "not a whole number", id="pool words"),
        pytest.param(renderer_api.Var.VISIBILITY_TIMEOUT, "1", "below 2", id="visibility"),
        pytest.param(renderer_api.Var.DRAIN_TIMEOUT, "soon", "not a number", id="drain"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str, says: str) -> None:
    with pytest.raises(common.SettingsError, match=f"{name}.*{says}"):
        renderer_api.RendererEnvironment.parse({name: value})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(renderer_api.pool_body(4), 4, id="what the operator sends"),
        pytest.param({"size": 0}, 0, id="zero"),
        pytest.param({"size": renderer_api.MAX_POOL_SIZE}, renderer_api.MAX_POOL_SIZE, id="max"),
        pytest.param({"size": renderer_api.MAX_POOL_SIZE + 1}, "from 0 to", id="too many"),
        pytest.param({"size": True}, "whole number", id="bool"),
        pytest.param({"size": "2"}, "whole number", id="text"),
        pytest.param({"count": 2}, "body must be", id="no size"),
        pytest.param([2], "body must be", id="not an object"),
    ],
)
def test_pool_body(body: object, expected: int | str) -> None:
    if isinstance(expected, int):
        assert renderer_api.parse_pool_body(body) == expected
    else:
        with pytest.raises(ValueError, match=expected):
            renderer_api.parse_pool_body(body)


def test_the_connection_string_wins_over_the_account_url() -> None:
    storage = common.StorageSettings.from_env(
        {
            common.CONNECTION_STRING_VAR: "UseDevelopmentStorage=true",
            common.ACCOUNT_URL_VAR: "https://acct.queue.core.windows.net",
        }
    )
    account = accounts.from_settings(storage)
    assert account.connection_string == "UseDevelopmentStorage=true"
    assert account.credential is None and account.signed_in_with == "connection string"


def test_neither_setting_is_a_clear_error() -> None:
    storage = common.StorageSettings.from_env({})
    assert not storage.configured
    with pytest.raises(common.SettingsError, match="AZURE_STORAGE_CONNECTION_STRING, or"):
        accounts.from_settings(storage)


@pytest.mark.parametrize(
    ("queue_url", "blob_url"),
    [
        pytest.param(
            "https://acct.queue.core.windows.net",
            "https://acct.blob.core.windows.net",
            id="public cloud",
        ),
        pytest.param(
            "https://acct.queue.core.chinacloudapi.cn/",
            "https://acct.blob.core.chinacloudapi.cn/",
            id="sovereign cloud",
        ),
        pytest.param(
            "https://acct.queue.example:8443", "https://acct.blob.example:8443", id="port"
        ),
    ],
)
def test_the_blob_endpoint_follows_azures_host_naming(queue_url: str, blob_url: str) -> None:
    assert accounts.blob_url_for(queue_url) == blob_url


def test_an_endpoint_without_the_naming_needs_the_blob_url() -> None:
    with pytest.raises(common.SettingsError, match=common.BLOB_URL_VAR):
        accounts.blob_url_for("https://127.0.0.1:10001/devstoreaccount1")


def test_the_gateway_says_which_setting_is_missing_instead_of_a_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from reportfarm_gateway import app

    monkeypatch.delenv(common.CONNECTION_STRING_VAR, raising=False)
    monkeypatch.setenv(common.ACCOUNT_URL_VAR, "https://127.0.0.1:9/devstoreaccount1")
    monkeypatch.setenv("REPORTFARM_TOKENS", "acme=t0ken")
    monkeypatch.setenv("REPORTFARM_GATEWAY_PORT", "0")
    assert app.main(port=0) == 2
    assert common.BLOB_URL_VAR in caplog.text
