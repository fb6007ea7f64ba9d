"""The renderer's readiness with warm-ups (pure: the parts as plain objects): a warm-up that is
not done is a problem until the bound, one that failed for good stays one, each said once."""

from __future__ import annotations

import logging
import types
from typing import Any

import pytest
from reportfarm_renderer import http
from reportfarm_renderer.metrics import RendererMetrics


def _parts(*warming: Any) -> http.Parts:
    parts = http.Parts(metrics=RendererMetrics())
    parts.pool = types.SimpleNamespace(size=1, live=1)  # type: ignore[assignment]
    parts.worker = types.SimpleNamespace(queue_ready=True, last_error=None)  # type: ignore[assignment]
    parts.warming.extend(warming)
    return parts


def test_a_warm_up_is_waited_for_within_the_bound_and_one_that_failed_for_good_always(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state: dict[str, tuple[str, bool] | None] = {
        "slow": ("EN 16931's rules compiling", False),
        "broken": ("no finishing process can sign: its key", True),
    }
    parts = _parts(lambda: state["slow"], lambda: state["broken"])
    assert http.readiness_problems(parts) == [
        "EN 16931's rules compiling",
        "no finishing process can sign: its key",
    ]
    state["broken"] = None
    assert http.readiness_problems(parts) == ["EN 16931's rules compiling"]
    state["slow"] = None
    assert http.readiness_problems(parts) == []
    # Past the bound a slow warm-up no longer keeps the pod out (said once); a lasting one does.
    state["slow"], state["broken"] = ("EN 16931's rules compiling", False), ("broken", True)
    parts.started -= http.WARMING_BOUND_S + 1
    with caplog.at_level(logging.WARNING):
        assert http.readiness_problems(parts) == ["broken"]
        assert http.readiness_problems(parts) == ["broken"]
    said = [r.getMessage() for r in caplog.records if "ready without it" in r.getMessage()]
    assert said == ["ready without it after 120 s: EN 16931's rules compiling"]


def test_without_warm_ups_readiness_is_the_browsers_and_the_queue() -> None:
    parts = _parts()
    assert http.readiness_problems(parts) == []
    parts.worker = types.SimpleNamespace(queue_ready=False, last_error=None)  # type: ignore[assignment]
    assert http.readiness_problems(parts) == ["queue not reachable: no receive yet"]
