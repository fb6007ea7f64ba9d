"""The SDK's HTTP sessions read proxy variables and ``.netrc`` only when there is one: a proxy
set in the environment is still used, and without one no request pays for looking."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from reportfarm import azurite
from reportfarm.storage import accounts


def test_nothing_to_read_turns_it_off(tmp_path: Path) -> None:
    assert accounts.reads_environment({"PATH": "/bin", "HOME": str(tmp_path)}, tmp_path) is False
    assert accounts.reads_environment({"HTTPS_PROXY": ""}, tmp_path) is False  # set, but empty


@pytest.mark.parametrize(
    "name", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY", "ftp_proxy"]
)
def test_any_proxy_variable_turns_it_on(name: str, tmp_path: Path) -> None:
    assert accounts.reads_environment({name: "http://proxy.example:3128"}, tmp_path) is True


def test_a_netrc_turns_it_on(tmp_path: Path) -> None:
    (tmp_path / ".netrc").write_text("machine example.com login a password b\n")
    assert accounts.reads_environment({}, tmp_path) is True
    elsewhere = tmp_path / "netrc"
    assert accounts.reads_environment({"NETRC": str(elsewhere)}, tmp_path) is False
    elsewhere.write_text("default login a password b\n")
    assert accounts.reads_environment({"NETRC": str(elsewhere)}, tmp_path) is True


@pytest.mark.azurite
@pytest.mark.parametrize("proxied", [True, False], ids=["proxy set", "no proxy"])
def test_a_proxy_in_the_environment_is_used_and_none_is_not(
    proxied: bool,
    azurite_server: azurite.Azurite,
    storage_names: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readline())  # the request line, then hang up
        writer.close()

    async def run() -> None:
        server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        if proxied:
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        account = accounts.Account(connection_string=azurite_server.connection_string)
        async with server, account.queue_client(storage_names[0]) as client:
            if proxied:
                with pytest.raises(Exception):  # noqa: B017 - the stub proxy hangs up
                    await client.create_queue()
            else:
                await client.create_queue()

    asyncio.run(run())
    if proxied:
        assert seen and storage_names[0].encode() in seen[0], seen
    else:
        assert seen == []
