"""The test cluster works: API, scheduling onto capacity-limited fake nodes, CRDs, the tools."""

from __future__ import annotations

import functools
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.harness import kube as kube_harness
from tests.harness import polling

pytestmark = pytest.mark.kube

eventually = functools.partial(polling.eventually, timeout=90.0)


Cluster = kube_harness.ControlPlane | kube_harness.ExternalCluster

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.reportfarm.example
spec:
  group: test.reportfarm.example
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
"""


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient) -> Iterator[str]:
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    name = f"test-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def kubectl(kube_bin: Path, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_api_server_answers(
    kube_api: kubernetes.client.ApiClient, kube_bin: Path, kubeconfig_path: Path
) -> None:
    version: Any = kubernetes.client.VersionApi(kube_api).get_code()
    assert version.major == "1"
    assert version.git_version.startswith("v1.")
    namespaces: Any = kubernetes.client.CoreV1Api(kube_api).list_namespace()
    assert {"default", "kube-system"} <= {ns.metadata.name for ns in namespaces.items}
    assert kubectl(kube_bin, kubeconfig_path, "get", "--raw", "/readyz") == "ok"


def test_fake_nodes_have_the_chosen_capacity(
    kube: Cluster, kube_api: kubernetes.client.ApiClient
) -> None:
    if kube.external:
        pytest.skip("the external cluster's nodes are its own")
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    nodes = core.list_node(label_selector="type=kwok").items
    assert len(nodes) >= 2
    assert {n.metadata.name for n in nodes} == set(kube.fake_nodes)
    for node in nodes:
        assert node.status.allocatable == kube.fake_nodes[node.metadata.name]
        assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"


def _deployment(name: str, *, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def test_deployment_pods_become_running_on_fake_nodes(
    kube: Cluster, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    apps: Any = kubernetes.client.AppsV1Api(kube_api)
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    apps.create_namespaced_deployment(namespace, _deployment("web", replicas=2, cpu="100m"))

    def running_pods() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        running = [p for p in pods if p.status.phase == "Running"]
        return running if len(running) == 2 else None

    pods = eventually("2 Running pods", running_pods)
    if not kube.external:
        assert {p.spec.node_name for p in pods} <= set(kube.fake_nodes)

    def ready_replicas() -> bool:
        status = apps.read_namespaced_deployment_status("web", namespace).status
        return status.ready_replicas == 2

    eventually("the Deployment to report 2 ready replicas", ready_replicas)


def test_pod_larger_than_any_node_stays_pending(
    kube: Cluster, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    if kube.external:
        pytest.skip("node capacity of an external cluster is unknown")
    apps: Any = kubernetes.client.AppsV1Api(kube_api)
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    apps.create_namespaced_deployment(namespace, _deployment("huge", replicas=1, cpu="64"))

    def unschedulable() -> bool:
        for pod in core.list_namespaced_pod(namespace, label_selector="app=huge").items:
            for condition in pod.status.conditions or ():
                if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                    return pod.status.phase == "Pending" and not pod.spec.node_name
        return False

    eventually("the scheduler to report the pod Unschedulable", unschedulable)


def test_crd_is_applied_and_served(
    kube_bin: Path, kubeconfig_path: Path, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    crd = "widgets.test.reportfarm.example"
    kubectl(kube_bin, kubeconfig_path, "apply", "-f", "-", stdin=CRD)
    try:
        kubectl(kube_bin, kubeconfig_path, "wait", "--for=condition=Established", f"crd/{crd}")
        custom: Any = kubernetes.client.CustomObjectsApi(kube_api)
        group, version, plural = "test.reportfarm.example", "v1", "widgets"

        def widget(size: object) -> dict[str, Any]:
            return {
                "apiVersion": f"{group}/{version}",
                "kind": "Widget",
                "metadata": {"name": "w1"},
                "spec": {"size": size},
            }

        def created() -> Any:
            # Just after Established, the new resource may 404 for a moment.
            try:
                return custom.create_namespaced_custom_object(
                    group, version, namespace, plural, widget(3)
                )
            except kubernetes.client.ApiException as error:
                if error.status != 404:
                    raise
                return None

        eventually("the Widget resource to be served", created, timeout=30)
        got = custom.get_namespaced_custom_object(group, version, namespace, plural, "w1")
        assert got["spec"] == {"size": 3}
        with pytest.raises(kubernetes.client.ApiException) as rejected:
            custom.create_namespaced_custom_object(group, version, namespace, plural, widget(0))
        assert rejected.value.status == 422  # the CRD's schema is enforced
    finally:
        kubectl(kube_bin, kubeconfig_path, "delete", "crd", crd, "--wait=false")


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["kubectl", "version", "--client"], id="kubectl"),
        pytest.param(["helm", "version", "--short"], id="helm"),
        pytest.param(["kubeconform", "-v"], id="kubeconform"),
    ],
)
def test_tools_run(kube_bin: Path, argv: list[str]) -> None:
    done = subprocess.run([str(kube_bin / argv[0]), *argv[1:]], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
