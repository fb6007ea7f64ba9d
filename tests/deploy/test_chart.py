"""The Helm chart, offline: lint, render (defaults and every integration on), the operator's
Deployment and RBAC, the values schema, the documented values, and the CRD copy.

helm comes from the cached build of ``scripts/kube/build.sh`` (see ``tests.harness.kube.bin_dir``;
a cold cache builds the whole toolchain, hence the long timeout) or ``REPORTFARM_HELM``.
Rendering against a live API server (kubeconform, install, uninstall) is tests/kube/test_chart_install.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import kube as kube_harness

pytestmark = pytest.mark.timeout(3600)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "reportfarm"
KUBE_VERSION = "1.37.0"
ALL_ON = [
    "metrics.serviceMonitor.enabled=true",
    "metrics.podMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "dashboards.enabled=true",
]


@pytest.fixture(scope="session")
def helm() -> Path:
    override = os.environ.get("REPORTFARM_HELM")
    return Path(override) if override else kube_harness.bin_dir() / "helm"


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def render(helm: Path, *sets: str, namespace: str = "farm") -> list[dict[str, Any]]:
    args = ["template", "rf", str(CHART), "-n", namespace, "--kube-version", KUBE_VERSION]
    for item in sets:
        args += ["--set", item]
    done = run_helm(helm, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)


# --- lint and render -------------------------------------------------------------------------


@pytest.mark.parametrize("sets", [pytest.param([], id="defaults"), pytest.param(ALL_ON, id="all")])
def test_lint_is_clean(helm: Path, sets: list[str]) -> None:
    args = ["lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION]
    for item in sets:
        args += ["--set", item]
    done = run_helm(helm, *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_defaults_render_the_operator_and_no_integration(helm: Path) -> None:
    docs = render(helm)
    assert kinds(docs) == [
        "Deployment",
        "Pod",  # the helm test hook
        "PodDisruptionBudget",  # the operator's, never blocking a drain
        "Role",  # least privilege by default: the release's namespace only
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]


def test_all_integrations_render(helm: Path) -> None:
    docs = render(helm, *ALL_ON)
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
        one(docs, kind)
    monitor = one(docs, "PodMonitor")["spec"]
    assert monitor["selector"]["matchLabels"]["app.kubernetes.io/component"] == "renderer"
    assert monitor["namespaceSelector"] == {"any": True}
    assert monitor["podMetricsEndpoints"][0]["port"] == "http"
    service_monitor = one(docs, "ServiceMonitor")["spec"]
    assert service_monitor["endpoints"][0]["honorLabels"] is True
    assert service_monitor["selector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"


def test_prometheus_rule_carries_the_tested_rule_file(helm: Path) -> None:
    docs = render(
        helm, "prometheusRule.enabled=true", "prometheusRule.additionalRuleLabels.team=pdf"
    )
    rendered = one(docs, "PrometheusRule")["spec"]["groups"]
    source = yaml.safe_load((CHART / "rules" / "alerts.yaml").read_text())["groups"]
    for group in source:
        for rule in group["rules"]:
            rule["labels"] = {**rule.get("labels", {}), "team": "pdf"}
    assert rendered == source


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        pytest.param(None, "https://reportfarm.github.io/reportfarm/operating/runbooks", id="site"),
        pytest.param(
            "https://docs.example.com/rf/runbooks/",
            "https://docs.example.com/rf/runbooks",
            id="own",
        ),
    ],
)
def test_prometheus_rule_alerts_name_their_runbooks(
    helm: Path, base: str | None, expected: str
) -> None:
    """Each alert's runbook_url: its page on the project's site (the docs' test resolves those),
    or under prometheusRule.runbookBaseUrl, keeping the page's name."""
    sets = ["prometheusRule.enabled=true"]
    if base is not None:
        sets.append(f"prometheusRule.runbookBaseUrl={base}")
    groups = one(render(helm, *sets), "PrometheusRule")["spec"]["groups"]
    urls = {
        rule["alert"]: rule["annotations"]["runbook_url"]
        for group in groups
        for rule in group["rules"]
    }
    assert len(urls) >= 6
    assert urls == {alert: f"{expected}/{alert.lower()}/" for alert in urls}


def test_dashboards_are_config_maps_for_the_grafana_sidecar(helm: Path) -> None:
    docs = render(helm, "dashboards.enabled=true", "dashboards.namespace=monitoring")
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    files = sorted((CHART / "dashboards").glob("*.json"))
    assert len(maps) == len(files) >= 2
    for config_map, path in zip(
        sorted(maps, key=lambda m: m["metadata"]["name"]), files, strict=True
    ):
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["namespace"] == "monitoring"
        (body,) = config_map["data"].values()
        assert json.loads(body) == json.loads(path.read_text())


# --- the operator's Deployment ---------------------------------------------------------------


def test_operator_deployment_is_one_locked_down_replica(helm: Path) -> None:
    deployment = one(render(helm), "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["command"] == ["reportfarm", "operator"]
    assert container["args"] == ["--namespace=farm"]  # its own namespace, standalone
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8081, "health": 8082}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["REPORTFARM_OPERATOR_METRICS_PORT"] == "8081"
    assert env["REPORTFARM_OPERATOR_HEALTH_PORT"] == "8082"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    selector = spec["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/component"] == "operator"
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()


def test_watch_namespace_and_peering_become_arguments(helm: Path) -> None:
    docs = render(helm, "watchNamespace=reports", "peering.enabled=true", "peering.name=rf")
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--namespace=reports", "--peering=rf"]


def test_helm_test_hook_checks_the_metrics_service(helm: Path) -> None:
    docs = render(helm)
    pod = one(docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    service = one(docs, "Service")
    script = pod["spec"]["containers"][0]["command"][-1]
    assert f"http://{service['metadata']['name']}.farm.svc:8081/metrics" in script
    assert service["spec"]["selector"] == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]


# --- RBAC ------------------------------------------------------------------------------------

NAMESPACED = {  # exactly what the operator calls (see charts/reportfarm/templates/_rbac.tpl)
    ("reportfarm.io", "reportpools"): {"list", "watch", "patch"},
    ("reportfarm.io", "reportpools/status"): {"patch"},
    ("apps", "deployments"): {"get", "create", "patch"},
    ("", "services"): {"get", "create", "patch"},
    ("policy", "poddisruptionbudgets"): {"get", "create", "patch"},
    ("", "configmaps"): {"get", "create", "update", "delete"},
    ("", "pods"): {"list", "patch"},
    ("", "events"): {"create"},
    ("", "secrets"): {"get"},
}
PEERING = {("kopf.dev", "kopfpeerings"): {"get", "list", "watch", "patch"}}
CLUSTER_PEERING = {("kopf.dev", "clusterkopfpeerings"): {"get", "list", "watch", "patch"}}


def permissions(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found.setdefault((group, resource), set()).update(rule["verbs"])
    return found


@pytest.mark.parametrize(
    ("sets", "cluster", "namespaced"),
    [
        pytest.param(["rbac.clusterWide=true"], NAMESPACED, None, id="cluster-wide"),
        pytest.param(
            ["rbac.clusterWide=true", "peering.enabled=true"],
            {**NAMESPACED, **CLUSTER_PEERING},
            None,
            id="cluster-wide-peering",
        ),
        pytest.param(["watchNamespace=reports"], None, NAMESPACED, id="one-namespace"),
        pytest.param(
            ["watchNamespace=reports", "peering.enabled=true"],
            None,
            {**NAMESPACED, **PEERING},
            id="one-namespace-peering",
        ),
    ],
)
def test_rbac_is_least_privilege(
    helm: Path,
    sets: list[str],
    cluster: dict[tuple[str, str], set[str]] | None,
    namespaced: dict[tuple[str, str], set[str]] | None,
) -> None:
    docs = render(helm, *sets)
    if cluster is None:  # one namespace: nothing cluster-scoped at all
        assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    else:
        assert permissions(one(docs, "ClusterRole")) == cluster
    roles = [d for d in docs if d["kind"] == "Role"]
    if namespaced is None:
        assert not roles
        return
    (role,) = roles
    assert role["metadata"]["namespace"] == "reports"
    assert permissions(role) == namespaced
    binding = one(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == "reports"
    assert binding["subjects"][0]["namespace"] == "farm"


WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}


def test_the_default_rbac_grants_nothing_cluster_wide(helm: Path) -> None:
    """No ClusterRole: no secrets read, pod patch or deployment create outside the namespace the
    operator watches (by default the release's own), and the operator is told to watch it."""
    docs = render(helm)
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "farm"
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
    assert binding["metadata"]["namespace"] == "farm"
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--namespace=farm"]


def test_each_listed_namespace_gets_its_role_and_is_watched(helm: Path) -> None:
    docs = render(helm, "watchNamespaces={reports,billing}", "watchNamespace=audit")
    for kind in ("Role", "RoleBinding"):
        placed = sorted(d["metadata"]["namespace"] for d in docs if d["kind"] == kind)
        assert placed == ["audit", "billing", "reports"], (kind, placed)
    for binding in (d for d in docs if d["kind"] == "RoleBinding"):
        assert binding["subjects"][0]["namespace"] == "farm"
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert sorted(container["args"]) == [
        "--namespace=audit",
        "--namespace=billing",
        "--namespace=reports",
    ]
    assert not [d for d in docs if d["kind"].startswith("Cluster")]


def test_cluster_wide_is_asked_for_and_never_mixed_with_a_namespace_list(helm: Path) -> None:
    docs = render(helm, "rbac.clusterWide=true")
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "args" not in container  # every namespace
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    args = ["template", "rf", str(CHART), "-n", "farm", "--kube-version", KUBE_VERSION]
    done = run_helm(helm, *args, "--set", "rbac.clusterWide=true", "--set", "watchNamespace=x")
    assert done.returncode != 0 and "rbac.clusterWide" in done.stderr, done.stderr


def test_rbac_can_be_left_to_the_cluster_admin(helm: Path) -> None:
    docs = render(
        helm, "rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=op"
    )
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"} & set(
        kinds(docs)
    )
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "op"


# --- values and their schema -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "message"),
    [
        pytest.param("replicaCount=2", "replicaCount", id="unknown-top-level-key"),
        pytest.param("image.registry=x", "registry", id="unknown-nested-key"),
        pytest.param("metrics.serviceMonitor.jobLabel=x", "jobLabel", id="unknown-deep-key"),
        pytest.param("resources.limits.gpu=1", "gpu", id="unknown-resource"),
        pytest.param("metrics.port=0", "minimum", id="port-out-of-range"),
        pytest.param("image.pullPolicy=Sometimes", "must be one of", id="not-in-enum"),
        pytest.param("watchNamespace=Not_A_Namespace", "pattern", id="bad-namespace"),
    ],
)
def test_schema_rejects(helm: Path, item: str, message: str) -> None:
    args = ["template", "rf", str(CHART), "--kube-version", KUBE_VERSION, "--set", item]
    done = run_helm(helm, *args)
    assert done.returncode != 0
    assert "schema" in done.stderr and message in done.stderr, done.stderr


def _objects(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if schema.get("type") == "object" or "properties" in schema:
        yield path or "<root>", schema
    for key, child in schema.get("properties", {}).items():
        yield from _objects(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _objects(schema[key], f"{path}[]")


def test_schema_closes_every_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    for path, node in _objects(schema):
        assert "additionalProperties" in node, f"{path} accepts unknown keys"
        if node["additionalProperties"] is True:
            # Only Kubernetes objects passed through verbatim (the API server validates them).
            assert "Kubernetes object" in node.get("description", ""), path


_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")


def _value_keys() -> Iterator[tuple[str, bool, bool]]:
    """(dotted key, documented by a `# --` comment right above, has child keys)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        match = _KEY.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        comments = []
        for above in reversed(lines[:number]):
            if not above.strip().startswith("#"):
                break
            comments.append(above)
        following = next(
            (ln for ln in lines[number + 1 :] if ln.strip() and not ln.lstrip().startswith("#")),
            "",
        )
        has_children = bool(
            not match["rest"].strip()
            and (m := _KEY.match(following))
            and len(m["indent"]) > indent
            and not following.lstrip().startswith("-")
        )
        documented = any("# --" in c for c in comments)
        yield ".".join(k for _, k in stack), documented, has_children


def test_every_value_is_documented() -> None:
    documented: set[str] = set()
    undocumented = []
    for key, has_doc, has_children in _value_keys():
        if has_doc:
            documented.add(key)
        parent_documented = any(key.startswith(d + ".") for d in documented)
        if not has_children and not has_doc and not parent_documented:
            undocumented.append(key)
    assert not undocumented, f"values without a `# --` comment: {undocumented}"


def test_schema_and_values_name_the_same_options() -> None:
    """Each option of the chart's own sections is in both values.yaml and the schema."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(schema["properties"]) - {"global"} == set(values)
    for section in ("image", "operator", "peering", "serviceAccount", "rbac", "metrics"):
        assert set(schema["properties"][section]["properties"]) == set(values[section]), section
    for section in ("prometheusRule", "dashboards", "tests", "probes"):
        assert set(schema["properties"][section]["properties"]) == set(values[section]), section


# --- the CRDs --------------------------------------------------------------------------------


def test_chart_crds_are_an_exact_copy_of_the_top_level_crds() -> None:
    source = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    copy = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert source, "no CRDs in crds/"
    assert sorted(copy) == sorted(source), "run scripts/sync-chart-crds.sh"
    drifted = [name for name in source if copy[name] != source[name]]
    assert not drifted, f"chart CRDs drift from crds/ ({drifted}): run scripts/sync-chart-crds.sh"


def test_sync_script_check_mode_agrees() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sync-chart-crds.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


# --- the gateway -----------------------------------------------------------------------------

GATEWAY_ON = ["gateway.enabled=true", "gateway.tokensSecretRef.name=tenant-tokens"]


def test_gateway_is_off_by_default(helm: Path) -> None:
    docs = render(helm)
    assert not [d for d in docs if "gateway" in d["metadata"]["name"]]


def test_gateway_without_tokens_is_refused_clearly(helm: Path) -> None:
    args = ["template", "rf", str(CHART), "--kube-version", KUBE_VERSION]
    done = run_helm(helm, *args, "--set", "gateway.enabled=true")
    assert done.returncode != 0
    assert "gateway.tokensSecretRef.name is required" in done.stderr, done.stderr


def test_gateway_lints_clean_with_its_ingress(helm: Path) -> None:
    args = ["lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION]
    for item in [*GATEWAY_ON, "gateway.ingress.enabled=true", "gateway.ingress.host=pdf.example"]:
        args += ["--set", item]
    done = run_helm(helm, *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_gateway_hints_reach_the_pools_renderers_and_this_replica(helm: Path) -> None:
    """The wake goes to the pool's headless Service (the operator's name for it); the done hint
    comes back to the replica's pod IP; each can be turned off."""
    from reportfarm_operator import specs

    from reportfarm import renderer_api

    def gateway_env(*sets: str) -> dict[str, dict[str, Any]]:
        docs = render(helm, *GATEWAY_ON, *sets)
        deployment = next(
            d
            for d in docs
            if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("gateway")
        )
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        return {e["name"]: e for e in container["env"]}

    env = gateway_env("gateway.hints.pool=invoices")
    service = specs.Names("invoices").service
    assert env["REPORTFARM_GATEWAY_WAKE"]["value"] == f"{service}.farm.svc:{renderer_api.PORT}"
    assert env["REPORTFARM_GATEWAY_WAKE_FANOUT"]["value"] == "2"
    assert env["REPORTFARM_GATEWAY_HANDOFF_S"]["value"] == "10"
    wakes_only = gateway_env("gateway.hints.pool=invoices", "gateway.hints.handoffSeconds=0")
    assert wakes_only["REPORTFARM_GATEWAY_HANDOFF_S"]["value"] == "0"
    assert env["REPORTFARM_POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["REPORTFARM_GATEWAY_NOTIFY_ADDRESS"]["value"] == "$(REPORTFARM_POD_IP):8000"
    off = gateway_env("gateway.hints.notify=false")
    assert not {"REPORTFARM_GATEWAY_WAKE", "REPORTFARM_GATEWAY_NOTIFY_ADDRESS"} & set(off)


def test_gateway_deployment_reads_tokens_and_storage_from_secrets(helm: Path) -> None:
    docs = render(
        helm,
        *GATEWAY_ON,
        "gateway.webhookSecretsRef.name=hooks",
        "gateway.hintKeySecretRef.name=hints",
    )
    gateway = [d for d in docs if d["metadata"]["name"] == "rf-reportfarm-gateway"]
    assert sorted(d["kind"] for d in gateway) == ["Deployment", "PodDisruptionBudget", "Service"]
    deployment = next(d for d in gateway if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    (container,) = spec["containers"]
    assert container["command"] == ["reportfarm", "gateway"]
    assert container["image"].startswith("ghcr.io/reportfarm/gateway:")
    env = {e["name"]: e for e in container["env"]}
    secret = {
        name: env[name]["valueFrom"]["secretKeyRef"]
        for name in env
        if "secretKeyRef" in env[name].get("valueFrom", {})
    }
    assert secret == {
        "AZURE_STORAGE_CONNECTION_STRING": {
            "name": "reportfarm-storage",
            "key": "connection-string",
        },
        "REPORTFARM_TOKENS": {"name": "tenant-tokens", "key": "tokens"},
        "REPORTFARM_WEBHOOK_SECRETS": {"name": "hooks", "key": "secrets"},
        "REPORTFARM_HINT_KEY": {"name": "hints", "key": "hint-key"},
    }
    assert env["REPORTFARM_QUEUE"]["value"] == "reports"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    # Longer than the longest synchronous wait it honours (REPORTFARM_GATEWAY_MAX_WAIT_S, 120 s).
    assert spec["terminationGracePeriodSeconds"] > 120
    service = next(d for d in gateway if d["kind"] == "Service")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert selector["app.kubernetes.io/component"] == "gateway"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


def test_gateway_signs_in_with_workload_identity_when_given_an_account_url(helm: Path) -> None:
    url = "https://acct.queue.core.windows.net"
    docs = render(helm, *GATEWAY_ON, f"gateway.accountUrl={url}", "gateway.serviceAccountName=gw")
    deployment = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("gateway")
    )
    template = deployment["spec"]["template"]
    env = {item["name"]: item for item in template["spec"]["containers"][0]["env"]}
    assert env["AZURE_STORAGE_ACCOUNT_URL"]["value"] == url
    assert "AZURE_STORAGE_CONNECTION_STRING" not in env  # no key anywhere
    assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    assert template["spec"]["serviceAccountName"] == "gw"


def test_gateway_ingress_routes_to_its_service(helm: Path) -> None:
    docs = render(
        helm,
        *GATEWAY_ON,
        "gateway.ingress.enabled=true",
        "gateway.ingress.host=pdf.example",
        "gateway.ingress.tlsSecretName=pdf-tls",
        "gateway.ingress.className=nginx",
    )
    ingress = one(docs, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"secretName": "pdf-tls", "hosts": ["pdf.example"]}]
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "pdf.example"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "rf-reportfarm-gateway", "port": {"name": "http"}}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        pytest.param("gateway.replicas=2", "replicas", id="unknown-key"),
        pytest.param("gateway.image.pullPolicy=Sometimes", "must be one of", id="pull-policy"),
        pytest.param("gateway.queue=Bad_Queue", "pattern", id="bad-queue-name"),
        pytest.param("gateway.service.type=Nope", "must be one of", id="service-type"),
    ],
)
def test_gateway_schema_rejects(helm: Path, item: str, message: str) -> None:
    args = ["template", "rf", str(CHART), "--kube-version", KUBE_VERSION, "--set", item]
    done = run_helm(helm, *args)
    assert done.returncode != 0
    assert "schema" in done.stderr and message in done.stderr, done.stderr


def test_gateway_schema_and_values_name_the_same_options() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["gateway"]
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["gateway"]
    assert set(schema["properties"]) == set(values)
    for section in ("image", "service", "ingress", "connectionSecretRef", "tokensSecretRef"):
        assert set(schema["properties"][section]["properties"]) == set(values[section]), section


# --- the CRD's own documentation -------------------------------------------------------------


def _leaves(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, child in (node.get("properties") or {}).items():
        yield from _leaves(child, f"{path}.{name}")
    if not node.get("properties"):
        yield path, node


def test_every_default_and_bound_is_in_the_field_description() -> None:
    """``kubectl explain`` shows descriptions, not the schema's default/minimum/maximum/enum."""
    crd = yaml.safe_load((ROOT / "crds" / "reportpools.reportfarm.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    checked = 0
    for path, field in _leaves(spec, "spec"):
        text = field.get("description", "")
        for key in ("default", "minimum", "maximum"):
            if key in field:
                checked += 1
                assert str(field[key]) in text, (path, key, field[key], text)
        for value in field.get("enum", []):
            assert str(value) in text, (path, value, text)
    assert checked >= 20


def test_a_drain_keeps_a_gateway_and_never_waits_on_the_operator(helm: Path) -> None:
    """Budgets: the gateway loses one replica at a time, the operator's one replica may always
    go. Soft spread on the host name; a preStop sleep before SIGTERM; off when asked."""
    docs = render(helm, *GATEWAY_ON)
    budgets = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "PodDisruptionBudget"}
    gateway = next(d for d in docs if d["metadata"]["name"] == "rf-reportfarm-gateway"
                   and d["kind"] == "Deployment")  # fmt: skip
    labels = gateway["spec"]["selector"]["matchLabels"]
    assert budgets["rf-reportfarm-gateway"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": labels},
    }
    operator = next(d for d in docs if d["metadata"]["name"] == "rf-reportfarm"
                    and d["kind"] == "Deployment")  # fmt: skip
    assert operator["spec"]["replicas"] == 1
    assert budgets["rf-reportfarm"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": operator["spec"]["selector"]["matchLabels"]},
    }
    spec = gateway["spec"]["template"]["spec"]
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"] == {"matchLabels": labels}
    (container,) = spec["containers"]
    sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert 0 < sleep < spec["terminationGracePeriodSeconds"]

    off = render(
        helm, *GATEWAY_ON, "gateway.podDisruptionBudget.enabled=false",
        "podDisruptionBudget.enabled=false", "gateway.spreadAcrossNodes=false",
        "gateway.preStopSleepSeconds=0",
    )  # fmt: skip
    assert not [d for d in off if d["kind"] == "PodDisruptionBudget"]
    gateway = next(d for d in off if d["metadata"]["name"] == "rf-reportfarm-gateway"
                   and d["kind"] == "Deployment")  # fmt: skip
    assert "topologySpreadConstraints" not in gateway["spec"]["template"]["spec"]
    assert "lifecycle" not in gateway["spec"]["template"]["spec"]["containers"][0]
