"""The children a ReportPool gets, as built (pure: no API server), and the CRD they come from."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from reportfarm_operator import children, reconciling, specs

from reportfarm import renderer_api

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "reportpools.reportfarm.io.yaml"
EXAMPLES = ROOT / "examples" / "k8s"
UID = "6f1c2a0e-0000-4000-8000-000000000001"


def pool(**spec: Any) -> kopf.Body:
    raw = {
        "apiVersion": "reportfarm.io/v1alpha1",
        "kind": "ReportPool",
        "metadata": {"name": "invoices", "namespace": "billing", "uid": UID, "generation": 1},
        "spec": {
            "queue": {"name": "reports", "connectionSecretRef": {"name": "storage"}},
            "image": "renderer:1",
            "templates": {"configMapName": "report-templates"},
            **spec,
        },
    }
    return kopf.Body(raw)


def by_kind(body: kopf.Body, *, replicas: int = 0) -> dict[str, dict[str, Any]]:
    built = children.build_all(body, specs.parse(body.spec), replicas=replicas)
    return {child["kind"]: child for child in built}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [renderer] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(renderer)


def env(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container(deployment)["env"]}


def test_every_child_is_owned_by_the_pool_in_its_namespace() -> None:
    built = by_kind(pool())
    assert set(built) == {"Deployment", "Service", "PodDisruptionBudget"}
    for child in built.values():
        meta = child["metadata"]
        assert meta["namespace"] == "billing"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "reportfarm.io/v1alpha1",
                "kind": "ReportPool",
                "name": "invoices",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"]["reportfarm.io/pool"] == "invoices"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "reportfarm-operator"


def test_names_and_selectors_agree() -> None:
    built = by_kind(pool())
    assert built["Deployment"]["metadata"]["name"] == "invoices-renderer"
    assert built["Service"]["metadata"]["name"] == "invoices-metrics"
    assert built["PodDisruptionBudget"]["metadata"]["name"] == "invoices-renderer"
    selector = built["Deployment"]["spec"]["selector"]["matchLabels"]
    pod_labels = built["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert built["Service"]["spec"]["selector"] == selector
    assert built["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == selector


def test_deployment_is_created_with_the_given_replicas_and_rolls_without_losing_capacity() -> None:
    deployment = by_kind(pool(), replicas=3)["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0
    assert "replicas" not in reconciling.without_replicas(deployment)["spec"]
    assert deployment["spec"]["replicas"] == 3  # the builder's result is not mutated


def test_renderer_environment() -> None:
    spec = {
        "outputContainer": "pdfs",
        "visibilityTimeoutSeconds": 90,
        "terminationGracePeriodSeconds": 120,
        "adminTokenSecretRef": {"name": "admin"},
        "hintKeySecretRef": {"name": "hints"},
        "queue": {"name": "jobs", "connectionSecretRef": {"name": "storage", "key": "cs"}},
    }
    deployment = by_kind(pool(**spec))["Deployment"]
    variables = env(deployment)
    secret = variables["AZURE_STORAGE_CONNECTION_STRING"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "storage", "key": "cs"}
    token = variables["REPORTFARM_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert token == {"name": "admin", "key": "token"}  # the CRD's default key
    hints = variables["REPORTFARM_HINT_KEY"]["valueFrom"]["secretKeyRef"]
    assert hints == {"name": "hints", "key": "hint-key"}  # the gateway's key, from a Secret
    assert "REPORTFARM_HINT_KEY" not in env(by_kind(pool())["Deployment"])  # unset: derived
    assert variables["REPORTFARM_QUEUE"]["value"] == "jobs"
    assert variables["REPORTFARM_CONTAINER"]["value"] == "pdfs"
    assert variables["REPORTFARM_VISIBILITY_TIMEOUT"]["value"] == "90"
    assert variables["REPORTFARM_PORT"]["value"] == "8080"
    assert variables["REPORTFARM_TEMPLATES"]["value"] == specs.TEMPLATES_PATH
    drain = int(variables["REPORTFARM_DRAIN_TIMEOUT"]["value"])
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == 120
    assert 0 < drain < grace  # the renderer finishes its jobs before the kubelet kills it
    assert container(deployment)["command"] == ["/usr/bin/tini", "--", "reportfarm", "worker"]


def test_workload_identity_uses_the_account_url_and_service_account() -> None:
    spec = {
        "queue": {"name": "jobs", "accountUrl": "https://acct.queue.core.windows.net"},
        "serviceAccountName": "renderer",
    }
    deployment = by_kind(pool(**spec))["Deployment"]
    variables = env(deployment)
    assert "AZURE_STORAGE_CONNECTION_STRING" not in variables
    assert variables["AZURE_STORAGE_ACCOUNT_URL"]["value"] == "https://acct.queue.core.windows.net"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "renderer"
    # AKS's webhook injects the federated token only into pods that ask for it.
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels[children.WORKLOAD_IDENTITY_LABEL] == "true"
    assert children.WORKLOAD_IDENTITY_LABEL not in deployment["spec"]["selector"]["matchLabels"]
    assert "AZURE_STORAGE_BLOB_URL" not in variables  # derived from the queue endpoint


def test_a_connection_string_pool_does_not_ask_for_workload_identity() -> None:
    deployment = by_kind(pool())["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert children.WORKLOAD_IDENTITY_LABEL not in labels
    assert "AZURE_STORAGE_ACCOUNT_URL" not in env(deployment)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, 4, id="defaults: 2 CPUs / 500m, 4Gi / 512Mi, max 4"),
        pytest.param({"browser": {"cpu": "1", "memory": "512Mi"}}, 2, id="cpu-bound"),
        pytest.param({"browser": {"cpu": "250m", "memory": "1536Mi"}}, 2, id="memory-bound"),
        pytest.param({"browsersPerPod": {"min": 1, "max": 3}}, 3, id="max-bound"),
        pytest.param({"browser": {"cpu": "4", "memory": "8Gi"}}, 1, id="at least one"),
        pytest.param(
            {"resources": {"requests": {"cpu": "3", "memory": "8Gi"}}}, 4, id="requests, no limits"
        ),
    ],
)
def test_new_pods_start_with_the_most_browsers_that_fit(
    spec: dict[str, Any], expected: int
) -> None:
    variables = env(by_kind(pool(**spec))["Deployment"])
    assert variables[renderer_api.Var.POOL_SIZE]["value"] == str(expected)


def test_resources_are_taken_as_given_or_defaulted_whole() -> None:
    given = {"requests": {"cpu": "3", "memory": "3Gi"}}  # no limits: none are added
    assert container(by_kind(pool(resources=given))["Deployment"])["resources"] == given
    defaulted = container(by_kind(pool())["Deployment"])["resources"]
    assert defaulted == specs.DEFAULTS["resources"]


def test_probes_ports_and_mounts() -> None:
    deployment = by_kind(pool())["Deployment"]
    renderer = container(deployment)
    assert renderer["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert renderer["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert renderer["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert renderer["startupProbe"]["httpGet"]["path"] == "/healthz"
    # Asked every second while the pod starts (Ready within a second of listening), for a minute.
    startup = renderer["startupProbe"]
    assert startup["periodSeconds"] == 1
    assert startup["periodSeconds"] * startup["failureThreshold"] == 60
    mounts = {m["name"]: m["mountPath"] for m in renderer["volumeMounts"]}
    assert mounts["templates"] == specs.TEMPLATES_PATH
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["templates"]["configMap"]["name"] == "report-templates"
    assert renderer["securityContext"]["allowPrivilegeEscalation"] is False


def test_a_signing_secret_is_mounted_read_only_where_the_renderer_looks() -> None:
    deployment = by_kind(pool(signingSecretRef={"name": "reportfarm-signing"}))["Deployment"]
    mounts = {m["name"]: m for m in container(deployment)["volumeMounts"]}
    assert mounts["signing"] == {
        "name": "signing",
        "mountPath": renderer_api.SIGNING_DIR,  # the renderer's default: no variable needed
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["signing"]["secret"]["secretName"] == "reportfarm-signing"
    assert volumes["signing"]["secret"]["optional"] is False  # a missing Secret: no pod starts
    assert renderer_api.Var.SIGNING_DIR not in env(deployment)


def test_a_timestamp_authority_reaches_the_renderer_as_its_variable() -> None:
    url = "https://tsa.example.com/rfc3161"
    deployment = by_kind(
        pool(signingSecretRef={"name": "reportfarm-signing"}, signingTimestampUrl=url)
    )["Deployment"]
    assert env(deployment)[renderer_api.Var.TSA_URL] == {
        "name": renderer_api.Var.TSA_URL,
        "value": url,
    }
    assert renderer_api.Var.TSA_URL not in env(by_kind(pool())["Deployment"])
    timestamp = _spec_schema()["properties"]["signingTimestampUrl"]
    assert re.match(timestamp["pattern"], url) and not re.match(timestamp["pattern"], "ftp://x")


def test_without_a_signing_secret_nothing_is_mounted() -> None:
    deployment = by_kind(pool())["Deployment"]
    mounts = [m["mountPath"] for m in container(deployment)["volumeMounts"]]
    assert renderer_api.SIGNING_DIR not in mounts
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert "signing" not in {v["name"] for v in volumes}


def test_inline_templates_get_an_owned_config_map_and_roll_the_pods_when_changed() -> None:
    first = by_kind(pool(templates={"inline": {"a.html": "<p>{{ x }}</p>"}}))
    config_map = first["ConfigMap"]
    assert config_map["metadata"]["name"] == "invoices-templates"
    assert config_map["data"] == {"a.html": "<p>{{ x }}</p>"}
    assert config_map["metadata"]["ownerReferences"][0]["uid"] == UID
    volumes = first["Deployment"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "templates", "configMap": {"name": "invoices-templates"}} in volumes

    def checksum(built: dict[str, dict[str, Any]]) -> str:
        return str(
            built["Deployment"]["spec"]["template"]["metadata"]["annotations"][
                children.TEMPLATES_CHECKSUM
            ]
        )

    same = by_kind(pool(templates={"inline": {"a.html": "<p>{{ x }}</p>"}}))
    changed = by_kind(pool(templates={"inline": {"a.html": "<p>{{ y }}</p>"}}))
    assert checksum(first) == checksum(same) != checksum(changed)


def test_metrics_service_is_headless_and_budget_evicts_one_at_a_time() -> None:
    built = by_kind(pool())
    service = built["Service"]["spec"]
    assert service["clusterIP"] == "None"
    assert service["ports"] == [
        {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    ]
    budget = built["PodDisruptionBudget"]["spec"]
    assert budget["maxUnavailable"] == 1
    assert budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_owner_labels_are_inherited_but_never_override_ours() -> None:
    body = pool()
    raw = copy.deepcopy(dict(body))
    raw["metadata"]["labels"] = {"team": "billing", "reportfarm.io/pool": "spoofed"}
    built = by_kind(kopf.Body(raw))
    labels = built["Deployment"]["metadata"]["labels"]
    assert labels["team"] == "billing"
    assert labels["reportfarm.io/pool"] == "invoices"


# --- the CRD and the examples ----------------------------------------------------------------


def _spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    [version] = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def test_the_operator_defaults_are_the_crd_defaults() -> None:
    schema = _spec_schema()
    for key, value in specs.DEFAULTS.items():
        node = schema["properties"][key]
        if isinstance(value, dict) and key != "resources":  # defaulted field by field
            for field, default in value.items():
                assert node["properties"][field]["default"] == default, f"{key}.{field}"
        else:
            assert node["default"] == value, key


def test_the_scale_down_fields_reach_the_policy() -> None:
    body = pool(
        scaleDown={
            "stabilizationSeconds": 30,
            "recurringBacklogHoldSeconds": 90,
            "recurringBacklogWithinSeconds": 240,
        }
    )
    given = specs.parse(body.spec).policy
    assert given.scale_down_stabilization_s == 30.0
    assert (given.recurring_backlog_hold_s, given.recurring_backlog_within_s) == (90.0, 240.0)
    defaulted = specs.parse(pool().spec).policy  # an object stored before the fields existed
    assert (
        defaulted.recurring_backlog_hold_s
        == specs.DEFAULTS["scaleDown"]["recurringBacklogHoldSeconds"]
    )
    assert defaulted.recurring_backlog_within_s == 300.0


def test_the_crd_keeps_status_fields_and_validates_limits() -> None:
    crd = yaml.safe_load(CRD.read_text())
    [version] = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}  # no scale subresource: see the CRD's header
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    rules = {
        rule["rule"]
        for node in (
            _spec_schema()["properties"][k] for k in ("replicas", "browsersPerPod", "queue")
        )
        for rule in node["x-kubernetes-validations"]
    }
    assert "self.min <= self.max" in rules
    assert "has(self.connectionSecretRef) != has(self.accountUrl)" in rules
    signing = _spec_schema()["properties"]["signingSecretRef"]
    assert signing["required"] == ["name"] and set(signing["properties"]) == {"name"}
    columns = {column["name"]: column["jsonPath"] for column in version["additionalPrinterColumns"]}
    assert columns["Replicas"] == ".status.replicas"
    assert columns["Browsers"] == ".status.browsers"  # running/desired, as the pods report
    assert columns["Reason"] == ".status.reason"
    assert columns["Queue"] == ".status.queueDepth"
    assert columns["Ready"] == ".status.readyReplicas"


def test_the_example_report_pool_builds() -> None:
    documents = [
        doc
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    kinds = {doc["kind"] for doc in documents}
    assert {"ReportPool", "Secret", "ConfigMap"} <= kinds
    [example] = [doc for doc in documents if doc["kind"] == "ReportPool"]
    raw = {**example, "metadata": {**example["metadata"], "namespace": "default", "uid": UID}}
    built = by_kind(kopf.Body(raw))
    secrets = {d["metadata"]["name"] for d in documents if d["kind"] == "Secret"}
    maps = {d["metadata"]["name"] for d in documents if d["kind"] == "ConfigMap"}
    assert example["spec"]["queue"]["connectionSecretRef"]["name"] in secrets
    assert example["spec"]["adminTokenSecretRef"]["name"] in secrets
    assert example["spec"]["templates"]["configMapName"] in maps
    assert env(built["Deployment"])[renderer_api.Var.POOL_SIZE]["value"] == "4"


@pytest.mark.parametrize(
    ("given", "floor"),
    [
        pytest.param(None, 2.0, id="default"),
        pytest.param(0, None, id="zero-turns-it-off"),
        pytest.param(5, 5.0, id="given"),
    ],
)
def test_the_depth_floor_reaches_the_policy(given: int | None, floor: float | None) -> None:
    body = pool() if given is None else pool(target={"jobsPerBrowser": given})
    assert specs.parse(body.spec).policy.jobs_per_browser == floor


@pytest.mark.parametrize(
    ("given", "expected_cpu_s", "start_size"),
    [
        pytest.param({}, None, "4", id="prints: browsers alone"),
        pytest.param({"signingSecretRef": {"name": "k"}}, 0.35, "1", id="signs: the default"),
        pytest.param(
            {"signingSecretRef": {"name": "k"}, "finishing": {"expectedCpuSeconds": 0}},
            0.0,
            "4",
            id="signs, said to cost nothing",
        ),
        pytest.param({"finishing": {"expectedCpuSeconds": 0.2}}, 0.2, "2", id="PDF/A only"),
    ],
)
def test_a_pool_that_signs_starts_its_pods_with_the_browsers_its_signatures_leave_room_for(
    given: dict[str, Any], expected_cpu_s: float | None, start_size: str
) -> None:
    """1-CPU pods of 0.25-CPU browsers (the real node's signing pool): 4 browsers print, but a
    job that also signs needs its ~0.35 s of CPU, so a new pod of a signing pool starts with 1
    until the renderers measure what their jobs take."""
    body = pool(
        resources={"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "2Gi"}},
        browser={"cpu": "250m", "memory": "400Mi"},
        **given,
    )
    spec = specs.parse(body.spec)
    assert spec.policy.expected_finish_cpu_s == expected_cpu_s
    assert env(by_kind(body)["Deployment"])[renderer_api.Var.POOL_SIZE]["value"] == start_size
    schema = _spec_schema()["properties"]["finishing"]["properties"]["expectedCpuSeconds"]
    assert schema["minimum"] == 0
