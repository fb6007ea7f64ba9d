"""scripts/bootstrap.sh on a stock-Debian-like machine: the system Python is externally managed
(PEP 668), so bootstrap must install into the project's .venv/ and never pip-install into it.

The "system" python3 here is a stand-in first on PATH: it records every call and refuses pip the
way Debian's does; anything else runs the real interpreter. The bootstrap runs for real in a copy
of the repository (Azurite from the shared tools/; the "renderer" extras to keep it short), and the
venv it makes then renders a PDF with Debian's Chromium.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.chromium]

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".venv", "tools", ".git", "out", "reports", ".reportfarm"}

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "{log}"
case " $* " in
  *" pip "*|*" ensurepip "*" --upgrade"*) echo "error: externally-managed-environment" >&2; exit 1;;
esac
exec "{real}" "$@"
"""
FAKE_PIP = """#!/bin/sh
echo "pip-executable $*" >> "{log}"
echo "error: externally-managed-environment" >&2
exit 1
"""


def copy_repo(target: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {name for name in names if name in SKIP or name.endswith("_cache")}
        return skipped | {name for name in names if name == "__pycache__"}

    shutil.copytree(ROOT, target, ignore=ignore, symlinks=True)
    (target / "tools").symlink_to((ROOT / "tools").resolve())


@pytest.fixture
def stock_debian(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    if not (ROOT / "tools/node_modules/.bin/azurite").exists():
        pytest.skip("Azurite is not installed in tools/ (run scripts/bootstrap.sh)")
    repo, fake_bin, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "python-calls.log"
    copy_repo(repo)
    fake_bin.mkdir()
    real = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    real = real if real.exists() else Path(sys.executable)
    for name, text in (("python3", FAKE_PYTHON), ("pip", FAKE_PIP), ("pip3", FAKE_PIP)):
        path = fake_bin / name
        path.write_text(text.format(log=log, real=real), encoding="utf-8")
        path.chmod(0o755)
    path_var = os.pathsep.join(
        [str(fake_bin)]
        + [p for p in os.environ["PATH"].split(os.pathsep) if "/.venv/" not in p + "/"]
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("VIRTUAL_ENV")}
    env.pop("PYTHONPATH", None)
    env.update(PATH=path_var, REPORTFARM_EXTRAS="renderer")
    return repo, log, env


def bootstrap(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )


def test_bootstrap_installs_into_the_venv_never_the_system_python(
    stock_debian: tuple[Path, Path, dict[str, str]],
) -> None:
    repo, log, env = stock_debian
    first = bootstrap(repo, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "bootstrap: ready" in first.stdout
    calls = log.read_text(encoding="utf-8").splitlines()
    assert any(call.startswith("-m venv .venv") for call in calls), calls
    assert not [call for call in calls if "pip" in call.split()], calls
    venv_python = repo / ".venv/bin/python"
    where = subprocess.run(
        [
            venv_python,
            "-c",
            "import sys, reportfarm; print(sys.prefix); print(reportfarm.__file__)",
        ],
        cwd=log.parent,  # not the repository: the import must come from the install
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where == [str(repo / ".venv"), str(repo / "reportfarm/__init__.py")]

    # Again: nothing to install, and still nothing asked of the system interpreter but the check.
    again = bootstrap(repo, env)
    assert again.returncode == 0 and "pip install" not in again.stdout, again.stdout
    assert not [call for call in log.read_text().splitlines() if "pip" in call.split()]

    # The venv finds Debian's Chromium: the first-hour command renders a PDF.
    rendered = subprocess.run(
        [repo / ".venv/bin/reportfarm", "init", "hello", "--dir", str(repo / "reports")],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert (repo / "reports/out/hello.pdf").read_bytes().startswith(b"%PDF")
