"""Pure builders of a ReportPool's children: plain manifests, labelled, owned via ``kopf.adopt``.

- the renderers' Deployment (replicas are the scaling loop's: the builder takes the value to
  create with, and reconciling never overwrites a live count);
- a headless metrics Service (every renderer's /metrics, for Prometheus);
- a PodDisruptionBudget (one renderer at a time on voluntary evictions);
- the templates ConfigMap, only when the spec inlines templates.

Nothing here talks to the API: ``reconciling`` applies what these return.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import kopf

from reportfarm_operator import specs

TEMPLATES_CHECKSUM = "reportfarm.io/templates-checksum"
"""Pod template annotation: inline templates changed -> the pods roll (templates load at start)."""
START_POOL_SIZE_ENV = "REPORTFARM_POOL_SIZE"


def build_all(body: kopf.Body, *, replicas: int) -> list[dict[str, Any]]:
    """Every child this ReportPool should have, adopted (owner reference, namespace, labels)."""
    children = [deployment(body, replicas=replicas), metrics_service(body), disruption_budget(body)]
    config_map = templates_config_map(body)
    if config_map is not None:
        children.append(config_map)
    return children


def _metadata(body: kopf.Body, name: str) -> dict[str, Any]:
    return {"name": name, "labels": specs.common_labels(body.metadata.name or "")}


def _adopted(body: kopf.Body, manifest: dict[str, Any]) -> dict[str, Any]:
    kopf.adopt(manifest, owner=body)
    return manifest


def deployment(body: kopf.Body, *, replicas: int) -> dict[str, Any]:
    pool = body.metadata.name or ""
    spec = body.spec
    names = specs.Names(pool)
    grace = int(specs.get(spec, "terminationGracePeriodSeconds"))
    pod_labels = {**specs.common_labels(pool), **specs.selector_labels(pool)}
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(specs.RENDERER_PORT),
        "prometheus.io/path": "/metrics",
    }
    inline = spec.get("templates", {}).get("inline")
    if inline:
        annotations[TEMPLATES_CHECKSUM] = templates_checksum(inline)
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [renderer_container(spec)],
        "volumes": [
            {"name": "templates", "configMap": {"name": templates_config_map_name(body)}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": specs.selector_labels(pool)},
            }
        ],
    }
    if spec.get("serviceAccountName"):
        pod_spec["serviceAccountName"] = spec["serviceAccountName"]
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(body, names.deployment),
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": specs.selector_labels(pool)},
            # Roll without losing capacity: a new pod is ready before an old one drains.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": pod_labels, "annotations": annotations},
                "spec": pod_spec,
            },
        },
    }
    return _adopted(body, manifest)


def renderer_container(spec: Mapping[str, Any]) -> dict[str, Any]:
    port = specs.RENDERER_PORT

    def probe(path: str, **tuning: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}, "timeoutSeconds": 5, **tuning}

    return {
        "name": "renderer",
        "image": spec["image"],
        "imagePullPolicy": specs.get(spec, "imagePullPolicy"),
        # tini as PID 1 reaps Chromium's orphaned helpers (as the image's ENTRYPOINT does); it
        # forwards SIGTERM to the worker alone, which drains its running jobs.
        "command": ["/usr/bin/tini", "--", "reportfarm", "worker"],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": renderer_env(spec),
        "resources": specs.resources(spec),
        # Browsers launch at start: allow them a minute before liveness counts.
        "startupProbe": probe("/healthz", periodSeconds=2, failureThreshold=30),
        # /healthz never depends on load, so a busy pod is not killed.
        "livenessProbe": probe("/healthz", periodSeconds=10, failureThreshold=6),
        "readinessProbe": probe("/readyz", periodSeconds=5, failureThreshold=2),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,  # writable: /tmp (also HOME) and /dev/shm only
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "templates", "mountPath": specs.TEMPLATES_PATH, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }


def renderer_env(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    queue = spec["queue"]
    env: list[dict[str, Any]] = []
    connection = specs.secret_ref(spec, "connectionSecretRef")
    if connection is not None:
        env.append(_from_secret("AZURE_STORAGE_CONNECTION_STRING", connection))
    else:
        env.append({"name": "AZURE_STORAGE_ACCOUNT_URL", "value": str(queue["accountUrl"])})
    values = {
        "REPORTFARM_QUEUE": queue["name"],
        "REPORTFARM_CONTAINER": specs.get(spec, "outputContainer"),
        START_POOL_SIZE_ENV: specs.start_pool_size(spec),
        "REPORTFARM_TEMPLATES": specs.TEMPLATES_PATH,
        "REPORTFARM_VISIBILITY_TIMEOUT": specs.get(spec, "visibilityTimeoutSeconds"),
        "REPORTFARM_DRAIN_TIMEOUT": specs.drain_timeout(spec),
        "REPORTFARM_PORT": specs.RENDERER_PORT,
        "REPORTFARM_LOG_FORMAT": "json",
        # The root filesystem is read-only: Chromium's profile and fontconfig's cache go to /tmp.
        "HOME": "/tmp",
        "XDG_CACHE_HOME": "/tmp/.cache",
    }
    env.extend({"name": name, "value": str(value)} for name, value in values.items())
    env.append(
        {"name": "REPORTFARM_WORKER_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    )
    token = specs.secret_ref(spec, "adminTokenSecretRef")
    if token is not None:
        env.append(_from_secret("REPORTFARM_ADMIN_TOKEN", token))
    return env


def _from_secret(name: str, ref: tuple[str, str]) -> dict[str, Any]:
    secret, key = ref
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def metrics_service(body: kopf.Body) -> dict[str, Any]:
    """Headless: Prometheus (a ServiceMonitor, say) scrapes each renderer, not a virtual IP."""
    pool = body.metadata.name or ""
    manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(body, specs.Names(pool).service),
        "spec": {
            "clusterIP": "None",
            "selector": specs.selector_labels(pool),
            "ports": [
                {
                    "name": "http",
                    "port": specs.RENDERER_PORT,
                    "targetPort": "http",
                    "protocol": "TCP",
                }
            ],
        },
    }
    return _adopted(body, manifest)


def disruption_budget(body: kopf.Body) -> dict[str, Any]:
    """One renderer evicted at a time (each drains first); unhealthy ones never block a drain."""
    pool = body.metadata.name or ""
    manifest = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(body, specs.Names(pool).disruption_budget),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": specs.selector_labels(pool)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
    return _adopted(body, manifest)


def templates_config_map_name(body: kopf.Body) -> str:
    given = body.spec.get("templates", {}).get("configMapName")
    return str(given) if given else specs.Names(body.metadata.name or "").templates


def templates_config_map(body: kopf.Body) -> dict[str, Any] | None:
    """The owned ConfigMap of inline templates; None when the spec names its own ConfigMap."""
    inline = body.spec.get("templates", {}).get("inline")
    if not inline:
        return None
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(body, specs.Names(body.metadata.name or "").templates),
        "data": {str(name): str(text) for name, text in inline.items()},
    }
    return _adopted(body, manifest)


def templates_checksum(inline: Mapping[str, Any]) -> str:
    text = json.dumps({str(k): str(v) for k, v in inline.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
