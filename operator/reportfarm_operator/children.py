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

from reportfarm import renderer_api
from reportfarm_operator import specs

TEMPLATES_CHECKSUM = "reportfarm.io/templates-checksum"
"""Pod template annotation: inline templates changed -> the pods roll (templates load at start)."""
WORKLOAD_IDENTITY_LABEL = "azure.workload.identity/use"
"""Pod label AKS's workload identity webhook looks for: it then mounts the federated token and
sets AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE (from the service account's
``azure.workload.identity/client-id`` annotation). Set on pools with ``queue.accountUrl``."""


def build_all(
    body: kopf.Body, pool: specs.ReportPoolSpec, *, replicas: int
) -> list[dict[str, Any]]:
    """Every child this ReportPool should have, adopted (owner reference, namespace, labels)."""
    children = [
        deployment(body, pool, replicas=replicas),
        metrics_service(body),
        disruption_budget(body),
    ]
    config_map = templates_config_map(body, pool)
    if config_map is not None:
        children.append(config_map)
    return children


def _metadata(body: kopf.Body, name: str) -> dict[str, Any]:
    return {"name": name, "labels": specs.common_labels(body.metadata.name or "")}


def _adopted(body: kopf.Body, manifest: dict[str, Any]) -> dict[str, Any]:
    kopf.adopt(manifest, owner=body)
    return manifest


def deployment(body: kopf.Body, spec: specs.ReportPoolSpec, *, replicas: int) -> dict[str, Any]:
    pool = body.metadata.name or ""
    names = specs.Names(pool)
    pod_labels = {**specs.common_labels(pool), **specs.selector_labels(pool)}
    if spec.queue.account_url:
        pod_labels[WORKLOAD_IDENTITY_LABEL] = "true"
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(renderer_api.PORT),
        "prometheus.io/path": renderer_api.METRICS_PATH,
    }
    if spec.inline_templates:
        annotations[TEMPLATES_CHECKSUM] = templates_checksum(spec.inline_templates)
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": spec.termination_grace_s,
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
            {"name": "templates", "configMap": {"name": templates_config_map_name(body, spec)}},
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
    if spec.signing_secret:
        pod_spec["volumes"].append(signing_volume(spec.signing_secret))
    if spec.service_account:
        pod_spec["serviceAccountName"] = spec.service_account
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


SIGNING_VOLUME = "signing"
SIGNING_MODE = 0o440
"""The key's files: readable by the renderer's group (the pod's fsGroup), by no one else."""


def signing_volume(secret: str) -> dict[str, Any]:
    """The signing Secret (``kubernetes.io/tls``: tls.crt, tls.key, maybe ca.crt) as a volume;
    not optional: a pool that names a missing Secret has no pod start rather than none sign."""
    return {
        "name": SIGNING_VOLUME,
        "secret": {"secretName": secret, "defaultMode": SIGNING_MODE, "optional": False},
    }


def renderer_container(spec: specs.ReportPoolSpec) -> dict[str, Any]:
    port = renderer_api.PORT
    mounts = [
        {"name": "templates", "mountPath": specs.TEMPLATES_PATH, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    if spec.signing_secret:
        # The renderer's default signing folder: no variable needed. It reads the key at start,
        # so a renewed certificate takes a restart of the pods (docs/finishing/signing.md).
        mounts.append(
            {"name": SIGNING_VOLUME, "mountPath": renderer_api.SIGNING_DIR, "readOnly": True}
        )

    def probe(path: str, **tuning: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}, "timeoutSeconds": 5, **tuning}

    return {
        "name": "renderer",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        # tini as PID 1 reaps Chromium's orphaned helpers (as the image's ENTRYPOINT does); it
        # forwards SIGTERM to the worker alone, which drains its running jobs.
        "command": ["/usr/bin/tini", "--", "reportfarm", "worker"],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": renderer_env(spec),
        "resources": spec.resources,
        # Browsers launch at start: allow them a minute before liveness counts. Asked every
        # second (only until it answers): the readiness probe runs as soon as it has, so the pod
        # is Ready, and in its Service, within a second of listening, not two
        # (docs/node/pod-start.md).
        "startupProbe": probe(renderer_api.HEALTHZ_PATH, periodSeconds=1, failureThreshold=60),
        # /healthz never depends on load, so a busy pod is not killed.
        "livenessProbe": probe(renderer_api.HEALTHZ_PATH, periodSeconds=10, failureThreshold=6),
        "readinessProbe": probe(renderer_api.READYZ_PATH, periodSeconds=5, failureThreshold=2),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,  # writable: /tmp (also HOME) and /dev/shm only
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }


def renderer_environment(spec: specs.ReportPoolSpec) -> renderer_api.RendererEnvironment:
    """What a ReportPool's renderers are told (the renderer's contract), before it is a manifest."""
    queue, connection, token = spec.queue, spec.queue.connection_secret, spec.admin_token_secret
    hint_key = spec.hint_key_secret
    return renderer_api.RendererEnvironment(
        connection_string=None if connection is None else renderer_api.FromSecret(*connection),
        account_url=None if connection is not None else queue.account_url,
        blob_url=None if connection is not None else queue.blob_url,
        queue=queue.name,
        container=spec.output_container,
        pool_size=spec.start_pool_size,
        templates=specs.TEMPLATES_PATH,
        visibility_timeout=spec.visibility_timeout_s,
        drain_timeout=spec.drain_timeout_s,
        port=renderer_api.PORT,
        log_format="json",
        # The root filesystem is read-only: Chromium's profile and fontconfig's cache go to /tmp.
        home="/tmp",
        xdg_cache_home="/tmp/.cache",
        worker_id=renderer_api.FromPodField("metadata.name"),
        admin_token=None if token is None else renderer_api.FromSecret(*token),
        tsa_url=spec.signing_timestamp_url,
        hint_key=None if hint_key is None else renderer_api.FromSecret(*hint_key),
    )


def renderer_env(spec: specs.ReportPoolSpec) -> list[dict[str, Any]]:
    """The container's ``env``: the renderer's environment, Secrets and fields by reference."""
    return [_entry(name, value) for name, value in renderer_environment(spec).variables()]


def _entry(name: str, value: renderer_api.Value) -> dict[str, Any]:
    if isinstance(value, renderer_api.FromSecret):
        ref = {"secretKeyRef": {"name": value.name, "key": value.key}}
        return {"name": name, "valueFrom": ref}
    if isinstance(value, renderer_api.FromPodField):
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": value.path}}}
    return {"name": name, "value": value}


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
                    "port": renderer_api.PORT,
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


def templates_config_map_name(body: kopf.Body, spec: specs.ReportPoolSpec) -> str:
    given = spec.templates_config_map
    return given if given else specs.Names(body.metadata.name or "").templates


def templates_config_map(body: kopf.Body, spec: specs.ReportPoolSpec) -> dict[str, Any] | None:
    """The owned ConfigMap of inline templates; None when the spec names its own ConfigMap."""
    inline = spec.inline_templates
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
