"""`reportfarm up`: PDFs named for people, an index, a quick stop that needs no kill; `--serve`
prints its connection string on one line and keeps it in .reportfarm/env while it runs
(real Azurite, real Chromium)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from reportfarm_renderer import local

from reportfarm import azurite, connecting

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join(str(ROOT / part) for part in ("", "renderer", "operator", "gateway"))


def example(name: str | None, number: int) -> dict[str, object]:
    data = json.loads((ROOT / "examples/data/achievement.json").read_text(encoding="utf-8"))
    if name is not None:
        data["owner"] = name  # a field the template ignores, for the file name only
    return {"template": "achievement", "data": data, "job_id": f"job-{number}"}


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    path = tmp_path / "jobs.jsonl"
    lines = [example("林雨桐", 1), example("Ann/Lee", 2), example(None, 3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_up_names_the_pdfs_writes_an_index_and_stops_azurite_cleanly(
    jobs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[azurite.Azurite] = []

    class Recorded(azurite.Azurite):
        def start(self, *, timeout: float = 30.0) -> azurite.Azurite:
            started.append(self)
            return super().start(timeout=timeout)

    monkeypatch.setattr(azurite, "Azurite", Recorded)
    status = local.main(
        out=Path("out"),
        templates=None,
        data=jobs,
        serve=False,
        name="{template}-{data.owner}",
    )
    err = capsys.readouterr().err
    assert status == 0, err
    assert sorted(path.name for path in Path("out").iterdir()) == [
        "achievement-Ann-Lee.pdf",
        "achievement-job-3.pdf",
        "achievement-林雨桐.pdf",
        "index.csv",
    ]
    with open("out/index.csv", encoding="utf-8") as handle:
        index = {row["job_id"]: row["file"] for row in csv.DictReader(handle)}
    assert index["job-1"] == "achievement-林雨桐.pdf"
    assert "achievement-林雨桐.pdf" in err  # the printed table
    # The stop: announced, Azurite ended by its own SIGTERM handling, never killed.
    assert "stopping" in err and "stopped in" in err
    (server,) = started
    assert server.process is not None and server.process.returncode is not None
    assert server.forced_kill is False
    print(f"Azurite stopped in {server.stop_seconds:.2f} s; {err.splitlines()[-1]}")


def test_up_serve_prints_one_line_and_keeps_the_env_file_while_it_runs(jobs: Path) -> None:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "COLUMNS": "60"}
    farm = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reportfarm.cli",
            "up",
            "--serve",
            "--out",
            "out",
            "--data",
            str(jobs),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert farm.stdout is not None
        line = farm.stdout.readline().rstrip("\n")  # the farm's only stdout line
        assert len(line) > 60 and line.startswith("DefaultEndpointsProtocol=http;")
        connecting.check(line)
        values = connecting.read_env_file(jobs.parent / ".reportfarm/env")
        assert values[connecting.ENV_VAR] == line
        renderer = values[connecting.RENDERERS_VAR]
        # Another shell in this folder: nothing exported, the file is found.
        watch_env = {key: value for key, value in env.items() if key != connecting.ENV_VAR}
        watched = subprocess.run(
            [
                sys.executable,
                "-m",
                "reportfarm.cli",
                "status",
                "--watch",
                "--frames",
                "2",
                "--interval",
                "0.5",
            ],
            env={**watch_env, "COLUMNS": "120"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert watched.returncode == 0, watched.stderr
        assert renderer in watched.stdout and "unreachable" not in watched.stdout
        assert "interactive" in watched.stdout and "throughput 0.00 PDF/s" in watched.stdout
    finally:
        farm.send_signal(signal.SIGTERM)
        _, err = farm.communicate(timeout=120)
    assert farm.returncode == 0, err
    assert "stopping" in err and "stopped in" in err and "Traceback" not in err
    assert not (jobs.parent / ".reportfarm/env").exists()
