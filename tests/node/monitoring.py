"""Prometheus for the real node: the chart's PodMonitor and ServiceMonitor, rendered by helm and
translated into the scrape configs prometheus-operator generates from them, so a selector or port
name that misses the real pods leaves Prometheus without targets and fails the test.

The translation follows prometheus-operator's generator for the fields the chart uses: the
``matchLabels`` and the port name become ``keep`` rules, finished pods are dropped, ``namespace``,
``pod``, ``container`` and ``endpoint`` labels are added, then the monitor's own relabelings.

Debian's Prometheus is built without Kubernetes service discovery (``kubernetes_sd_configs`` is
an unknown field there), so :class:`Discovery` stands in for it: an HTTP service discovery
endpoint on loopback that lists the test plane's pods and EndpointSlices on every refresh, with
the ``__meta_kubernetes_*`` labels Prometheus's own ``pod`` and ``endpointslice`` roles give them.
Prometheus then applies the relabelings itself.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from reportfarm import azurite
from tests.deploy import prometheus
from tests.harness import kube as kube_harness
from tests.node import farm

_ROLES = {"PodMonitor": "pod", "ServiceMonitor": "endpointslice"}


def chart_monitors(
    tools: farm.Tools, chart: Path, *, namespace: str, values: list[str]
) -> list[dict[str, Any]]:
    """The PodMonitor and ServiceMonitor of ``helm template`` with both turned on."""
    sets = [
        "metrics.podMonitor.enabled=true",
        "metrics.serviceMonitor.enabled=true",
        *values,
    ]
    version = tools.plane.request("GET", "/version")["gitVersion"]
    args = ["template", "reportfarm", str(chart), "-n", namespace, "--kube-version", version]
    for value in sets:
        args += ["--set", value]
    rendered = yaml.safe_load_all(tools.run("helm", *args))
    return [doc for doc in rendered if doc and doc.get("kind") in _ROLES]


def panel_queries() -> list[tuple[str, str]]:
    """("dashboard: panel title", expression) of every panel target, Grafana variables
    substituted as the dashboard tests do."""
    found = []
    for path in sorted((prometheus.CHART / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                label = f"{path.stem}: {panel['title']}"
                found.append((label, prometheus.substitute(target["expr"])))
    return found


def _meta(name: str) -> str:
    """A Kubernetes label name as Prometheus's meta label suffix."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _relabeling(rule: dict[str, Any]) -> dict[str, Any]:
    keys = {
        "sourceLabels": "source_labels",
        "targetLabel": "target_label",
        "separator": "separator",
        "regex": "regex",
        "replacement": "replacement",
        "modulus": "modulus",
    }
    out = {keys[k]: v for k, v in rule.items() if k in keys}
    out["action"] = str(rule.get("action", "replace")).lower()
    return out


def scrape_configs(monitors: list[dict[str, Any]], *, discovery: str) -> list[dict[str, Any]]:
    """One scrape config per monitor endpoint, as prometheus-operator would write it."""
    configs = []
    for monitor in monitors:
        kind, meta, spec = monitor["kind"], monitor["metadata"], monitor["spec"]
        role = _ROLES[kind]
        # Pod labels for a PodMonitor; the Service's labels for a ServiceMonitor.
        owner = "pod" if kind == "PodMonitor" else "service"
        port_label = (
            "__meta_kubernetes_pod_container_port_name"
            if kind == "PodMonitor"
            else "__meta_kubernetes_endpointslice_port_name"
        )
        query = {"role": role}
        names = spec.get("namespaceSelector", {}).get("matchNames")
        if names:
            query["namespaces"] = ",".join(names)
        sd = {"url": f"{discovery}?{urllib.parse.urlencode(query)}", "refresh_interval": "2s"}
        endpoints = spec["podMetricsEndpoints"] if kind == "PodMonitor" else spec["endpoints"]
        for index, endpoint in enumerate(endpoints):
            relabel: list[dict[str, Any]] = []
            for key, value in spec["selector"]["matchLabels"].items():
                relabel.append({
                    "action": "keep",
                    "source_labels": [
                        f"__meta_kubernetes_{owner}_label_{_meta(key)}",
                        f"__meta_kubernetes_{owner}_labelpresent_{_meta(key)}",
                    ],
                    "regex": f"({re.escape(value)});true",
                })  # fmt: skip
            relabel += [
                {"action": "keep", "source_labels": [port_label], "regex": endpoint["port"]},
                {
                    "action": "drop",
                    "source_labels": ["__meta_kubernetes_pod_phase"],
                    "regex": "(Failed|Succeeded)",
                },
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {
                    "source_labels": ["__meta_kubernetes_pod_container_name"],
                    "target_label": "container",
                },
                {"target_label": "endpoint", "replacement": endpoint["port"]},
            ]
            relabel += [_relabeling(rule) for rule in endpoint.get("relabelings", [])]
            configs.append({
                "job_name": f"{kind[0].lower()}{kind[1:]}/{meta['namespace']}/{meta['name']}/{index}",
                "honor_labels": bool(endpoint.get("honorLabels", False)),
                "metrics_path": endpoint.get("path", "/metrics"),
                "scrape_interval": endpoint["interval"],
                "scrape_timeout": endpoint["scrapeTimeout"],
                "http_sd_configs": [sd],
                "relabel_configs": relabel,
            })  # fmt: skip
    return configs


def _labels(kind: str, labels: dict[str, str]) -> dict[str, str]:
    found = {}
    for key, value in labels.items():
        found[f"__meta_kubernetes_{kind}_label_{_meta(key)}"] = value
        found[f"__meta_kubernetes_{kind}_labelpresent_{_meta(key)}"] = "true"
    return found


def _pod_meta(pod: dict[str, Any]) -> dict[str, str]:
    status = pod.get("status", {})
    ready = any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
    )
    return {
        "__meta_kubernetes_namespace": pod["metadata"]["namespace"],
        "__meta_kubernetes_pod_name": pod["metadata"]["name"],
        "__meta_kubernetes_pod_uid": pod["metadata"]["uid"],
        "__meta_kubernetes_pod_ip": status.get("podIP", ""),
        "__meta_kubernetes_pod_phase": status.get("phase", ""),
        "__meta_kubernetes_pod_ready": str(ready).lower(),
        "__meta_kubernetes_pod_node_name": pod["spec"].get("nodeName", ""),
        **_labels("pod", pod["metadata"].get("labels", {})),
    }


def pod_targets(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prometheus's ``pod`` role: one target per declared container port of a pod with an IP."""
    groups = []
    for pod in pods:
        address = pod.get("status", {}).get("podIP")
        if not address:
            continue
        for container in pod["spec"]["containers"]:
            for port in container.get("ports", []):
                labels = {
                    **_pod_meta(pod),
                    "__meta_kubernetes_pod_container_name": container["name"],
                    "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                    "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
                }
                target = f"{address}:{port['containerPort']}"
                groups.append({"targets": [target], "labels": labels})
    return groups


def endpointslice_targets(
    slices: list[dict[str, Any]], services: dict[str, Any], pods: dict[str, Any]
) -> list[dict[str, Any]]:
    """Prometheus's ``endpointslice`` role: one target per address and port, with the Service's
    labels and, when the endpoint is a pod, the pod's."""
    groups = []
    for piece in slices:
        meta = piece["metadata"]
        service = services.get(meta.get("labels", {}).get("kubernetes.io/service-name", ""), {})
        for endpoint in piece.get("endpoints") or []:
            reference = endpoint.get("targetRef") or {}
            pod = pods.get(reference.get("name", "")) if reference.get("kind") == "Pod" else None
            ready = (endpoint.get("conditions") or {}).get("ready", True)
            for port in piece.get("ports") or []:
                labels = {
                    "__meta_kubernetes_namespace": meta["namespace"],
                    "__meta_kubernetes_endpointslice_name": meta["name"],
                    "__meta_kubernetes_endpointslice_port_name": port.get("name", ""),
                    "__meta_kubernetes_endpointslice_port": str(port["port"]),
                    "__meta_kubernetes_endpointslice_endpoint_conditions_ready": str(ready).lower(),
                    "__meta_kubernetes_service_name": service.get("metadata", {}).get("name", ""),
                    **_labels("service", service.get("metadata", {}).get("labels", {})),
                    **(_pod_meta(pod) if pod else {}),
                }
                for address in endpoint["addresses"]:
                    groups.append({"targets": [f"{address}:{port['port']}"], "labels": labels})
    return groups


def _discover(plane: kube_harness.ControlPlane, role: str, namespaces: list[str]) -> list[Any]:
    groups: list[Any] = []
    for namespace in namespaces:
        pods = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        if role == "pod":
            groups += pod_targets(pods)
            continue
        path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        slices = plane.request("GET", path)["items"]
        services = plane.request("GET", f"/api/v1/namespaces/{namespace}/services")["items"]
        groups += endpointslice_targets(
            slices,
            {s["metadata"]["name"]: s for s in services},
            {p["metadata"]["name"]: p for p in pods},
        )
    return groups


@contextlib.contextmanager
def discovery(plane: kube_harness.ControlPlane) -> Iterator[str]:
    """An HTTP service discovery endpoint on loopback for ``plane``; yields its URL
    (``?role=pod|endpointslice&namespaces=a,b``)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            role = query.get("role", ["pod"])[0]
            namespaces = query.get("namespaces", [""])[0].split(",")
            body = json.dumps(_discover(plane, role, namespaces)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", azurite.free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/sd"
    finally:
        server.shutdown()
        server.server_close()
