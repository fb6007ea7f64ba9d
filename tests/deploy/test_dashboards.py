"""The Grafana dashboards: well-formed, and every series they or the alerts name is exported.

A renamed metric would leave a panel silently empty: every ``reportfarm_*`` name in a dashboard
query or an alert must be a series of the renderer's or the operator's metrics registry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from reportfarm_operator.metrics import OperatorMetrics
from reportfarm_renderer.metrics import RendererMetrics

from tests.deploy import prometheus

DASHBOARDS = sorted((prometheus.CHART / "dashboards").glob("*.json"))
_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}
_NAME = re.compile(r"\breportfarm_[a-z0-9_]+\b")


def _series_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name a registry exports, labelled metrics without children included."""
    names = set()
    for family in registry.collect():
        for suffix in _SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def exported() -> set[str]:
    return _series_names(RendererMetrics().registry) | _series_names(OperatorMetrics().registry)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_is_well_formed(path: Path) -> None:
    board = json.loads(path.read_text())
    assert board["uid"].startswith("reportfarm-")
    panels = board["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace", "pool"} <= variables
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["description"], panel["id"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]


def _queries() -> list[tuple[str, str]]:
    found = [
        (f"{name}: {expr}", expr)
        for name, exprs in prometheus.dashboard_queries().items()
        for expr in exprs
    ]
    return found + [(f"alert {n}", e) for n, e in prometheus.alert_queries().items()]


@pytest.mark.parametrize(("label", "expr"), _queries(), ids=[q[0][:60] for q in _queries()])
def test_query_names_exported_series(label: str, expr: str) -> None:
    unknown = set(_NAME.findall(expr)) - exported()
    assert not unknown, f"{label}: not exported by the renderer or the operator: {unknown}"


_NOT_ON_DASHBOARDS: dict[str, str] = {
    # name -> why no panel shows it
    "reportfarm_blocked_requests_total": "the network guard: needs a document that fetches a "
    "blocked address; a security signal, not a capacity one",
    "reportfarm_storage_errors_total": "shows as retried jobs and as the readiness of pods",
    "reportfarm_draining": "a pod drains for seconds during scale-down",
}


def test_every_renderer_metric_is_on_the_farm_dashboard() -> None:
    text = (prometheus.CHART / "dashboards" / "farm.json").read_text()
    missing = {
        name
        for name in _series_names(RendererMetrics().registry)
        if not name.endswith(("_sum", "_count", "_created"))
        and name not in text
        and name not in _NOT_ON_DASHBOARDS
    }
    assert not missing, f"renderer metrics on no panel: {sorted(missing)}"
