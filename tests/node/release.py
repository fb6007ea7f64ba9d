"""The chart release and the ReportPool that the real-node tests share: names, the chart installed
with the operator and the gateway from their images, the pool, its Ready pods."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.harness import kube as kube_harness
from tests.harness import reportpools
from tests.node import farm, images

ROOT = images.ROOT
NAMESPACE = "farm"
QUEUE, CONTAINER = "reports", "reports"
POOL = "burst"
RENDERERS = f"app.kubernetes.io/instance={POOL}"
TOKEN = "node-test-token"
SLOW_TEMPLATE = """{# reportfarm: javascript #}
<html><body><h1>慢 {{ name }}</h1>
<script>const end = Date.now() + {{ busy_ms }}; while (Date.now() < end) {}</script>
</body></html>
"""
"""A job that keeps its browser busy for ``busy_ms`` (a pod deleted while it runs must drain)."""


def prepare_namespace(tools: farm.Tools, connection: str, workdir: Path) -> None:
    """The namespace with the storage and tokens Secrets and the templates ConfigMap (the
    examples and ``slow``)."""
    tools.kubectl("create", "namespace", NAMESPACE)
    tools.kubectl(
        "create", "secret", "generic", "storage", "-n", NAMESPACE,
        f"--from-literal=connection-string={connection}",
    )  # fmt: skip
    slow = workdir / "slow.html"
    slow.write_text(SLOW_TEMPLATE, encoding="utf-8")
    tools.kubectl(
        "create", "configmap", "report-templates", "-n", NAMESPACE,
        f"--from-file={ROOT / 'examples' / 'templates'}", f"--from-file={slow}",
    )  # fmt: skip
    tools.kubectl(
        "create", "secret", "generic", "tenant-tokens", "-n", NAMESPACE,
        f"--from-literal=tokens=acme={TOKEN}",
    )  # fmt: skip


def install_chart(
    tools: farm.Tools,
    plane: kube_harness.ControlPlane,
    operator: images.Image,
    gateway: images.Image,
    *,
    chart: Path = ROOT / "charts" / "reportfarm",
    command: str = "install",
    values: Sequence[str] = (),
    operator_spec: Mapping[str, Any] | None = None,
) -> None:
    """The chart with the operator and the gateway, from the locally built images (``values``:
    more ``--set`` pairs, after the defaults; ``command`` ``upgrade`` upgrades the release;
    ``operator_spec``: more fields of the operator pod's spec)."""
    repository, tag = operator.ref.rsplit(":", 1)
    gateway_repository, gateway_tag = gateway.ref.rsplit(":", 1)
    health, metrics = (str(p) for p in (farm.azurite.free_port(), farm.azurite.free_port()))
    tools.run(
        "helm", command, "reportfarm", str(chart), "-n", NAMESPACE,
        "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
        "--set", "image.pullPolicy=Never", "--set", f"watchNamespace={NAMESPACE}",
        "--set", f"operator.healthPort={health}", "--set", f"metrics.port={metrics}",
        "--set", "gateway.enabled=true", "--set", "gateway.replicaCount=1",
        "--set", f"gateway.image.repository={gateway_repository}",
        "--set", f"gateway.image.tag={gateway_tag}", "--set", "gateway.image.pullPolicy=Never",
        "--set", "gateway.connectionSecretRef.name=storage",
        "--set", "gateway.tokensSecretRef.name=tenant-tokens",
        "--set", f"gateway.queue={QUEUE}", "--set", f"gateway.outputContainer={CONTAINER}",
        *[arg for value in values for arg in ("--set", value)],
    )  # fmt: skip
    # This node has no kube-proxy and the test plane listens on loopback only: the operator's pod
    # uses the node's network and reaches the apiserver at 127.0.0.1 (in its serving cert).
    port = plane.server.rsplit(":", 1)[1]
    env = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
        {"name": "KUBERNETES_SERVICE_PORT", "value": port},
    ]
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "hostNetwork": True,
                    "containers": [{"name": "operator", "env": env}],
                    **(operator_spec or {}),
                }
            }
        }
    }
    operator_deployment = "deployment/reportfarm"
    tools.kubectl("patch", operator_deployment, "-n", NAMESPACE, "--patch", json.dumps(patch))
    for deployment in (operator_deployment, "deployment/reportfarm-gateway"):
        tools.kubectl("rollout", "status", deployment, "-n", NAMESPACE, "--timeout=240s")


def report_pool(image: str, **spec: Any) -> dict[str, Any]:
    """The tests' ReportPool: 1..3 pods of 1..2 browsers; ``spec`` replaces top-level fields."""
    defaults: dict[str, Any] = {
        "image": image,
        "imagePullPolicy": "Never",
        "templates": {"configMapName": "report-templates"},
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "2Gi"},
        },
        "browser": {"cpu": "500m", "memory": "512Mi"},
        "replicas": {"min": 1, "max": 3},
        "browsersPerPod": {"min": 1, "max": 2},
        "target": {"queueWaitSeconds": 5},
        "scaleDown": {"stabilizationSeconds": 10},
        "terminationGracePeriodSeconds": 90,
    }
    pool = reportpools.report_pool(POOL, QUEUE, **{**defaults, **spec})
    pool["metadata"]["namespace"] = NAMESPACE
    return pool


def ready_pods(tools: farm.Tools) -> list[dict[str, Any]]:
    return [
        p
        for p in tools.running_pods(NAMESPACE, RENDERERS)
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p["status"].get("conditions", [])
        )
    ]
