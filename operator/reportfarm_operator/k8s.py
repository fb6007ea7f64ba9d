"""A small adapter over the Kubernetes API: raw JSON in, raw JSON out, never blocking the loop.

It rides on the installed synchronous ``kubernetes`` client (its configuration, TLS and auth,
in-cluster or kubeconfig) but skips its model classes: manifests stay the plain camelCase dicts
that ``children`` builds and the tests read. Every call runs in a worker thread
(``asyncio.to_thread``): a blocking call in an async handler would stall kopf's whole loop,
watch streams included.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

import kubernetes

MERGE_PATCH = "application/merge-patch+json"
_PLURALS = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Event"): "events",
    ("v1", "Pod"): "pods",
    ("v1", "Secret"): "secrets",
    ("v1", "Service"): "services",
    ("apps/v1", "Deployment"): "deployments",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudgets",
}


class KubeError(Exception):
    """The API answered with an error status."""

    def __init__(self, status: int, message: str, *, reason: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{namespace}/{_PLURALS[(api_version, kind)]}"


def object_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    return f"{collection_path(api_version, kind, namespace)}/{name}"


def manifest_path(manifest: Mapping[str, Any]) -> str:
    meta = manifest["metadata"]
    return object_path(manifest["apiVersion"], manifest["kind"], meta["namespace"], meta["name"])


def client_from_environment() -> kubernetes.client.ApiClient:
    """In a pod, the ServiceAccount; elsewhere, the kubeconfig (KUBECONFIG, else ~/.kube/config)."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException:
        return kubernetes.config.new_client_from_config()
    return kubernetes.client.ApiClient(configuration)


class Kube:
    """Async calls to the API server, each in a thread, with a per-request timeout."""

    def __init__(self, api: kubernetes.client.ApiClient, *, timeout: float = 10.0) -> None:
        self.api = api
        self.timeout = timeout

    def close(self) -> None:
        self.api.close()

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        method, url, headers, body, _ = self.api.param_serialize(
            method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self.api.call_api(
            method, url, header_params=headers, body=body, _request_timeout=self.timeout
        )
        raw = response.read() or b""
        data: dict[str, Any] = json.loads(raw) if raw else {}
        if not 200 <= response.status <= 299:
            raise KubeError(
                response.status,
                str(data.get("message", raw[:200])),
                reason=str(data.get("reason", "")),
            )
        return data

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = ""
    ) -> Any:
        return await asyncio.to_thread(self._call, method, path, body, content_type)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, or None if it does not exist."""
        try:
            return dict(await self.request("GET", path))
        except KubeError as error:
            if error.not_found:
                return None
            raise

    async def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        path = collection_path(manifest["apiVersion"], manifest["kind"], meta["namespace"])
        return dict(await self.request("POST", path, manifest))

    async def replace(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        return dict(await self.request("PUT", manifest_path(manifest), manifest))

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return dict(await self.request("PATCH", path, patch, content_type=MERGE_PATCH))

    async def delete(self, path: str) -> None:
        try:
            await self.request("DELETE", path)
        except KubeError as error:
            if not error.not_found:
                raise

    async def list(self, path: str, *, label_selector: Mapping[str, str]) -> list[dict[str, Any]]:
        selector = ",".join(f"{key}={value}" for key, value in sorted(label_selector.items()))
        query = urllib.parse.urlencode({"labelSelector": selector})
        return list((await self.request("GET", f"{path}?{query}")).get("items") or [])

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        """One key of a Secret, decoded. Raises KeyError if the key is missing."""
        secret = await self.get(object_path("v1", "Secret", namespace, name))
        if secret is None:
            raise KeyError(f"Secret {namespace}/{name} not found")
        encoded = (secret.get("data") or {}).get(key)
        if encoded is None:
            raise KeyError(f"Secret {namespace}/{name} has no key {key!r}")
        return base64.b64decode(encoded).decode()


def event_manifest(
    involved: Mapping[str, Any], *, type: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    """A core/v1 Event about ``involved`` (an object's apiVersion, kind and metadata)."""
    meta = involved["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "type": type,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": "reportfarm-operator"},
        "reportingComponent": "reportfarm.io/operator",
        "reportingInstance": "reportfarm-operator",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
