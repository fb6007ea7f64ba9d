"""The real KEDA and the real HPA run here: the baseline our scaling is compared with.

KEDA's operator and metrics adapter (built from the Go module proxy, ``scripts/keda/build.sh``)
run beside the test control plane; the HPA is the controller-manager's own. A Deployment on the
kwok nodes is scaled by a ScaledObject whose azure-queue trigger reads a real Azurite queue, as a
KEDA user would run a renderer: a trigger per queue, ``queueLength`` jobs per pod, a polling
interval and the HPA's ``behavior``. Nothing of KEDA or the HPA is modelled here.
"""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.storage.queue import QueueClient

from reportfarm import azurite
from tests.harness import keda as keda_harness
from tests.harness import kube as kube_harness
from tests.harness import polling

pytestmark = [pytest.mark.kube, pytest.mark.keda, pytest.mark.slow]

eventually = functools.partial(polling.eventually, every=1.0)


@pytest.fixture(scope="module")
def keda(kube: kube_harness.ControlPlane | kube_harness.ExternalCluster) -> Iterator[Any]:
    if isinstance(kube, kube_harness.ExternalCluster):
        pytest.skip("an external cluster: install KEDA there with its chart instead")
    try:
        bin_dir = keda_harness.bin_dir()
    except Exception as error:  # a failed build says why in its output
        pytest.fail(f"building KEDA failed: {error}")
    with keda_harness.Keda(kube, bin_dir=bin_dir) as running:
        yield running


def _manifests(namespace: str, *, queue: str, connection: str, max_replicas: int) -> str:
    secret = base64.b64encode(connection.encode()).decode()
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "queue", "namespace": namespace},
            "data": {"connection": secret},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "renderer", "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "renderer"}},
                "template": {
                    "metadata": {"labels": {"app": "renderer"}},
                    "spec": {
                        "containers": [{"name": "renderer", "image": "reportfarm-renderer:test"}],
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
            },
        },
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "TriggerAuthentication",
            "metadata": {"name": "queue", "namespace": namespace},
            "spec": {
                "secretTargetRef": [
                    {"parameter": "connection", "name": "queue", "key": "connection"}
                ]
            },
        },
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "renderer", "namespace": namespace},
            "spec": {
                "scaleTargetRef": {"name": "renderer"},
                "pollingInterval": 5,
                "cooldownPeriod": 10,
                "minReplicaCount": 0,
                "maxReplicaCount": max_replicas,
                "advanced": {
                    "horizontalPodAutoscalerConfig": {
                        "behavior": {
                            "scaleUp": {
                                "stabilizationWindowSeconds": 0,
                                "policies": [{"type": "Pods", "value": 20, "periodSeconds": 15}],
                            },
                            "scaleDown": {"stabilizationWindowSeconds": 60},
                        }
                    }
                },
                "triggers": [
                    {
                        "type": "azure-queue",
                        "metadata": {"queueName": queue, "queueLength": "4"},
                        "authenticationRef": {"name": "queue"},
                    }
                ],
            },
        },
    ]
    return "\n---\n".join(json.dumps(doc) for doc in docs)


def _replicas(keda: Any, namespace: str) -> int:
    out = keda.kubectl("get", "deployment", "renderer", "-n", namespace, "-o", "json")
    return int(json.loads(out)["spec"].get("replicas") or 0)


def test_keda_and_the_hpa_scale_a_deployment_on_an_azurite_queue(
    keda: Any, azurite_server: azurite.Azurite, tmp_path: Path
) -> None:
    namespace = f"keda-{uuid.uuid4().hex[:8]}"
    queue = f"q{uuid.uuid4().hex[:10]}"
    client = QueueClient.from_connection_string(azurite_server.connection_string, queue)
    client.create_queue()
    manifest = tmp_path / "keda.json"
    manifest.write_text(
        _manifests(
            namespace,
            queue=queue,
            # Spelled out (QueueEndpoint=...): the scaler does not read UseDevelopmentStorage.
            connection=azurite_server.connection_string,
            max_replicas=8,
        )
    )
    keda.kubectl("apply", "-f", str(manifest))
    detail = keda.logs

    # An empty queue: KEDA itself takes the Deployment from 1 to 0 after its cooldown.
    eventually(
        "KEDA to scale the idle Deployment to zero",
        lambda: _replicas(keda, namespace) == 0,
        timeout=120,
        detail=detail,
    )
    hpa = json.loads(keda.kubectl("get", "hpa", "-n", namespace, "-o", "json"))["items"]
    assert [h["metadata"]["name"] for h in hpa] == ["keda-hpa-renderer"]

    # 37 jobs at 4 per pod: KEDA wakes it (0 -> 1), the HPA takes it to ceil(37/4) capped at 8.
    for index in range(37):
        client.send_message(json.dumps({"job": index}))
    eventually(
        "the HPA to scale the Deployment to 8",
        lambda: _replicas(keda, namespace) == 8,
        timeout=150,
        detail=detail,
    )

    # Emptied: back to zero (the HPA's 60 s window, then KEDA's cooldown).
    client.clear_messages()
    eventually(
        "scale-down to zero", lambda: _replicas(keda, namespace) == 0, timeout=240, detail=detail
    )
    keda.kubectl("delete", "namespace", namespace, "--wait=false")
