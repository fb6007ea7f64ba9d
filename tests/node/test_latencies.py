"""The latencies the simulator's model of our side uses (``reportfarm/simulate/latencies.py``),
measured on the real node: a pod's start (the ReportPool's floor raised -> the operator creates
pods -> Ready), a pool resize (``PUT /pool`` on a running renderer, as the operator sends it), and
whether the pod-deletion cost the operator writes just before lowering the replicas is the one the
ReplicaSet honours (the floor lowered: the pods removed are the lowest-cost ones).

The figures are printed as JSON (run with ``-s``) and written to ``REPORTFARM_LATENCIES_OUT``
when it is set; the model's module says which run they came from. A measurement, so it runs only
with ``REPORTFARM_MEASURE_LATENCIES=1`` besides ``REPORTFARM_NODE_TESTS=1``."""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
import urllib.request
from typing import Any

import pytest

from tests.harness.polling import eventually
from tests.node import farm, images, release
from tests.node import node as node_harness
from tests.node.release import NAMESPACE, POOL, RENDERERS

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        os.environ.get("REPORTFARM_MEASURE_LATENCIES") != "1",
        reason="a measurement, not a check: set REPORTFARM_MEASURE_LATENCIES=1 (and the node's)",
    ),
]

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def _stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def _ready_at(pod: dict[str, Any]) -> float | None:
    for condition in pod["status"].get("conditions", []):
        if condition["type"] == "Ready" and condition["status"] == "True":
            return _stamp(condition["lastTransitionTime"])
    return None


def _floor(tools: farm.Tools, replicas: int) -> None:
    patch = json.dumps({"spec": {"replicas": {"min": replicas}}})
    tools.kubectl("patch", "reportpools", POOL, "-n", NAMESPACE, "--type=merge", "-p", patch)


def _put_pool(ip: str, size: int) -> float:
    """Seconds for ``PUT /pool`` to answer (the renderer answers once the pool has the size)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(
        f"http://{ip}:8080/pool",
        data=json.dumps({"size": size}).encode(),
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    started = time.monotonic()
    with opener.open(request, timeout=60) as response:
        assert response.status == 200, response.read()
    return time.monotonic() - started


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


def _scale_down_to_one(tools: farm.Tools, node: node_harness.Node) -> tuple[bool, float]:
    """The floor lowered to 1 (the operator annotates, then lowers replicas): whether the pod
    kept carried the highest cost each pod had when last seen before its deletion began, and the
    seconds to the first deletion (polled)."""
    last_cost: dict[str, int] = {}
    first_deletion: list[float] = []
    lowered = time.time()
    _floor(tools, 1)

    def one_left() -> bool:
        pods = tools.get("pods", "-n", NAMESPACE, "-l", RENDERERS)["items"]
        names = {pod["metadata"]["name"] for pod in pods}
        if not first_deletion and not set(last_cost) <= names:  # gone between two polls
            first_deletion.append(time.time() - lowered)
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                if not first_deletion:
                    first_deletion.append(time.time() - lowered)
                continue
            last_cost[meta["name"]] = int(meta.get("annotations", {}).get(DELETION_COST, 0))
        return len(release.ready_pods(tools)) == 1

    eventually("1 pod left", one_left, timeout=300, every=0.5, detail=node.logs)
    kept = release.ready_pods(tools)[0]["metadata"]["name"]
    removed = [cost for name, cost in last_cost.items() if name != kept]
    honoured = bool(removed) and last_cost.get(kept, 0) >= max(removed)
    return honoured, first_deletion[0] if first_deletion else float("nan")


def test_pod_start_resize_and_deletion_cost_latencies(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
) -> None:
    tools, node, _ = cluster
    pool = release.report_pool(
        built_images["renderer"].ref,
        replicas={"min": 1, "max": 3},
        scaleDown={"stabilizationSeconds": 0},
    )
    tools.apply(pool)
    eventually("a renderer pod Ready", lambda: release.ready_pods(tools), timeout=240,
               detail=node.logs)  # fmt: skip
    figures: dict[str, Any] = {"load": os.getloadavg()}

    # Pod start: the floor raised to 3, the operator's next tick creates 2 pods.
    starts, created, seen, deletions = [], [], [], []
    for _ in range(2):
        before = {p["metadata"]["name"] for p in release.ready_pods(tools)}
        asked = time.time()
        _floor(tools, 3)
        eventually("3 pods Ready", lambda: len(release.ready_pods(tools)) == 3, timeout=300,
                   every=0.5, detail=node.logs)  # fmt: skip
        seen.append(time.time() - asked)
        for pod in release.ready_pods(tools):
            if pod["metadata"]["name"] in before:
                continue
            born, ready = _stamp(pod["metadata"]["creationTimestamp"]), _ready_at(pod)
            assert ready is not None
            created.append(born - asked)
            starts.append(ready - born)

        # Deletion cost: the floor lowered to 1; the operator annotates, then lowers replicas.
        honoured, first_deletion = _scale_down_to_one(tools, node)
        figures.setdefault("deletion cost: the kept pod had the highest cost", []).append(honoured)
        deletions.append(first_deletion)
    figures["decision to pod created s"] = _spread(created)
    figures["pod created to Ready s"] = _spread(starts)
    figures["floor raised to all Ready (polled) s"] = _spread(seen)
    figures["floor lowered to the first deletion (polled) s"] = _spread(deletions)

    # A resize: PUT /pool on the running renderer, as the operator sends it, down and up.
    ip = release.ready_pods(tools)[0]["status"]["podIP"]
    resizes = [_put_pool(ip, size) for size in (1, 2, 1, 2, 1, 2)]
    figures["PUT /pool answered s"] = _spread(resizes)
    print(json.dumps(figures, indent=2))
    if out := os.environ.get("REPORTFARM_LATENCIES_OUT"):
        with open(out, "w") as handle:
            json.dump(figures, handle, indent=2)
    assert len(starts) == 4 and all(0 < s < 240 for s in starts), figures
    assert all(figures["deletion cost: the kept pod had the highest cost"]), figures
