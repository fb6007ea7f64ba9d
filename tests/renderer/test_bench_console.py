"""The console every benchmark main prints on: stderr under ``--json``, a fixed width off a
terminal, and the farm's loggers quiet."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from reportfarm_bench import reporting

LOGGERS = ("reportfarm", "reportfarm_renderer")


@pytest.fixture(autouse=True)
def _levels_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # not a terminal, whatever runs the tests
    before = {name: logging.getLogger(name).level for name in LOGGERS}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize(("as_json", "width"), [(True, 120), (False, 140)])
def test_the_console_goes_to_stderr_under_json_at_its_width(as_json: bool, width: int) -> None:
    console = reporting.bench_console(as_json, width=width)
    assert console.stderr is as_json
    assert not console.is_terminal and console.width == width


def test_the_default_width_is_120_and_the_farm_loggers_are_quieted() -> None:
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    assert reporting.bench_console(False).width == 120
    assert [logging.getLogger(name).level for name in LOGGERS] == [logging.WARNING] * 2
