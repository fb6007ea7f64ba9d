"""A real Prometheus (Debian's package) for tests, and the queries the chart ships.

- :class:`PrometheusServer`: ``prometheus`` on loopback, scraping static targets every second, its
  TSDB in a temporary folder; :meth:`PrometheusServer.query` asks its HTTP API (asynchronously, so
  a renderer running in the same event loop keeps answering scrapes).
- :func:`dashboard_queries`: every ``expr`` of the Grafana dashboards, variables substituted.
- :func:`alert_queries`: every alert's expression with its thresholds turned into ``bool``
  comparisons, so it returns the underlying series whatever their values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from reportfarm import azurite

CHART = Path(__file__).resolve().parents[2] / "charts" / "reportfarm"
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1m",
    "${namespace}": ".*",
    "$namespace": ".*",
    "${pool}": ".*",
    "$pool": ".*",
}


class PrometheusServer:
    """``with PrometheusServer({"renderer": ["127.0.0.1:8080"]}, labels=...) as prom: ...``

    ``scrape_configs`` adds configs as written (service discovery, relabelings)."""

    def __init__(
        self,
        targets: Mapping[str, list[str]],
        *,
        labels: Mapping[str, str] | None = None,
        scrape_configs: list[dict[str, Any]] | None = None,
    ) -> None:
        self.targets = targets
        self.labels = dict(labels or {})
        self.scrape_configs = list(scrape_configs or [])
        self.port = azurite.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = Path(tempfile.mkdtemp(prefix="reportfarm-prometheus-"))
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus not found: scripts/bootstrap.sh installs it")
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "scrape_configs": [
                {
                    "job_name": job,
                    "static_configs": [{"targets": list(targets), "labels": self.labels}],
                }
                for job, targets in self.targets.items()
            ]
            + self.scrape_configs,
        }
        (self._dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        log = (self._dir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={self._dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self._dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self._wait_ready(timeout=60.0)
        return self

    def _wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited at start:\n{self.log()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready within {timeout} s:\n{self.log()}")

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def log(self) -> str:
        path = self._dir / "prometheus.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query at now; raises on a PromQL error (a bad expression is a test failure)."""
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{self.url}/api/v1/query", params={"query": expr}) as response,
        ):
            body = await response.json()
        if body.get("status") != "success":
            raise AssertionError(f"{expr}\n  -> {body.get('errorType')}: {body.get('error')}")
        result = body["data"]["result"]
        return result if isinstance(result, list) else [{"value": result}]

    async def wait_for(self, expr: str, *, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Poll until ``expr`` returns at least one finite sample."""
        deadline = time.monotonic() + timeout
        while True:
            result = await self.query(expr)
            if has_finite_sample(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"no data for {expr} within {timeout} s: {result}")
            await asyncio.sleep(0.5)


def has_finite_sample(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(series["value"][1])) for series in result)


def _exprs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _exprs(item)


def substitute(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    if "$" in expr:
        raise AssertionError(f"unknown Grafana variable in {expr!r}")
    return expr


def dashboard_queries() -> dict[str, list[str]]:
    """Dashboard file name -> its expressions, Grafana variables substituted."""
    return {
        path.name: [substitute(e) for e in _exprs(json.loads(path.read_text()))]
        for path in sorted((CHART / "dashboards").glob("*.json"))
    }


# A comparison operator outside {label matchers}, [ranges] and "strings", not followed by `bool`.
_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|\{[^}]*\}|\[[^\]]*\]|(==|!=|>=|<=|>|<)(?!\s*bool\b)')


def without_thresholds(expr: str) -> str:
    """``x > 30`` -> ``x > bool 30``: the comparison no longer filters, the series remain."""
    return _TOKENS.sub(lambda m: f"{m.group(1)} bool" if m.group(1) else m.group(0), expr)


def alert_queries() -> dict[str, str]:
    """Alert name -> its expression without thresholds."""
    groups = yaml.safe_load((CHART / "rules" / "alerts.yaml").read_text())["groups"]
    return {
        rule["alert"]: without_thresholds(rule["expr"])
        for group in groups
        for rule in group["rules"]
        if "alert" in rule
    }
