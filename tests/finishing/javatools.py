"""The Java validators the finishing tests run (veraPDF, Mustang): where their launchers are.

Each is installed by its ``scripts/<name>/install.sh`` (through ``scripts/maven-jar.sh``), which
``scripts/test.sh`` runs and which says where the launcher is; the tests use the launcher an
environment variable names (test.sh sets it), else the one cached for the script's version.
A module running one holds a :class:`Tool` and marks the tests that need it with
:meth:`Tool.needed`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pinned_version(name: str) -> str:
    """The version ``scripts/<name>/install.sh`` installs by default."""
    script = ROOT / "scripts" / name / "install.sh"
    match = re.search(r'VERSION="\$\{[A-Z_]+_VERSION:-([^}]+)\}"', script.read_text("utf-8"))
    assert match, f"{script} names no default version"
    return match[1]


def launcher(name: str, env_var: str) -> Path | None:
    """The tool's launcher, if it is installed (and Java is there to run it)."""
    if os.environ.get(env_var):
        given = Path(os.environ[env_var])
        return given if given.is_file() and os.access(given, os.X_OK) else None
    cache = Path(os.environ.get("REPORTFARM_CACHE") or Path.home() / ".cache" / "reportfarm")
    cached = cache / name / pinned_version(name) / name
    if cached.is_file() and os.access(cached, os.X_OK) and shutil.which("java"):
        return cached
    return None


def missing(name: str, env_var: str) -> str:
    """Why a test that needs the tool skips."""
    return (
        f"{name} is not installed: run scripts/{name}/install.sh (scripts/test.sh does), "
        f"or set {env_var} to its launcher"
    )


@dataclasses.dataclass(frozen=True)
class Tool:
    """One of the validators: its install script's (and launcher's) name, the environment
    variable naming its launcher, and what the messages call it."""

    name: str
    env_var: str
    title: str

    def launcher(self) -> Path | None:
        """The launcher, if installed (see :func:`launcher`)."""
        return launcher(self.name, self.env_var)

    def needed(self) -> pytest.MarkDecorator:
        """The mark of a test that needs the tool: it skips, saying why, when it is missing."""
        return pytest.mark.skipif(self.launcher() is None, reason=missing(self.name, self.env_var))

    def require(self) -> Path:
        """The launcher, for a test its mark let run."""
        found = self.launcher()
        assert found is not None, f"{self.title} is not installed"
        return found
