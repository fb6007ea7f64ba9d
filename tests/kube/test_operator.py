"""The operator against a real API server, a real controller-manager and a real Azurite.

The CRD is applied, a ReportPool with its connection Secret is created, and the operator runs
in-process (``kopf.testing.KopfRunner``) as a ServiceAccount that holds only the Role the Helm
chart grants by default (rendered from the chart, ``chart_rules``): a missing verb fails the
test, through scale-up, a restart, a template change, scale to zero and deletion (the chart's
deploy tests check that it grants nothing more). kwok makes the renderer pods Running with fake IPs that
serve nothing, so the operator sees the queue depth alone, as it does while real pods start.
Deadlines bound every wait; no timing is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from azure.storage.queue.aio import QueueClient
from kopf.testing import KopfRunner
from kubernetes.config import kube_config

from reportfarm import azurite
from reportfarm.storage.queueing import JobQueue
from tests.harness import polling
from tests.harness.reportpools import GROUP, PLURAL, VERSION, report_pool

pytestmark = [pytest.mark.kube, pytest.mark.azurite, pytest.mark.slow]

eventually = functools.partial(polling.eventually, timeout=120.0)


CRD = Path(__file__).resolve().parents[2] / "crds" / "reportpools.reportfarm.io.yaml"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


@pytest.fixture(scope="module")
def crd(kube_bin: Path, kubeconfig_path: Path) -> str:
    def kubectl(*args: str) -> None:
        command = [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig_path}", *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/reportpools.reportfarm.io")
    return "reportpools.reportfarm.io"


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient) -> Iterator[str]:
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    name = f"rf-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def custom(kube_api: kubernetes.client.ApiClient, crd: str) -> Any:
    return kubernetes.client.CustomObjectsApi(kube_api)


def create_when_served(custom: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    """Just after Established, a new resource may answer 404 for a moment."""

    def created() -> dict[str, Any] | None:
        try:
            return dict(
                custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
            )
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
            return None

    return eventually("the ReportPool resource to be served", created, timeout=30)


INVALID_POOLS = [
    pytest.param(
        "reports",
        {"replicas": {"min": 5, "max": 2}},
        "spec.replicas.min",
        "replicas.min must be <= replicas.max",
        id="replicas",
    ),
    pytest.param(
        "reports",
        {"replicas": {"min": 15}},
        "spec.replicas.min",
        "replicas.min must be <= replicas.max (replicas.max is 10 when not set)",
        id="replicas-min-above-the-default-max",
    ),
    pytest.param(
        "reports",
        {"browsersPerPod": {"min": 6, "max": 3}},
        "spec.browsersPerPod.min",
        "browsersPerPod.min must be <= browsersPerPod.max",
        id="browsers",
    ),
    pytest.param(
        "reports",
        {"browsersPerPod": {"min": 6, "max": 8}},
        "spec.browsersPerPod.min",
        "browsersPerPod.min browsers must fit one pod",
        id="browsers-min-do-not-fit",
    ),
    pytest.param(
        "reports",
        {"browser": {"cpu": "0"}},
        "spec.browser.cpu",
        "browser.cpu must be a positive quantity",
        id="browser-cpu-zero",
    ),
    pytest.param(
        "reports",
        {"browser": {"memory": "-512Mi"}},
        "spec.browser.memory",
        "browser.memory must be a positive quantity",
        id="browser-memory-negative",
    ),
    pytest.param(
        "reports",
        {"resources": {"limits": {"cpu": "0", "memory": "1Gi"}}},
        "spec.resources.limits.cpu",
        "resources.limits.cpu must be a positive quantity",
        id="limit-zero",
    ),
    pytest.param(
        "reports",
        {
            "resources": {
                "requests": {"cpu": "3", "memory": "1Gi"},
                "limits": {"cpu": "2", "memory": "2Gi"},
            }
        },
        "spec.resources.requests.cpu",
        "resources.requests.cpu must be <= resources.limits.cpu",
        id="request-above-limit",
    ),
    pytest.param(
        "reports",
        {
            "resources": {
                "requests": {"cpu": "1", "memory": "3Gi"},
                "limits": {"cpu": "2", "memory": "2Gi"},
            }
        },
        "spec.resources.requests.memory",
        "resources.requests.memory must be <= resources.limits.memory",
        id="memory-request-above-limit",
    ),
    pytest.param(
        "reports",
        {"resources": {}},
        "spec.resources.limits.cpu",
        "set cpu in resources.limits or resources.requests",
        id="resources-empty",
    ),
    pytest.param(
        "reports",
        {"resources": {"limits": {"cpu": "2"}}},
        "spec.resources.limits.memory",
        "set memory in resources.limits or resources.requests",
        id="no-memory",
    ),
    pytest.param(
        "reports",
        {
            "queue": {
                "name": "jobs",
                "connectionSecretRef": {"name": "s"},
                "accountUrl": "https://a",
            }
        },
        "spec.queue.connectionSecretRef",
        "exactly one of queue.connectionSecretRef or queue.accountUrl",
        id="secret-xor-account-url",
    ),
    pytest.param(
        "reports",
        {"templates": {}},
        "spec.templates.configMapName",
        "exactly one of templates.configMapName or templates.inline",
        id="no-templates",
    ),
    pytest.param(
        "9reports",
        {},
        "metadata.name",
        "metadata.name",
        id="name-starts-with-a-digit",
    ),
]


@pytest.mark.parametrize(("name", "patch", "field", "message"), INVALID_POOLS)
def test_the_crd_rejects_what_the_operator_cannot_use(
    custom: Any, namespace: str, name: str, patch: dict[str, Any], field: str, message: str
) -> None:
    body = report_pool(name, "jobs", **patch)

    def rejected() -> kubernetes.client.ApiException | None:
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        except kubernetes.client.ApiException as error:
            return None if error.status == 404 else error  # 404: not served yet
        pytest.fail("the API server accepted a ReportPool the operator cannot use")

    error = eventually("the ReportPool resource to be served", rejected, timeout=30)
    assert error.status == 422, error.body
    status = json.loads(error.body)
    assert message in status["message"], status["message"]
    assert field in [cause.get("field") for cause in status["details"]["causes"]], status
    assert "<nil>" not in status["message"]


def test_every_field_has_a_description_and_explain_shows_it(
    crd: str, kube_bin: Path, kubeconfig_path: Path
) -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def undocumented(node: dict[str, Any], path: str) -> Iterator[str]:
        for name, child in (node.get("properties") or {}).items():
            if "description" not in child and f"{path}.{name}" != ".metadata":  # may not have one
                yield f"{path}.{name}"
            yield from undocumented(child, f"{path}.{name}")
        if "items" in node:
            yield from undocumented(node["items"], f"{path}[]")

    assert list(undocumented(schema, "")) == []

    def explain(field: str) -> str | None:
        """``kubectl explain``, once the API server publishes the CRD's schema (it lags behind
        Established for a moment)."""
        done = subprocess.run(
            [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig_path}", "explain", field],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return " ".join(done.stdout.split()) if done.returncode == 0 else None

    explained = polling.eventually("explain", lambda: explain("reportpools.spec.browser.cpu"))
    assert "CPU one browser needs" in explained, explained
    assert 'default "500m"' in explained, explained  # defaults and bounds, as explain shows them
    explained = polling.eventually("explain", lambda: explain("reportpools.spec.replicas.max"))
    assert "(1 to 1000; default 10)" in explained, explained


def test_the_crd_fills_in_defaults(custom: Any, namespace: str) -> None:
    body = report_pool("defaults", "jobs")
    for key in ("replicas", "browsersPerPod", "target", "scaleDown", "scaleToZero", "resources"):
        del body["spec"][key]
    spec = create_when_served(custom, namespace, body)["spec"]
    assert spec["replicas"] == {"min": 0, "max": 10}
    assert spec["browsersPerPod"] == {"min": 1, "max": 4}
    assert spec["queue"]["connectionSecretRef"]["key"] == "connection-string"
    assert spec["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["scaleDown"] == {
        "stabilizationSeconds": 60,
        "recurringBacklogHoldSeconds": 0,
        "recurringBacklogWithinSeconds": 300,
    }


class Cluster:
    """Reads for the assertions, through the plain client (not the operator's adapter)."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, pool: str) -> None:
        self.apps: Any = kubernetes.client.AppsV1Api(api)
        self.core: Any = kubernetes.client.CoreV1Api(api)
        self.policy: Any = kubernetes.client.PolicyV1Api(api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(api)
        self.namespace, self.pool = namespace, pool

    def _maybe(self, read: Callable[..., Any], name: str) -> Any:
        try:
            return read(name, self.namespace)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def deployment(self) -> Any:
        return self._maybe(self.apps.read_namespaced_deployment, f"{self.pool}-renderer")

    def children(self) -> dict[str, Any]:
        return {
            "Deployment": self.deployment(),
            "Service": self._maybe(self.core.read_namespaced_service, f"{self.pool}-metrics"),
            "PodDisruptionBudget": self._maybe(
                self.policy.read_namespaced_pod_disruption_budget, f"{self.pool}-renderer"
            ),
            "ConfigMap": self._maybe(
                self.core.read_namespaced_config_map, f"{self.pool}-templates"
            ),
        }

    def status(self) -> dict[str, Any]:
        body = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.pool
        )
        return dict(body.get("status") or {})

    def conditions(self) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in self.status().get("conditions") or []}

    def event_reasons(self) -> set[str]:
        events = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={self.pool}"
        ).items
        return {event.reason for event in events}

    def pods(self) -> list[Any]:
        selector = f"reportfarm.io/pool={self.pool}"
        return self.core.list_namespaced_pod(self.namespace, label_selector=selector).items


async def _send(connection_string: str, queue: str, count: int) -> None:
    async with JobQueue(connection_string, queue) as jobs:
        await jobs.ensure()
        for index in range(count):
            await jobs.send(f'{{"job": {index}}}')


async def _clear(connection_string: str, queue: str) -> None:
    async with QueueClient.from_connection_string(connection_string, queue) as client:
        await client.clear_messages()


CHART = Path(__file__).resolve().parents[2] / "charts" / "reportfarm"
KUBE_VERSION = ("--kube-version", "1.34.0")  # helm template's default (1.20) is below the chart's


def chart_rules(kube_bin: Path, namespace: str) -> list[dict[str, Any]]:
    """The rules of the one Role the chart renders by default for a release in ``namespace``;
    the defaults render nothing cluster-scoped."""
    done = subprocess.run(
        [str(kube_bin / "helm"), "template", "rf", str(CHART), "-n", namespace, *KUBE_VERSION],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    docs = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    assert not [d for d in docs if d["kind"].startswith("Cluster")], "cluster-wide by default"
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == namespace
    return list(role["rules"])


@pytest.fixture
def operator_kubeconfig(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    kube_bin: Path,
    namespace: str,
    tmp_path: Path,
) -> Path:
    """A kubeconfig for a ServiceAccount with the chart's default Role: nothing cluster-wide."""
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    rbac: Any = kubernetes.client.RbacAuthorizationV1Api(kube_api)
    account = {"kind": "ServiceAccount", "name": "reportfarm-operator", "namespace": namespace}
    core.create_namespaced_service_account(namespace, {"metadata": {"name": account["name"]}})
    rbac.create_namespaced_role(
        namespace, {"metadata": {"name": "operator"}, "rules": chart_rules(kube_bin, namespace)}
    )
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "operator"}
    rbac.create_namespaced_role_binding(
        namespace, {"metadata": {"name": "operator"}, "roleRef": role_ref, "subjects": [account]}
    )
    request = {"spec": {"expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token(account["name"], namespace, request)
    config = yaml.safe_load(kubeconfig_path.read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": token.status.token}}]
    path = tmp_path / "operator.kubeconfig"
    path.write_text(json.dumps(config))
    return path


@contextlib.contextmanager
def running_operator(namespace: str) -> Iterator[KopfRunner]:
    """The operator, in-process, watching one namespace; it must stop cleanly."""
    args = ["run", "--standalone", "--verbose", "--namespace", namespace]
    with KopfRunner([*args, "-m", "reportfarm_operator.handlers"], timeout=60) as runner:
        yield runner
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output


@pytest.fixture
def operator_env(operator_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # kopf's login and the operator's client read the kubernetes library's default kubeconfig
    # location, fixed when the library was imported: point it at the operator's identity.
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(operator_kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(operator_kubeconfig))
    monkeypatch.setenv("REPORTFARM_OPERATOR_METRICS_PORT", "0")
    monkeypatch.setenv("REPORTFARM_OPERATOR_POD_TIMEOUT", "1")


@pytest.mark.timeout(900)
def test_a_report_pool_scales_with_its_queue_and_owns_its_children(
    kube_api: kubernetes.client.ApiClient,
    custom: Any,
    namespace: str,
    azurite_server: azurite.Azurite,
    kube_bin: Path,
    kubeconfig_path: Path,
    operator_env: None,
) -> None:
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    asyncio.run(_send(connection, queue, 0))  # create the queue, empty
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespaced_secret(
        namespace,
        {"metadata": {"name": "storage"}, "stringData": {"connection-string": connection}},
    )
    pool = create_when_served(custom, namespace, report_pool("reports", queue))
    cluster = Cluster(kube_api, namespace, "reports")
    with running_operator(namespace):
        burst_scales_the_pool_up(cluster, pool, connection, queue)
    # A new operator process carries on from the status: the pool is not shrunk on restart.
    with running_operator(namespace):
        the_pool_carries_on_and_rolls_out_spec_changes(cluster, custom, kube_bin, kubeconfig_path)
        an_empty_queue_scales_the_pool_to_zero(cluster, connection, queue)
        # Deleting the ReportPool deletes its children (the garbage collector, no finalizer).
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "reports")
        eventually(
            "the garbage collector to delete the children",
            lambda: not any(cluster.children().values()),
            timeout=180,
        )


def burst_scales_the_pool_up(
    cluster: Cluster, pool: dict[str, Any], connection: str, queue: str
) -> None:
    # The children appear, owned by the ReportPool.
    def all_children() -> dict[str, Any] | None:
        found = cluster.children()
        return found if all(found.values()) else None

    children = eventually("the children", all_children)
    for kind, child in children.items():
        owners = child.metadata.owner_references or []
        assert [(o.kind, o.name, o.uid, o.controller) for o in owners] == [
            ("ReportPool", "reports", pool["metadata"]["uid"], True)
        ], kind
    deployment = children["Deployment"]
    assert deployment.spec.replicas == 0  # replicas.min, and the queue is empty
    container = deployment.spec.template.spec.containers[0]
    env = {e.name: e for e in container.env}
    assert env["AZURE_STORAGE_CONNECTION_STRING"].value_from.secret_key_ref.name == "storage"
    assert env["REPORTFARM_QUEUE"].value == queue
    assert env["REPORTFARM_POOL_SIZE"].value == "4"  # 2 CPUs / 500m, 2Gi / 512Mi, max 4

    def steady_and_reachable() -> bool:
        conditions = cluster.conditions()
        return conditions.get("QueueReachable", {}).get("status") == "True"

    eventually("a first decision with the queue reachable", steady_and_reachable)
    assert cluster.status()["replicas"] == 0

    # A burst wakes the pool from zero; kwok runs the pods; the status and an Event say why.
    asyncio.run(_send(connection, queue, 40))

    def scaled_up() -> Any:
        current = cluster.deployment()
        return current if current.spec.replicas and current.spec.replicas >= 1 else None

    eventually("the Deployment to scale up", scaled_up)
    # The status is written after the scale, when the decision's handler returns.
    status = eventually(
        "the status to record the scale-up",
        lambda: s if (s := cluster.status()).get("replicas", 0) >= 1 else None,
    )
    assert status["browsersPerPod"] >= 1
    assert status["queueDepth"] == 40
    assert status["policy"]["lastWorkAt"] is not None
    assert "WakeFromZero" in eventually("a WakeFromZero Event", cluster.event_reasons)

    def running_pods() -> list[Any] | None:
        running = [p for p in cluster.pods() if p.status.phase == "Running"]
        return running or None

    eventually("kwok to run the renderer pods", running_pods)
    # The pods' metrics are unreachable (fake IPs): the queue alone keeps driving the decision.
    eventually(
        "the pool at its most pods (4), since nothing drains the queue",
        lambda: cluster.status().get("replicas") == 4,
    )
    eventually(
        "Degraded=AtMaxReplicas: the need outgrows 4 full pods",
        lambda: cluster.conditions()["Degraded"]["reason"] == "AtMaxReplicas",
    )
    assert cluster.status()["browsersPerPod"] == 4


def the_pool_carries_on_and_rolls_out_spec_changes(
    cluster: Cluster, custom: Any, kube_bin: Path, kubeconfig_path: Path
) -> None:
    before = cluster.status()["lastDecision"]["time"]
    eventually(
        "a decision by the new operator",
        lambda: cluster.status()["lastDecision"]["time"] != before,
    )
    assert cluster.status()["replicas"] == 4
    assert cluster.deployment().spec.replicas == 4

    # A spec change rolls out to the Deployment; the scaling loop's replicas stay.
    patch = {"spec": {"image": "reportfarm/renderer:test-2"}}
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, cluster.namespace, PLURAL, cluster.pool, patch
    )

    def rolled_out() -> bool:
        current = cluster.deployment()
        return bool(current.spec.template.spec.containers[0].image == "reportfarm/renderer:test-2")

    eventually("the new image in the Deployment", rolled_out)
    assert cluster.deployment().spec.replicas == 4

    # kubectl shows the printer columns.
    kubectl = [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig_path}"]
    table = subprocess.run(
        [*kubectl, "get", "reportpools", "-n", cluster.namespace, "-o", "wide"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    for column in ("REPLICAS", "READY", "BROWSERS", "QUEUE", "REASON", "HEALTHY", "AGE"):
        assert column in table, table
    assert "40" in table  # the queue depth


def an_empty_queue_scales_the_pool_to_zero(cluster: Cluster, connection: str, queue: str) -> None:
    # The queue empties: the idlest pods are marked, replicas go down, and then to zero.
    asyncio.run(_clear(connection, queue))
    annotated: set[str] = set()

    def scaled_to_zero() -> bool:
        for pod in cluster.pods():
            if DELETION_COST in (pod.metadata.annotations or {}):
                annotated.add(pod.metadata.name)
        return cluster.deployment().spec.replicas == 0

    eventually("the pool to scale down to zero", scaled_to_zero, timeout=300)
    assert annotated, "pods were not given a deletion cost before replicas went down"
    # The Events follow the Deployment's change (posted after the status is written).
    eventually(
        "ScaleDown and ScaleToZero Events",
        lambda: {"ScaleDown", "ScaleToZero"} <= cluster.event_reasons(),
        timeout=60,
    )
    assert cluster.status()["lastDecision"]["reason"] in ("ScaleToZero", "Steady")
    assert cluster.conditions()["Ready"]["reason"] == "ScaledToZero"
