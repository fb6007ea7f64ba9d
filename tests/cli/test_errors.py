"""One line, no traceback: what is wrong and what to do, for the newcomer's likeliest mistakes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

from reportfarm import azurite, connecting, submitting

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join(str(ROOT / part) for part in ("", "renderer", "operator", "gateway"))


def cli(
    *args: str, cwd: Path, connection: str | None, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "COLUMNS": "80", **extra_env}
    env.pop("AZURE_STORAGE_CONNECTION_STRING", None)
    if connection is not None:
        env["AZURE_STORAGE_CONNECTION_STRING"] = connection
    return subprocess.run(
        [sys.executable, "-m", "reportfarm.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0]
    return lines[0]


def stale_connection() -> str:
    """The connection string of a farm that has stopped: nothing listens on its ports."""
    return azurite.connection_string(azurite.free_port(), azurite.free_port())


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.json"
    path.write_text('{"name": "Ann"}', encoding="utf-8")
    return path


COMMANDS = {
    "status": ("status",),
    "submit": ("submit", "--template", "achievement", "--data", "job.json"),
    "batch": ("submit", "--batch", "--template", "achievement", "--data", "job.json"),
}


@pytest.mark.parametrize(
    ("command", "connection", "words"),
    [
        pytest.param("status", "garbage", ("malformed", "Key=Value"), id="not-key-value"),
        pytest.param("submit", "garbage", ("malformed", "Key=Value"), id="submit-not-key-value"),
        pytest.param("batch", "garbage", ("malformed", "Key=Value"), id="batch-not-key-value"),
        pytest.param("status", "AccountName=x;AccountKey=abc", ("base64",), id="bad-key"),
        pytest.param("status", "AccountName=x;AccountKey=äöü=", ("base64",), id="non-ascii-key"),
        pytest.param("status", "AccountName=devstoreaccount1", ("AccountKey",), id="no-key"),
        pytest.param(
            "status",
            "AccountName=a;AccountKey=YWJj;QueueEndpoint=ftp://x/a",
            ("http(s) URL",),
            id="bad-url",
        ),
        pytest.param("submit", None, ("not set", "reportfarm up --serve"), id="unset"),
    ],
)
def test_a_malformed_connection_string_is_one_line(
    command: str, connection: str | None, words: tuple[str, ...], job_file: Path
) -> None:
    result = cli(*COMMANDS[command], cwd=job_file.parent, connection=connection)
    assert_one_line(result, "AZURE_STORAGE_CONNECTION_STRING", *words)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_stopped_farm_is_one_line(command: str, job_file: Path) -> None:
    result = cli(*COMMANDS[command], cwd=job_file.parent, connection=stale_connection())
    assert_one_line(result, "nothing listens at 127.0.0.1:", "has stopped", "reportfarm up --serve")


def test_a_stale_env_file_is_named(job_file: Path) -> None:
    folder = job_file.parent / ".reportfarm"
    folder.mkdir()
    (folder / "env").write_text(
        f"export AZURE_STORAGE_CONNECTION_STRING='{stale_connection()}'\n", encoding="utf-8"
    )
    result = cli("status", cwd=job_file.parent, connection=None)
    assert_one_line(result, "from .reportfarm/env", "has stopped")


def test_bad_json_names_its_line_in_the_file(tmp_path: Path) -> None:
    """Line 1 holds U+2028 inside a string (valid JSON; str.splitlines() splits there)."""
    path = tmp_path / "jobs.jsonl"
    path.write_text(
        '{"name": "A\u2028B"}\n\n{"name": "C"}\n{"name": "D",}\n{"name": "E"}\n', encoding="utf-8"
    )
    with pytest.raises(submitting.InputError) as raised:
        submitting.read_submissions(path, template="t")
    assert f"{path}, line 4, column 14: not JSON" in str(raised.value)


def test_bad_json_in_a_json_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text('{\n  "name": "A",\n  "age": ,\n}\n', encoding="utf-8")
    with pytest.raises(submitting.InputError, match=r"line 3, column 10: not JSON"):
        submitting.read_submissions(path, template="t")


def test_a_bad_line_stops_the_submit_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"name": "A"}\n[1, 2]\n', encoding="utf-8")
    result = cli("submit", "--template", "t", "--data", path.name, cwd=tmp_path, connection=None)
    line = assert_one_line(result, "line 2", "a job is a JSON object, not a list")
    assert line.startswith("error:")


@pytest.mark.parametrize(
    ("error", "words"),
    [
        pytest.param(
            ExceptionGroup(
                "g", [ServiceRequestError("Cannot connect to host a.example:443\nmore")]
            ),
            ("cannot reach the storage account", "a.example:443"),
            id="unreachable-in-a-group",
        ),
        pytest.param(RuntimeError("wrapped"), None, id="a-bug-is-not-explained"),
        pytest.param(
            ClientAuthenticationError("Server failed to authenticate the request"),
            ("refused the key",),
            id="wrong-key",
        ),
    ],
)
def test_storage_failures_are_explained_in_one_line(
    error: BaseException, words: tuple[str, ...] | None
) -> None:
    line = connecting.explain(error)
    if words is None:
        assert line is None
        return
    assert line is not None and "\n" not in line
    for word in words:
        assert word in line


@pytest.mark.parametrize(
    ("args", "variable", "words"),
    [
        pytest.param(
            ("up", "--out", "out"), "REPORTFARM_AZURITE", ("cannot run Azurite",), id="up"
        ),
        pytest.param(
            ("init", "x"), "REPORTFARM_CHROMIUM_PATH", ("Chromium failed", "bootstrap"), id="init"
        ),
    ],
)
def test_a_missing_tool_is_one_line(
    tmp_path: Path, args: tuple[str, ...], variable: str, words: tuple[str, ...]
) -> None:
    result = cli(*args, cwd=tmp_path, connection=None, **{variable: str(tmp_path / "missing")})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ")
    for word in words:
        assert word in last
