"""The Helm chart against a real API server: kubeconform with the server's own schemas, then
``helm install`` and ``helm uninstall`` leaving nothing behind.

Schemas come from the running server's ``/openapi/v2`` after the project's CRD and
prometheus-operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule, from the
``github.com/prometheus-operator/prometheus-operator`` Go module, pinned) are applied, so the
optional integrations are validated too. On a user's own cluster (KUBECONFIG) the
prometheus-operator CRDs are used only if already installed, never installed by the test.

The chart's RBAC is proven sufficient by running the real operator with its ServiceAccount's token
(one watched namespace) until it has reconciled a ReportPool, and least-privilege by asking the API
server what that account may and may not do.

``helm test`` needs the operator image and a real kubelet; it runs only on an external cluster with
``REPORTFARM_TEST_OPERATOR_IMAGE`` (repository:tag) set.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from reportfarm import azurite
from reportfarm.storage.queueing import JobQueue
from tests.deploy import kubeconform
from tests.harness import kube as kube_harness
from tests.harness import polling

pytestmark = [pytest.mark.kube, pytest.mark.slow]

eventually = functools.partial(polling.eventually, timeout=90.0, every=1.0)


ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "reportfarm"
EXAMPLE_POOL = CHART / "examples" / "reportpool.yaml"
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
MONITORING_CRDS = ("servicemonitors", "podmonitors", "prometheusrules")
ALL_ON = [
    "metrics.serviceMonitor.enabled=true",
    "metrics.podMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "dashboards.enabled=true",
]
Cluster = kube_harness.ControlPlane | kube_harness.ExternalCluster


class Tools:
    """kubectl and helm against the test cluster."""

    def __init__(self, bin_dir: Path, kubeconfig: Path) -> None:
        self.bin_dir = bin_dir
        self.kubeconfig = kubeconfig

    def run(
        self, tool: str, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin_dir / tool), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert done.returncode == 0, f"{tool} {' '.join(args)}:\n{done.stderr}"
        return done

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.run("kubectl", *args, stdin=stdin).stdout

    def helm(self, *args: str) -> str:
        return self.run("helm", *args).stdout

    def crd_exists(self, name: str) -> bool:
        return self.run("kubectl", "get", "crd", name, check=False).returncode == 0

    def openapi(self) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "--raw", "/openapi/v2"))


@pytest.fixture(scope="module")
def tools(kube_bin: Path, kubeconfig_path: Path) -> Tools:
    return Tools(kube_bin, kubeconfig_path)


def _prometheus_operator_crds() -> list[Path]:
    done = subprocess.run(
        ["go", "mod", "download", "-json", PROMETHEUS_OPERATOR],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    folder = Path(json.loads(done.stdout)["Dir"]) / "example" / "prometheus-operator-crd"
    return [folder / f"monitoring.coreos.com_{plural}.yaml" for plural in MONITORING_CRDS]


@pytest.fixture(scope="module")
def crds(kube: Cluster, tools: Tools) -> bool:
    """Apply the project's CRDs (and, on the test control plane, prometheus-operator's).

    Returns whether the monitoring kinds are served; waits until /openapi/v2 publishes them all.
    """
    files = sorted((ROOT / "crds").glob("*.yaml"))
    monitoring = all(tools.crd_exists(f"{p}.monitoring.coreos.com") for p in MONITORING_CRDS)
    if not monitoring and not kube.external:
        files += _prometheus_operator_crds()
        monitoring = True
    for path in files:
        tools.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    tools.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    wanted = {"ReportPool"} | (
        {"ServiceMonitor", "PodMonitor", "PrometheusRule"} if monitoring else set()
    )

    def published() -> bool:
        served = {kind for _, kind in kubeconform.gvks(tools.openapi())}
        return wanted <= served

    eventually("/openapi/v2 to publish the CRDs", published, timeout=120)
    return monitoring


def template_args(*sets: str, namespace: str = "reportfarm") -> list[str]:
    args = ["template", "rf", str(CHART), "-n", namespace, "--include-crds"]
    for item in sets:
        args += ["--set", item]
    return args


@pytest.mark.parametrize(
    "sets",
    [
        pytest.param([], id="defaults"),
        pytest.param(ALL_ON, id="all-integrations"),
        pytest.param(["watchNamespace=reports", "peering.enabled=true"], id="one-namespace"),
    ],
)
def test_rendered_chart_passes_kubeconform_strict_with_the_servers_schemas(
    tools: Tools, crds: bool, tmp_path: Path, sets: list[str]
) -> None:
    if "metrics.podMonitor.enabled=true" in sets and not crds:
        pytest.skip("the cluster serves no prometheus-operator CRDs")
    version = tools.kubectl("version", "-o", "json")
    server = json.loads(version)["serverVersion"]
    kube_version = f"{server['major']}.{server['minor'].rstrip('+')}.0"
    manifests = tools.helm(*template_args(*sets), "--kube-version", kube_version)
    manifests += "\n---\n" + EXAMPLE_POOL.read_text()
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    missing = kubeconform.write_schemas(tools.openapi(), docs, tmp_path)
    assert not missing, f"kinds the API server does not serve: {missing}"
    done = kubeconform.validate(tools.bin_dir / "kubeconform", manifests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = kubeconform.summary_counts(done.stdout)
    assert counts.get("valid") == len(docs), done.stdout
    assert counts.get("invalid", 0) == counts.get("errors", 0) == counts.get("skipped", 0) == 0


def test_the_servers_schemas_are_strict(tools: Tools, crds: bool, tmp_path: Path) -> None:
    """A typo in a field name is an error (else the test above would prove little)."""
    manifests = tools.helm(*template_args(), "--kube-version", "1.37.0")
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    pool = yaml.safe_load(EXAMPLE_POOL.read_text())
    pool["spec"]["replicas"]["maximum"] = 3
    kubeconform.write_schemas(tools.openapi(), [deployment, pool], tmp_path)
    stream = yaml.safe_dump_all([deployment, pool])
    done = kubeconform.validate(tools.bin_dir / "kubeconform", stream, tmp_path)
    assert done.returncode != 0
    assert kubeconform.summary_counts(done.stdout).get("invalid") == 2, done.stdout
    assert "imagePullPolice" in done.stdout and "maximum" in done.stdout, done.stdout


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient) -> Iterator[str]:
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    name = f"chart-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def test_the_example_report_pool_is_accepted_by_the_server(
    tools: Tools, crds: bool, namespace: str
) -> None:
    out = tools.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-n", namespace, "-f", str(EXAMPLE_POOL)
    )
    assert "reportpool.reportfarm.io/reports created (server dry run)" in out


def _leftovers(tools: Tools, release: str, namespace: str) -> list[str]:
    """Every object labelled as the release's, in its namespace and cluster-wide."""
    selector = f"app.kubernetes.io/instance={release}"
    found = []
    for namespaced in ("true", "false"):
        types = tools.kubectl(
            "api-resources", "--verbs=list,delete", f"--namespaced={namespaced}", "-o", "name"
        ).split()
        scope = ["-n", namespace] if namespaced == "true" else []
        out = tools.kubectl("get", ",".join(types), *scope, "-l", selector, "-o", "name")
        found += out.split()
    helm_state = tools.kubectl(
        "get", "secrets", "-n", namespace, "-l", f"owner=helm,name={release}", "-o", "name"
    )
    return found + helm_state.split()


def test_helm_install_then_uninstall_leaves_nothing_behind(
    kube: Cluster, tools: Tools, crds: bool, namespace: str
) -> None:
    release = f"rf-{uuid.uuid4().hex[:6]}"
    sets = ALL_ON if crds else []
    args = ["install", release, str(CHART), "-n", namespace]
    for item in sets:
        args += ["--set", item]
    image = os.environ.get("REPORTFARM_TEST_OPERATOR_IMAGE")
    if image:
        repository, tag = image.rsplit(":", 1)
        args += ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
    if not kube.external or image:  # kwok runs any image; a real kubelet needs a real one
        args += ["--wait", "--timeout=3m"]
    try:
        notes = tools.helm(*args)
        assert f"release {release} in namespace {namespace}" in notes
        assert f"ReportPools in namespace(s) {namespace} (a Role in each" in notes, notes
        installed = _leftovers(tools, release, namespace)
        kinds = {name.split("/")[0].split(".")[0] for name in installed}
        expected = {"deployment", "service", "serviceaccount", "role", "rolebinding"}
        if crds:
            expected |= {"servicemonitor", "podmonitor", "prometheusrule", "configmap"}
        assert expected <= kinds, installed
        if kube.external and image:
            tools.helm("test", release, "-n", namespace, "--timeout=3m")
    finally:
        tools.run("helm", "uninstall", release, "-n", namespace, "--wait", check=False)

    eventually(
        f"release {release} to leave nothing behind",
        lambda: not _leftovers(tools, release, namespace),
        timeout=120,
    )
    # Helm never deletes what it installed from crds/ (by design: deleting a CRD deletes every
    # ReportPool); docs/operating/install.md ("Uninstall") says how to remove it.
    assert tools.crd_exists("reportpools.reportfarm.io")


# --- the chart's RBAC, as the operator's own ServiceAccount --------------------------------------

MAY = [
    ("list", "reportpools.reportfarm.io"),
    ("watch", "reportpools.reportfarm.io"),
    ("patch", "reportpools.reportfarm.io/status"),
    ("create", "deployments.apps"),
    ("patch", "deployments.apps"),
    ("patch", "services"),
    ("create", "configmaps"),
    ("create", "poddisruptionbudgets.policy"),
    ("patch", "pods"),
    ("create", "events"),
    ("get", "secrets"),
]
MAY_NOT = [
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "secrets"),
    ("delete", "pods"),
    ("create", "pods"),
    ("delete", "deployments.apps"),
    ("delete", "reportpools.reportfarm.io"),
    ("create", "roles.rbac.authorization.k8s.io"),
    ("create", "pods/exec"),
    ("update", "deployments.apps/scale"),
    ("list", "namespaces"),
    ("list", "customresourcedefinitions.apiextensions.k8s.io"),
]


def _can(tools: Tools, account: str, verb: str, resource: str, namespace: str) -> bool:
    """``resource`` may name a subresource: ``deployments.apps/scale``."""
    kind, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, kind, "-n", namespace, f"--as={account}"]
    if sub:
        args.append(f"--subresource={sub}")
    return tools.run("kubectl", *args, check=False).stdout.strip() == "yes"


def _token_kubeconfig(tools: Tools, account: str, namespace: str, path: Path) -> Path:
    """The test cluster's kubeconfig, authenticating with a fresh token of the ServiceAccount."""
    token = tools.kubectl("create", "token", account, "-n", namespace, "--duration=1h").strip()
    config = yaml.safe_load(tools.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


async def _create_queue(connection: str, name: str) -> None:
    async with JobQueue(connection, name) as queue:
        await queue.ensure()


@pytest.fixture
def watched(kube_api: kubernetes.client.ApiClient) -> Iterator[str]:
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    name = f"pools-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.mark.timeout(600)
def test_the_operator_runs_on_the_charts_rbac_alone(
    tools: Tools,
    crds: bool,
    namespace: str,
    watched: str,
    kube_api: kubernetes.client.ApiClient,
    azurite_server: azurite.Azurite,
    tmp_path: Path,
) -> None:
    release = f"rf-{uuid.uuid4().hex[:6]}"
    account = f"{release}-reportfarm"
    tools.helm(
        "install", release, str(CHART), "-n", namespace, "--set", f"watchNamespace={watched}"
    )
    try:
        subject = f"system:serviceaccount:{namespace}:{account}"
        for verb, resource in MAY:
            assert _can(tools, subject, verb, resource, watched), f"may not {verb} {resource}"
        for verb, resource in MAY_NOT:
            assert not _can(tools, subject, verb, resource, watched), f"may {verb} {resource}"
        elsewhere = "default"
        assert not _can(tools, subject, "get", "secrets", elsewhere)
        assert not _can(tools, subject, "list", "reportpools.reportfarm.io", elsewhere)

        connection = azurite_server.connection_string
        queue = f"q{uuid.uuid4().hex[:10]}"
        asyncio.run(_create_queue(connection, queue))
        core: Any = kubernetes.client.CoreV1Api(kube_api)
        core.create_namespaced_secret(
            watched,
            {"metadata": {"name": "storage"}, "stringData": {"connection-string": connection}},
        )
        config = _token_kubeconfig(tools, account, namespace, tmp_path / "operator.kubeconfig")
        log = (tmp_path / "operator.log").open("w+")
        env = {
            **os.environ,
            "KUBECONFIG": str(config),
            "REPORTFARM_OPERATOR_METRICS_PORT": "0",
            "REPORTFARM_OPERATOR_HEALTH_PORT": "0",
            "REPORTFARM_OPERATOR_POD_TIMEOUT": "1",
        }
        operator = subprocess.Popen(
            [sys.executable, "-m", "reportfarm_operator.main", "--namespace", watched],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _reconcile_and_delete_a_pool(tools, kube_api, watched, queue)
        finally:
            operator.send_signal(signal.SIGTERM)
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                operator.kill()
                operator.wait()
            log.seek(0)
            output = log.read()
        assert "Forbidden" not in output and " 403" not in output, output[-4000:]
    finally:
        tools.run("helm", "uninstall", release, "-n", namespace, "--wait", check=False)


def _reconcile_and_delete_a_pool(
    tools: Tools, kube_api: kubernetes.client.ApiClient, namespace: str, queue: str
) -> None:
    pool = yaml.safe_load(EXAMPLE_POOL.read_text())
    pool["spec"]["queue"] = {"name": queue, "connectionSecretRef": {"name": "storage"}}
    pool["spec"]["templates"] = {"inline": {"hello.html": "<h1>{{ name }}</h1>"}}
    tools.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(pool))
    custom: Any = kubernetes.client.CustomObjectsApi(kube_api)

    def reconciled() -> bool:
        names = tools.kubectl(
            "get",
            "deployments,services,poddisruptionbudgets,configmaps",
            "-n",
            namespace,
            "-l",
            "reportfarm.io/pool=reports",
            "-o",
            "name",
        ).split()
        status = custom.get_namespaced_custom_object(
            "reportfarm.io", "v1alpha1", namespace, "reportpools", "reports"
        ).get("status", {})
        reachable = any(
            c["type"] == "QueueReachable" and c["status"] == "True"
            for c in status.get("conditions", [])
        )
        return len(names) == 4 and reachable  # the secret was read, the status written

    eventually("the operator to reconcile the pool and read its queue", reconciled, timeout=180)
    tools.kubectl(
        "delete", "reportpool", "reports", "-n", namespace, "--wait=true", "--timeout=120s"
    )
