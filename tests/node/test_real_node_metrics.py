"""The real node seen from outside: Prometheus scrapes the renderer pods and the operator through
the chart's PodMonitor and ServiceMonitor (``prom``: translated to scrape configs, with discovery
of the test plane's pods and EndpointSlices), and every dashboard query and alert expression
returns data; the pods' network ends at the test's bridge."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from reportfarm import finishing
from tests.deploy import prometheus
from tests.harness.polling import eventually
from tests.node import farm, images, monitoring, release
from tests.node import node as node_harness
from tests.node.release import CONTAINER, NAMESPACE, POOL, QUEUE, ROOT

pytestmark = pytest.mark.timeout(1800)  # the node's start, when this file runs alone


def test_the_pods_network_ends_at_the_bridge(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
) -> None:
    """A renderer pod's namespace has the bridge's subnet and no other route, and nothing that
    arrives on the bridge is forwarded (route lookups only: no packet is sent)."""
    tools, node, _ = cluster
    tools.apply(release.report_pool(built_images["renderer"].ref))
    pod = eventually("a renderer pod Ready", lambda: release.ready_pods(tools), timeout=240,
                     detail=node.logs)[0]  # fmt: skip
    pid = min(farm.pod_processes(pod["metadata"]["uid"]))

    def in_pod(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["nsenter", "-t", str(pid), "-n", "ip", "-4", *args]
        return subprocess.run(command, capture_output=True, text=True)

    routes = in_pod("route", "show", "table", "all").stdout.splitlines()
    outside = [r for r in routes if not r.startswith(("local ", "broadcast ", "127."))]
    assert outside and all(r.startswith(str(node_harness.NETWORK)) for r in outside), routes
    assert "unreachable" in in_pod("route", "get", "198.51.100.1").stderr.lower()
    assert node_harness.FORWARDING.read_text().strip() == "0"


MAY_BE_EMPTY = {
    "reportfarm_browser_recycles_total": "a browser is recycled after 100 jobs or above 700 MiB "
    "(REPORTFARM_RECYCLE_*): no browser gets there here, and a ReportPool does not lower them",
    "reportfarm_operator_queue_read_errors_total": "needs a queue outage while the operator runs "
    "(tests/kube's fault tests cause one)",
    "reportfarm_operator_pool_resize_errors_total": "needs a renderer that refuses PUT /pool "
    "(tests/kube's fault tests cause one)",
    "reportfarm_lease_age_seconds_bucket": "a lease is extended only while a job runs longer than "
    "a third of the visibility timeout (20 s with the pool's 60 s): these jobs take ~1 s "
    "(tests/deploy/test_prometheus.py runs one that is extended)",
    "reportfarm_hints_total": "the hints come from the gateway's synchronous path, which this "
    "test does not run (tests/deploy/test_prometheus.py sends a wake; tests/gateway's hint tests "
    "count both kinds)",
}
"""Series that exist only after a fault this test does not cause: metric -> why."""


def test_prometheus_scrapes_the_real_pods_and_every_dashboard_query_has_data(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    prom: prometheus.PrometheusServer,
) -> None:
    """Jobs of every example template, one for an unknown template (poison) and a browser killed
    in a pod (restart) while Prometheus scrapes; then each query must return a finite sample.
    One pod: a pod removed by a scale-down takes its counters (poison, restarts) with it."""
    tools, node, connection = cluster
    tools.apply(release.report_pool(built_images["renderer"].ref, replicas={"min": 1, "max": 1}))

    def one_pod() -> list[dict[str, Any]] | None:
        pods = release.ready_pods(tools)
        return pods if len(pods) == 1 else None

    (pod,) = eventually("one renderer pod Ready", one_pod, timeout=240, detail=node.logs)
    renderers = f'up{{namespace="{NAMESPACE}",pool="{POOL}",endpoint="http"}} == 1'
    asyncio.run(prom.wait_for(renderers, timeout=120))
    asyncio.run(prom.wait_for('up{job=~"serviceMonitor/.*",endpoint="metrics"} == 1', timeout=120))
    farm.kill_a_browser(pod["metadata"]["uid"])
    jobs = []
    for template in ("achievement", "outlook"):
        data = json.loads((ROOT / "examples" / "data" / f"{template}.json").read_text())
        jobs += asyncio.run(farm.submit(connection, QUEUE, CONTAINER, template, [data] * 10))
    jobs += asyncio.run(farm.submit(connection, QUEUE, CONTAINER, "no-such-template", [{}]))
    titled = finishing.Finish(metadata=finishing.Metadata(title="Outlook"))  # a finishing stage
    jobs += asyncio.run(farm.submit(connection, QUEUE, CONTAINER, "outlook", [data], finish=titled))
    outcome = asyncio.run(farm.collect(connection, QUEUE, CONTAINER, jobs, timeout=300))
    assert outcome.missing == 0 and outcome.failed == 1, outcome  # the poison job only
    asyncio.run(prom.wait_for("sum(reportfarm_browser_restarts_total) > 0", timeout=60))

    queries = monitoring.panel_queries()
    queries += [(f"alert {name}", expr) for name, expr in prometheus.alert_queries().items()]
    empty, exempt = [], []
    for label, expr in queries:
        may_be_empty = any(metric in expr for metric in MAY_BE_EMPTY)
        if not asyncio.run(_has_data(prom, expr, tries=1 if may_be_empty else 15)):
            (exempt if may_be_empty else empty).append(f"{label}: {expr}")
    print(f"{len(queries)} queries, {len(queries) - len(empty) - len(exempt)} with data; empty:")
    print("\n".join(empty + exempt) or "none")
    assert not empty, "queries without data:\n" + "\n".join(empty)


async def _has_data(prom: prometheus.PrometheusServer, expr: str, *, tries: int) -> bool:
    """A finite sample within ``tries`` scrapes (a ratio of gauges is NaN while its denominator
    is 0, e.g. the killed browser's pool being refilled)."""
    for attempt in range(tries):
        if prometheus.has_finite_sample(await prom.query(expr)):
            return True
        if attempt + 1 < tries:
            await asyncio.sleep(2.0)
    return False
