"""Which Chromium the farm runs: the headless shell first, and a shell-script wrapper's binary,
not the wrapper (the pool must signal and measure the browser itself)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from reportfarm_renderer import browser


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_wrapper_that_runs_its_binary_without_exec_is_unwrapped(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    binary = executable(tmp_path / "lib" / "chromium-headless-shell", "\x7fELF not really")
    wrapper = executable(tmp_path / "chromium-headless-shell", f'#!/bin/sh -e\n\n{binary} "$@"\n')
    assert browser.unwrapped(str(wrapper)) == str(binary)


@pytest.mark.parametrize(
    "script",
    [
        '#!/bin/sh\nexec /nonexistent/chromium-headless-shell "$@"\n',  # names no real file
        '#!/bin/sh\n{other} "$@"\n',  # runs a binary of another name
    ],
    ids=["missing", "other-name"],
)
def test_anything_else_is_left_as_it_is(tmp_path: Path, script: str) -> None:
    other = executable(tmp_path / "something-else", "\x7fELF")
    wrapper = executable(tmp_path / "chromium-headless-shell", script.format(other=other))
    assert browser.unwrapped(str(wrapper)) == str(wrapper)
    assert browser.unwrapped(str(other)) == str(other)
    assert browser.unwrapped(str(tmp_path / "absent")) == str(tmp_path / "absent")


def test_the_headless_shell_comes_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    full = executable(tmp_path / "chromium", "\x7fELF")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert browser.system_chromium() == str(full) == browser.full_chromium()
    shell = executable(tmp_path / "chromium-headless-shell", "\x7fELF")
    assert browser.system_chromium() == str(shell)
    assert browser.full_chromium() == str(full)


@pytest.mark.chromium
def test_on_this_machine_the_shell_resolves_to_a_binary_not_a_script() -> None:
    found = browser.system_chromium()
    if found is None or shutil.which("chromium-headless-shell") is None:
        pytest.skip("no headless shell installed here")
    with open(found, "rb") as file:
        assert not file.read(2).startswith(b"#!"), found
    assert os.access(found, os.X_OK)
