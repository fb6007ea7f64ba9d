"""End to end on a real node: the chart installs the operator from its image; a ReportPool starts
real renderer pods from the renderer image (templates ConfigMap, connection-string Secret); a
burst through Azurite grows browsers, then pods; a trickle while the operator scales down again;
every job stored once, none interrupted, none lost; the renderers' JSON stage lines in
``kubectl logs``; Prometheus (``prom``, scraping since before the burst) saw every pod."""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import prometheus
from tests.harness.polling import eventually
from tests.node import farm, images, release
from tests.node import node as node_harness
from tests.node.release import CONTAINER, NAMESPACE, POOL, QUEUE, RENDERERS, ROOT, TOKEN

pytestmark = pytest.mark.timeout(1800)  # the node's start, image imports and a burst


def _status(tools: farm.Tools) -> dict[str, Any]:
    found = tools.get("reportpools", "-n", NAMESPACE, POOL)
    return dict(found.get("status") or {})


def _note_stopping(tools: farm.Tools, stopping: dict[str, float]) -> None:
    """Record when each renderer pod being deleted got its SIGTERM (deletion start)."""
    for pod in tools.get("pods", "-n", NAMESPACE, "-l", RENDERERS)["items"]:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and meta["name"] not in stopping:
            deadline = datetime.datetime.fromisoformat(meta["deletionTimestamp"])
            grace = meta.get("deletionGracePeriodSeconds") or 0
            stopping[meta["name"]] = deadline.timestamp() - grace


def _deleted_by_replica_set(tools: farm.Tools) -> dict[str, float]:
    """Pods the ReplicaSet deleted (scale-down), from its Events: name -> the second after."""
    found = {}
    events = tools.get("events", "-n", NAMESPACE, "--field-selector", "reason=SuccessfulDelete")
    for event in events["items"]:
        name = event["message"].removeprefix("Deleted pod: ")
        stamp = event.get("lastTimestamp") or event.get("eventTime")
        if name.startswith(f"{POOL}-renderer") and stamp:
            # Second precision: count only jobs that ended a full second after it.
            found[name] = datetime.datetime.fromisoformat(stamp).timestamp() + 1.0
    return found


def test_the_operator_scales_real_renderer_pods_under_load(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    prom: prometheus.PrometheusServer,
    tmp_path: Path,
) -> None:
    tools, node, connection = cluster
    started = time.monotonic()
    tools.apply(release.report_pool(built_images["renderer"].ref))
    eventually("a renderer pod Ready", lambda: release.ready_pods(tools), timeout=240,
               detail=node.logs)  # fmt: skip
    data = json.loads((ROOT / "examples" / "data" / "achievement.json").read_text())

    # The burst: more work than one browser clears within the target wait.
    burst = asyncio.run(farm.submit(connection, QUEUE, CONTAINER, "achievement", [data] * 160))
    peak_pods, peak_browsers, samples = 0, 0, []
    stopping: dict[str, float] = {}  # pod -> when its deletion began (epoch seconds)
    burst_start = time.monotonic()

    def burst_done() -> bool:
        nonlocal peak_pods, peak_browsers
        status = _status(tools)
        pods = len(release.ready_pods(tools))
        peak_pods = max(peak_pods, pods)
        _note_stopping(tools, stopping)
        peak_browsers = max(peak_browsers, int(status.get("browsersPerPod") or 0))
        samples.append((round(time.monotonic() - burst_start), pods, status.get("browsersPerPod")))
        outcome = asyncio.run(farm.collect(connection, QUEUE, CONTAINER, burst, timeout=0))
        return outcome.missing == 0

    eventually("the burst to be rendered", burst_done, timeout=900, every=3.0, detail=node.logs)
    burst_seconds = time.monotonic() - burst_start

    # The trickle: jobs keep running while the operator removes the pods it no longer needs.
    trickle: list[str] = []
    trickle_start = time.monotonic()
    while len(release.ready_pods(tools)) > 1 or len(trickle) < 10:
        trickle += asyncio.run(farm.submit(connection, QUEUE, CONTAINER, "achievement", [data]))
        _note_stopping(tools, stopping)
        time.sleep(2)
        assert time.monotonic() - trickle_start < 600, "the operator never scaled down"
    trickle_seconds = time.monotonic() - trickle_start

    outcome = asyncio.run(farm.collect(connection, QUEUE, CONTAINER, burst + trickle, timeout=300))
    for name, at in _deleted_by_replica_set(tools).items():
        stopping.setdefault(name, at)
    # What Prometheus saw of it, through the chart's PodMonitor: every pod, at its peak.
    pods_seen = f'count(reportfarm_pool_size{{namespace="{NAMESPACE}",pool="{POOL}"}})'
    scraped = asyncio.run(prom.query(f"max_over_time({pods_seen}[1h:5s])"))
    figures = {
        "jobs": outcome.submitted,
        "succeeded": outcome.succeeded,
        "interrupted (redelivered)": outcome.redelivered,
        "failed": outcome.failed,
        "lost": outcome.missing,
        "peak ready pods": peak_pods,
        "peak browsers per pod": peak_browsers,
        "peak pods scraped by Prometheus": int(float(scraped[0]["value"][1])) if scraped else 0,
        "burst seconds": round(burst_seconds),
        "scale-down trickle seconds": round(trickle_seconds),
        "total seconds": round(time.monotonic() - started),
        "jobs per worker": outcome.per_worker,
        "pods removed": len(stopping),
        "jobs finished by a pod after its SIGTERM (drained)": sum(
            1 for worker, at in outcome.finished if worker in stopping and at >= stopping[worker]
        ),
        "samples (s, ready pods, browsers/pod)": samples,
    }
    print(json.dumps(figures, indent=2))
    (tmp_path / "figures.json").write_text(json.dumps(figures, indent=2))
    assert outcome.succeeded == outcome.submitted, figures
    assert outcome.redelivered == 0 and outcome.missing == 0 and outcome.failed == 0, figures
    assert peak_browsers == 2, figures  # browsers grew inside the running pods
    assert peak_pods >= 2, figures  # then pods were added
    assert len(outcome.per_worker) >= 2, figures  # and they rendered
    assert stopping, figures  # the operator removed pods while the trickle ran
    # Prometheus may also have seen a pod that was never Ready when this test looked.
    assert figures["peak pods scraped by Prometheus"] >= peak_pods, figures

    # The renderers' logs: JSON lines with the stage durations.
    pod = release.ready_pods(tools)[0]["metadata"]["name"]
    logs = tools.kubectl("logs", "-n", NAMESPACE, pod)
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert any("pdf_generation" in json.dumps(line) for line in lines), logs[-3000:]


def _in_flight(address: str) -> float:
    """``reportfarm_jobs_in_flight`` of the renderer at ``address`` (0 when it does not answer)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{address}:8080/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("reportfarm_jobs_in_flight"):
            return float(line.split()[-1])
    return 0.0


def test_a_renderer_pod_deleted_mid_job_drains_it(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
) -> None:
    """The kubelet's SIGTERM reaches the worker through tini; it finishes the running job within
    the grace period, stores it once, and only then exits."""
    tools, node, connection = cluster
    tools.apply(release.report_pool(built_images["renderer"].ref))
    eventually("a renderer pod Ready", lambda: release.ready_pods(tools), timeout=240,
               detail=node.logs)  # fmt: skip
    slow = [{"name": "drain", "busy_ms": 10000}]
    (job_id,) = asyncio.run(farm.submit(connection, QUEUE, CONTAINER, "slow", slow))

    def busy_pod() -> str | None:
        for pod in release.ready_pods(tools):
            if _in_flight(pod["status"]["podIP"]) >= 1:
                return str(pod["metadata"]["name"])
        return None

    name = eventually("the slow job to run in a pod", busy_pod, timeout=120, every=0.5)
    deleted_at = time.time()
    tools.kubectl("delete", "pod", "-n", NAMESPACE, name, "--wait=false")
    outcome = asyncio.run(farm.collect(connection, QUEUE, CONTAINER, [job_id], timeout=120))
    assert outcome.succeeded == 1 and outcome.redelivered == 0, outcome
    ((worker, finished_at),) = outcome.finished
    assert worker == name, outcome  # the deleted pod finished it: no other pod had to retry it
    assert finished_at > deleted_at, outcome  # after its SIGTERM: it drained


def test_a_synchronous_report_through_the_gateway_pod_returns_the_pdf(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    tmp_path: Path,
) -> None:
    tools, node, _ = cluster
    tools.apply(release.report_pool(built_images["renderer"].ref))
    eventually("a renderer pod Ready", lambda: release.ready_pods(tools), timeout=240,
               detail=node.logs)  # fmt: skip
    (gateway,) = tools.running_pods(NAMESPACE, "app.kubernetes.io/component=gateway")
    address = f"http://{gateway['status']['podIP']}:8000"
    data = json.loads((ROOT / "examples" / "data" / "outlook.json").read_text())
    body = json.dumps({"template": "outlook", "data": data, "wait_s": 90}).encode()
    request = urllib.request.Request(
        f"{address}/v1/reports",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=120) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/pdf")
        pdf = response.read()
    (tmp_path / "report.pdf").write_bytes(pdf)
    text = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(tmp_path / "report.pdf"), "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text), text[:500]
    logs = tools.kubectl("logs", "-n", NAMESPACE, gateway["metadata"]["name"])
    assert any(line.startswith("{") for line in logs.splitlines()), logs[-2000:]
