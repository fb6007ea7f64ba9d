"""Azurite stops at once and leaves nothing behind (it used to ignore SIGTERM and need a kill)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from azure.storage.queue import QueueServiceClient

from reportfarm import azurite

pytestmark = pytest.mark.azurite


@pytest.fixture
def temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize("client_open", [False, True], ids=["idle", "client-still-open"])
def test_stop_ends_azurite_without_a_kill(temp_folder: Path, client_open: bool) -> None:
    server = azurite.Azurite().start()
    pid = server.process.pid if server.process else 0
    client = QueueServiceClient.from_connection_string(server.connection_string)
    client.create_queue("stopping")
    if not client_open:
        client.close()
    server.stop()
    client.close()
    print(f"Azurite stopped in {server.stop_seconds:.2f} s")
    assert server.forced_kill is False
    assert server.process is not None and server.process.returncode is not None
    assert not Path(f"/proc/{pid}").exists() or _zombie_or_gone(pid)
    assert "Azurite Queue service successfully closed" in server.output
    assert list(temp_folder.iterdir()) == []


def test_restart_keeps_data_on_disk_without_a_kill(tmp_path: Path, temp_folder: Path) -> None:
    server = azurite.Azurite(location=tmp_path / "data").start()
    QueueServiceClient.from_connection_string(server.connection_string).create_queue("kept")
    server.restart()
    names = [
        q.name
        for q in QueueServiceClient.from_connection_string(server.connection_string).list_queues()
    ]
    server.stop()
    assert names == ["kept"]
    assert server.forced_kill is False
    assert list(temp_folder.iterdir()) == []


def test_a_failed_start_quotes_azurite(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = azurite.Azurite().start()
    try:
        clash = azurite.Azurite(ports=(busy.blob_port, busy.queue_port, busy.table_port))
        with pytest.raises(azurite.AzuriteError, match=r"exited at start: \S"):
            clash.start(timeout=30)
    finally:
        busy.stop()


def _zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] == "Z"
    except OSError:
        return True
