"""Security of the deployment: least-privilege RBAC derived from the code, locked-down pods, and
secrets that only ever come from Secrets.

RBAC: the permissions the operator needs are derived, not listed from memory. ``CALL_SITES`` names
every call the operator makes through its Kubernetes adapter (``reportfarm_operator.k8s.Kube``);
a syntax-tree scan of the operator's modules must find exactly those calls, so a new call fails
this test until the table (and the chart) say what it needs. The adapter's methods are checked for
the HTTP verb each one sends, the children's kinds come from ``children.build_all``, and kopf's
own needs follow from how ``handlers`` configures it. The chart's rendered (Cluster)Roles, in each
mode, must grant all of that and nothing more.

Pods: the operator's Deployment and the ``helm test`` Pod from the chart, and the renderer
Deployment the operator builds (``children.deployment``): non-root, read-only root filesystem,
no privilege escalation, every capability dropped, seccomp RuntimeDefault, nothing from the host;
the renderer's writable paths (/tmp, /dev/shm for Chromium) are emptyDirs.

Secrets: the connection string and the admin token reach the renderer through
``valueFrom.secretKeyRef`` only; the chart renders no Secret, and nothing in values.yaml or in a
rendered manifest looks like a key.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from reportfarm_operator import children, k8s, specs

from reportfarm import renderer_api
from tests.harness import kube as kube_harness

pytestmark = pytest.mark.timeout(3600)  # a cold cache builds helm first

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "reportfarm"
OPERATOR = ROOT / "operator" / "reportfarm_operator"
KUBE_VERSION = "1.37.0"

Permission = tuple[str, str, str]
"""(API group, resource, verb)."""

# -- what the operator uses --------------------------------------------------------------------

VERBS = {
    # Kube method: (HTTP method it sends, RBAC verb). secret_value reads through ``get``.
    "get": ("GET", "get"),
    "list": ("GET", "list"),
    "create": ("POST", "create"),
    "replace": ("PUT", "update"),
    "merge_patch": ("PATCH", "patch"),
    "delete": ("DELETE", "delete"),
    "secret_value": ("GET", "get"),
}
KUBE_METHODS = frozenset({*VERBS, "request"})


def _sample_pool() -> kopf.Body:
    raw = {
        "apiVersion": "reportfarm.io/v1alpha1",
        "kind": "ReportPool",
        "metadata": {"name": "reports", "namespace": "billing", "uid": "u-1", "generation": 1},
        "spec": {
            "queue": {"name": "reports", "connectionSecretRef": {"name": "storage"}},
            "image": "renderer:1",
            "templates": {"inline": {"hello.html": "<p>{{ name }}</p>"}},
            "adminTokenSecretRef": {"name": "renderer-admin"},
        },
    }
    return kopf.Body(raw)


def _resource(api_version: str, kind: str) -> tuple[str, str]:
    """(API group, plural) as RBAC names them, from the adapter's own paths."""
    parts = k8s.collection_path(api_version, kind, "ns").strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    return group, parts[-1]


CHILDREN = frozenset(
    _resource(child["apiVersion"], child["kind"])
    for child in children.build_all(_sample_pool(), specs.parse(_sample_pool().spec), replicas=1)
)
CONFIG_MAPS = frozenset({_resource("v1", "ConfigMap")})
DEPLOYMENTS = frozenset({_resource("apps/v1", "Deployment")})
PODS = frozenset({_resource("v1", "Pod")})
SECRETS = frozenset({_resource("v1", "Secret")})

CALL_SITES: dict[tuple[str, str, str], frozenset[tuple[str, str]]] = {
    # (module, function, Kube method): the resources it is called on. Why each is needed:
    # apply: every child (Deployment, Service, PodDisruptionBudget, templates ConfigMap) is read,
    # created when missing, replaced whole if it is the ConfigMap (data keys may go), else merge-
    # patched.
    ("reconciling", "apply", "get"): CHILDREN,
    ("reconciling", "apply", "create"): CHILDREN,
    ("reconciling", "apply", "replace"): CONFIG_MAPS,
    ("reconciling", "apply", "merge_patch"): CHILDREN - CONFIG_MAPS,
    # templates moved out of the spec: the owned ConfigMap goes.
    ("reconciling", "_drop_owned_templates", "get"): CONFIG_MAPS,
    ("reconciling", "_drop_owned_templates", "delete"): CONFIG_MAPS,
    # the scaling loop: the Deployment's replicas, its pods, their deletion cost.
    ("scaling", "scale", "get"): DEPLOYMENTS,
    ("scaling", "scale", "list"): PODS,
    ("scaling", "scale", "merge_patch"): DEPLOYMENTS,
    ("scaling", "mark_idlest", "merge_patch"): PODS,
    # the queue's connection string and the renderers' admin token, each read by name.
    ("observing", "Observer._read_queue", "secret_value"): SECRETS,
    ("observing", "Observer.admin_token", "secret_value"): SECRETS,
    # the scaling loop's outcome: the pool's status (the status subresource), and its Events.
    ("ticking", "Ticker.write", "merge_patch"): frozenset(
        {("reportfarm.io", "reportpools/status")}
    ),
    ("ticking", "Ticker.post", "create"): frozenset({("", "events")}),
}

POOLS, STATUS = ("reportfarm.io", "reportpools"), ("reportfarm.io", "reportpools/status")
KOPF: dict[tuple[str, str], frozenset[str]] = {
    # kopf itself: watch the ReportPools (list + watch), keep its progress and last-handled
    # state in their annotations (patch), write the handlers' status (the status subresource),
    # and post Events (kopf.event, and its own warnings).
    POOLS: frozenset({"list", "watch", "patch"}),
    STATUS: frozenset({"patch"}),
    ("", "events"): frozenset({"create"}),
}
SCANNING: dict[tuple[str, str], frozenset[str]] = {
    # What kopf needs cluster-wide only if its CRD and namespace scanning is on.
    ("apiextensions.k8s.io", "customresourcedefinitions"): frozenset({"list", "watch"}),
    ("", "namespaces"): frozenset({"list", "watch"}),
}
PEERING_VERBS = frozenset({"get", "list", "watch", "patch"})


def _tree(module: str) -> ast.Module:
    return ast.parse((OPERATOR / f"{module}.py").read_text(encoding="utf-8"))


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of every function, methods as ``Class.method``."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


def _is_kube(node: ast.expr) -> bool:
    """``kube`` or ``<anything>.kube``: the adapter, however it was passed."""
    return (isinstance(node, ast.Name) and node.id == "kube") or (
        isinstance(node, ast.Attribute) and node.attr == "kube"
    )


def kube_calls() -> set[tuple[str, str, str]]:
    """(module, function, Kube method) of every adapter call in the operator's modules."""
    found = set()
    for path in sorted(OPERATOR.glob("*.py")):
        if path.stem == "k8s":
            continue  # the adapter itself
        for name, function in _functions(_tree(path.stem)):
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in KUBE_METHODS
                    and _is_kube(node.func.value)
                ):
                    found.add((path.stem, name, node.func.attr))
    return found


def scanning_disabled() -> bool:
    """Whether the start-up handler turns kopf's CRD/namespace scanning off."""
    for node in ast.walk(_tree("handlers")):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).endswith(
            "scanning.disabled"
        ):
            return isinstance(node.value, ast.Constant) and node.value.value is True
    return False


def needed_in_namespace() -> dict[tuple[str, str], set[str]]:
    """What the operator needs in each namespace it watches."""
    wants: dict[tuple[str, str], set[str]] = {}
    for (_, _, method), resources in CALL_SITES.items():
        for resource in resources:
            wants.setdefault(resource, set()).add(VERBS[method][1])
    for resource, verbs in KOPF.items():
        wants.setdefault(resource, set()).update(verbs)
    return wants


def needed_cluster_wide() -> dict[tuple[str, str], set[str]]:
    """What the operator needs of cluster-scoped resources, in either mode."""
    if scanning_disabled():
        return {}
    return {resource: set(verbs) for resource, verbs in SCANNING.items()}


def test_every_adapter_call_site_is_in_the_table() -> None:
    found = kube_calls()
    assert found == set(CALL_SITES), (
        f"calls not in CALL_SITES: {sorted(found - set(CALL_SITES))}; "
        f"table rows with no call: {sorted(set(CALL_SITES) - found)}"
    )


def test_each_adapter_method_sends_the_http_verb_the_table_assumes() -> None:
    tree = ast.parse((OPERATOR / "k8s.py").read_text(encoding="utf-8"))
    (kube,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Kube"]
    methods = {n.name: n for n in kube.body if isinstance(n, ast.AsyncFunctionDef)}
    for method, (http_method, _) in VERBS.items():
        sends = set()
        for node in ast.walk(methods[method]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "request" and isinstance(node.args[0], ast.Constant):
                    sends.add(node.args[0].value)
                elif node.func.attr in VERBS and node.func.attr != method:
                    sends.add(VERBS[node.func.attr][0])  # delegates (secret_value -> get)
        assert sends == {http_method}, (method, sends)


def test_kopf_is_configured_as_the_table_assumes() -> None:
    source = (OPERATOR / "handlers.py").read_text(encoding="utf-8")
    assert "AnnotationsProgressStorage" in source  # kopf's state: annotations (patch)
    assert scanning_disabled(), "kopf scans CRDs and namespaces: SCANNING rules are needed"
    assert "adopt" in (OPERATOR / "children.py").read_text(encoding="utf-8")  # no finalizer


# -- what the chart grants ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def helm() -> Path:
    override = os.environ.get("REPORTFARM_HELM")
    return Path(override) if override else kube_harness.bin_dir() / "helm"


def render(helm: Path, *sets: str, namespace: str = "farm") -> list[dict[str, Any]]:
    args = ["template", "rf", str(CHART), "-n", namespace, "--kube-version", KUBE_VERSION]
    for item in sets:
        args += ["--set", item]
    done = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def granted(docs: list[dict[str, Any]], kind: str) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for role in (d for d in docs if d["kind"] == kind):
        for rule in role.get("rules") or []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    found.setdefault((group, resource), set()).update(rule["verbs"])
    return found


MODES = [
    pytest.param([], False, id="defaults-own-namespace"),
    pytest.param(["rbac.clusterWide=true"], False, id="cluster-wide"),
    pytest.param(
        ["rbac.clusterWide=true", "peering.enabled=true"], True, id="cluster-wide-peering"
    ),
    pytest.param(["watchNamespace=reports"], False, id="one-namespace"),
    pytest.param(["watchNamespace=reports", "peering.enabled=true"], True, id="namespace-peering"),
    pytest.param(["watchNamespaces={reports,billing}"], False, id="two-namespaces"),
]


def expected_grants(
    sets: list[str], peering: bool
) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
    """(ClusterRole, Role) the operator needs in this chart mode."""
    namespaced, cluster = needed_in_namespace(), needed_cluster_wide()
    if "rbac.clusterWide=true" not in sets:
        if peering:
            namespaced[("kopf.dev", "kopfpeerings")] = set(PEERING_VERBS)
        return cluster, namespaced
    if peering:
        cluster[("kopf.dev", "clusterkopfpeerings")] = set(PEERING_VERBS)
    return {**cluster, **namespaced}, {}


@pytest.mark.parametrize(("sets", "peering"), MODES)
def test_the_chart_grants_everything_the_operator_uses(
    helm: Path, sets: list[str], peering: bool
) -> None:
    docs = render(helm, *sets)
    for kind, wants in zip(("ClusterRole", "Role"), expected_grants(sets, peering), strict=True):
        has = granted(docs, kind)
        missing = {
            resource: sorted(verbs - has.get(resource, set()))
            for resource, verbs in wants.items()
            if verbs - has.get(resource, set())
        }
        assert not missing, f"{kind} lacks {missing}"
    roles = sorted(d["metadata"]["namespace"] for d in docs if d["kind"] == "Role")
    if "rbac.clusterWide=true" in sets:
        assert roles == []
    elif any(item.startswith("watchNamespace") for item in sets):
        assert "reports" in roles and "farm" not in roles, roles
    else:
        assert roles == ["farm"]  # the release's own namespace only


@pytest.mark.parametrize(("sets", "peering"), MODES)
def test_the_chart_grants_nothing_more(helm: Path, sets: list[str], peering: bool) -> None:
    docs = render(helm, *sets)
    for kind, wants in zip(("ClusterRole", "Role"), expected_grants(sets, peering), strict=True):
        extra = {
            resource: sorted(verbs - wants.get(resource, set()))
            for resource, verbs in granted(docs, kind).items()
            if verbs - wants.get(resource, set())
        }
        assert not extra, f"{kind} grants more than the operator uses: {extra}"


def test_no_rule_uses_wildcards_or_reaches_secrets_beyond_get(helm: Path) -> None:
    for sets, _ in [param.values for param in MODES]:
        for doc in render(helm, *sets):
            for rule in doc.get("rules") or []:
                for field in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[field], (doc["kind"], rule)
                if "secrets" in rule["resources"]:
                    assert rule["verbs"] == ["get"], rule  # by name: never list or watch
                assert "resourceNames" not in rule or rule["resourceNames"], rule


# -- pods --------------------------------------------------------------------------------------


def chart_pods(helm: Path) -> dict[str, dict[str, Any]]:
    """Pod specs the chart deploys: the operator's and the helm test hook's."""
    docs = render(helm)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (test_pod,) = [d for d in docs if d["kind"] == "Pod"]
    return {"operator": deployment["spec"]["template"]["spec"], "helm-test": test_pod["spec"]}


def renderer_pod() -> dict[str, Any]:
    """The pod spec of the renderer Deployment the operator builds for the chart's example."""
    example = yaml.safe_load((CHART / "examples" / "reportpool.yaml").read_text())
    example["metadata"].update(namespace="billing", uid="u-1")
    example["spec"]["adminTokenSecretRef"] = {"name": "renderer-admin"}
    example["spec"]["signingSecretRef"] = {"name": "reportfarm-signing"}  # the key: read-only
    deployment = children.deployment(kopf.Body(example), specs.parse(example["spec"]), replicas=1)
    return dict(deployment["spec"]["template"]["spec"])


def _pod(helm: Path, which: str) -> dict[str, Any]:
    return renderer_pod() if which == "renderer" else chart_pods(helm)[which]


def _container_setting(pod: dict[str, Any], container: dict[str, Any], key: str) -> Any:
    """A securityContext setting: the container's, else the pod's."""
    own = (container.get("securityContext") or {}).get(key)
    return own if own is not None else (pod.get("securityContext") or {}).get(key)


def check_non_root(pod: dict[str, Any], container: dict[str, Any]) -> None:
    assert _container_setting(pod, container, "runAsNonRoot") is True
    assert _container_setting(pod, container, "runAsUser") not in (0, None)


def check_read_only_root(pod: dict[str, Any], container: dict[str, Any]) -> None:
    assert (container.get("securityContext") or {}).get("readOnlyRootFilesystem") is True


def check_no_escalation(pod: dict[str, Any], container: dict[str, Any]) -> None:
    security = container.get("securityContext") or {}
    assert security.get("allowPrivilegeEscalation") is False
    assert not security.get("privileged")


def check_capabilities(pod: dict[str, Any], container: dict[str, Any]) -> None:
    capabilities = (container.get("securityContext") or {}).get("capabilities") or {}
    assert capabilities.get("drop") == ["ALL"] and not capabilities.get("add"), capabilities


def check_seccomp(pod: dict[str, Any], container: dict[str, Any]) -> None:
    profile = _container_setting(pod, container, "seccompProfile")
    assert profile == {"type": "RuntimeDefault"}, profile


def check_nothing_from_the_host(pod: dict[str, Any], container: dict[str, Any]) -> None:
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert not any("hostPath" in volume for volume in pod.get("volumes") or [])
    assert not any(port.get("hostPort") for port in container.get("ports") or [])


CHECKS = {
    "non-root": check_non_root,
    "read-only-root": check_read_only_root,
    "no-privilege-escalation": check_no_escalation,
    "capabilities-dropped": check_capabilities,
    "seccomp-runtime-default": check_seccomp,
    "nothing-from-the-host": check_nothing_from_the_host,
}


def _pod_checks() -> Iterator[Any]:
    for which in ("operator", "helm-test", "renderer"):
        for name in CHECKS:
            yield pytest.param(which, name, id=f"{which}-{name}")


@pytest.mark.parametrize(("which", "check"), list(_pod_checks()))
def test_pods_are_locked_down(helm: Path, which: str, check: str) -> None:
    pod = _pod(helm, which)
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    assert containers
    for container in containers:
        CHECKS[check](pod, container)


def test_the_renderer_writes_only_to_empty_dirs() -> None:
    pod = renderer_pod()
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    (container,) = pod["containers"]
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    for path in ("/tmp", "/dev/shm"):  # Chromium's profile and shared memory
        assert path in mounts, f"{path} is not mounted"
        assert "emptyDir" in volumes[mounts[path]["name"]], path
    assert volumes[mounts["/dev/shm"]["name"]]["emptyDir"].get("medium") == "Memory"
    for path, mount in mounts.items():
        if "emptyDir" not in volumes[mount["name"]]:
            assert mount.get("readOnly") is True, f"{path} is writable and not an emptyDir"
    assert pod["automountServiceAccountToken"] is False  # renderers never call the API


def test_the_operator_writes_only_to_an_empty_dir(helm: Path) -> None:
    pod = chart_pods(helm)["operator"]
    volumes = {volume["name"]: volume for volume in pod.get("volumes") or []}
    for container in pod["containers"]:
        for mount in container.get("volumeMounts") or []:
            assert "emptyDir" in volumes[mount["name"]] or mount.get("readOnly"), mount


# -- secrets -----------------------------------------------------------------------------------

SECRET_NAME = re.compile(r"(CONNECTION|TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL|SAS)", re.IGNORECASE)
LOOKS_LIKE_A_KEY = [
    re.compile(r"AccountKey\s*=", re.IGNORECASE),
    re.compile(r"SharedAccessSignature\s*=|[?&]sig=", re.IGNORECASE),
    re.compile(r"DefaultEndpointsProtocol\s*=", re.IGNORECASE),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\."),  # a JWT
    re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/])"),  # base64 key
]


def secret_like_env(container: dict[str, Any]) -> list[str]:
    """Env vars named like secrets that carry a literal value instead of a Secret reference."""
    return [
        item["name"]
        for item in container.get("env") or []
        if SECRET_NAME.search(item["name"]) and "value" in item
    ]


def test_the_renderer_gets_its_secrets_from_secrets_only() -> None:
    (container,) = renderer_pod()["containers"]
    env = {item["name"]: item for item in container["env"]}
    for name, secret in (
        ("AZURE_STORAGE_CONNECTION_STRING", "reportfarm-storage"),
        ("REPORTFARM_ADMIN_TOKEN", "renderer-admin"),
    ):
        assert "value" not in env[name], name
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == secret, name
    assert secret_like_env(container) == []
    assert not container.get("envFrom"), "envFrom would pour a whole ConfigMap/Secret in"


def test_the_signing_key_is_a_read_only_secret_volume_only_the_renderers_group_reads() -> None:
    pod = renderer_pod()
    (container,) = pod["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == renderer_api.SIGNING_DIR]
    assert mount["readOnly"] is True
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "reportfarm-signing"
    assert volume["secret"]["defaultMode"] & 0o007 == 0  # not world-readable
    assert volume["secret"]["defaultMode"] & 0o040  # the pod's fsGroup: the renderer's
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]


def test_workload_identity_puts_no_secret_in_the_renderer() -> None:
    example = yaml.safe_load((CHART / "examples" / "reportpool.yaml").read_text())
    example["metadata"].update(namespace="billing", uid="u-1")
    example["spec"]["queue"] = {"name": "reports", "accountUrl": "https://acct.queue.example"}
    pod = children.deployment(kopf.Body(example), specs.parse(example["spec"]), replicas=1)["spec"][
        "template"
    ]["spec"]
    (container,) = pod["containers"]
    assert secret_like_env(container) == []
    assert "AZURE_STORAGE_CONNECTION_STRING" not in {item["name"] for item in container["env"]}


@pytest.mark.parametrize(("sets", "peering"), MODES)
def test_the_chart_renders_no_secret_and_no_literal_credential(
    helm: Path, sets: list[str], peering: bool
) -> None:
    docs = render(helm, *sets, "metrics.serviceMonitor.enabled=true", "dashboards.enabled=true")
    assert "Secret" not in {doc["kind"] for doc in docs}
    for doc in docs:
        pod = (doc.get("spec") or {}).get("template", {}).get("spec") or doc.get("spec") or {}
        for container in pod.get("containers") or []:
            assert secret_like_env(container) == [], (doc["kind"], container["name"])
        if doc["kind"] == "ConfigMap":
            continue  # dashboards: long JSON, no credentials (the values scan covers inputs)
        text = yaml.safe_dump(doc)
        for pattern in LOOKS_LIKE_A_KEY:
            assert not pattern.search(text), (doc["kind"], pattern.pattern)


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _strings(child, f"{path}.{key}")
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _strings(child, f"{path}[{index}]")
    elif isinstance(value, str):
        yield path, value


def test_no_value_in_values_yaml_looks_like_a_key() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for path, value in _strings(values):
        for pattern in LOOKS_LIKE_A_KEY:
            assert not pattern.search(value), f"values{path} looks like a credential"
        parent, leaf = path.rsplit(".", 1)
        if parent.endswith(("SecretRef", "SecretsRef")) and leaf in {"name", "key"}:
            continue  # a reference names a Secret and a key in it, never the credential
        if SECRET_NAME.search(leaf):
            assert not value, f"values{path} holds a literal credential"


def test_the_key_patterns_do_recognise_keys() -> None:
    """Control: the scans above would see the credentials they look for."""
    azurite_key = (
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    )
    for sample in (
        f"DefaultEndpointsProtocol=http;AccountName=a;AccountKey={azurite_key};",
        azurite_key,
        "https://a.queue.core.windows.net/q?sv=2024&sig=abc%3D",
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2ln",
    ):
        assert any(pattern.search(sample) for pattern in LOOKS_LIKE_A_KEY), sample
    assert secret_like_env({"env": [{"name": "AZURE_STORAGE_CONNECTION_STRING", "value": "x"}]})
