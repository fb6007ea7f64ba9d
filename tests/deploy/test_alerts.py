"""The alert rules: valid for Prometheus, and each one proven to fire when it should and only then.

``promtool test rules tests/deploy/alerts_test.yaml`` does the proving; this module runs it and
checks that the proof covers every alert (a firing case and a quiet case for each).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "reportfarm" / "rules" / "alerts.yaml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")


def promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        pytest.fail("promtool not found: scripts/bootstrap.sh installs Debian's prometheus")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_rules_are_valid() -> None:
    done = _run("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_alert_fires_when_it_should_and_not_otherwise() -> None:
    done = _run("test", "rules", str(UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases: dict[str, list[bool]] = {}
    for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], []).append(bool(case.get("exp_alerts")))
    for alert in _alerts():
        name = alert["alert"]
        assert True in cases.get(name, []), f"{name}: no case where it fires"
        assert False in cases.get(name, []), f"{name}: no case where it stays quiet"


@pytest.mark.parametrize("alert", _alerts(), ids=lambda rule: rule["alert"])
def test_alert_is_actionable(alert: dict[str, Any]) -> None:
    assert alert["labels"]["severity"] in ("warning", "critical")
    assert {"summary", "description", "runbook_url"} <= set(alert["annotations"])
