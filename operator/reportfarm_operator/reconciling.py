"""Make a ReportPool's children match its spec: create what is missing, patch what exists.

Idempotent, so create, update, resume and a timer that finds a child missing all call the same
function. Replicas belong to the scaling loop: a Deployment is created with the last decided count
(else ``replicas.min``) and reconciling never writes the live count back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from reportfarm_operator import children, k8s, specs

logger = logging.getLogger(__name__)


async def reconcile(body: kopf.Body, spec: specs.ReportPoolSpec, *, kube: k8s.Kube) -> list[str]:
    """Apply every child of ``body`` (its spec parsed: ``spec``); returns their ``Kind/name``."""
    applied = []
    for manifest in children.build_all(body, spec, replicas=initial_replicas(body, spec)):
        await apply(kube, manifest, owner_uid=body.metadata.uid or "")
        applied.append(f"{manifest['kind']}/{manifest['metadata']['name']}")
    if not spec.inline_templates:  # templates moved to the user's ConfigMap
        await _drop_owned_templates(body, kube=kube)
    return applied


def initial_replicas(body: kopf.Body, spec: specs.ReportPoolSpec) -> int:
    decided = body.status.get("replicas")
    return int(decided) if decided is not None else spec.policy.min_replicas


async def apply(kube: k8s.Kube, manifest: Mapping[str, Any], *, owner_uid: str) -> None:
    path = k8s.manifest_path(manifest)
    live = await kube.get(path)
    if live is None:
        try:
            await kube.create(manifest)
            return
        except k8s.KubeError as error:
            if not error.conflict:  # someone (a timer tick) created it meanwhile: patch it
                raise
            live = await kube.get(path) or {}
    _check_ownership(live, manifest, owner_uid=owner_uid)
    if manifest["kind"] == "ConfigMap":  # data keys may be removed: replace it whole
        current = {**manifest, "metadata": {**manifest["metadata"]}}
        current["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        await kube.replace(current)
        return
    await kube.merge_patch(path, without_replicas(manifest))


def without_replicas(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest minus ``spec.replicas``: the live count is the scaling loop's."""
    patch = dict(manifest)
    if "spec" in patch:
        patch["spec"] = {k: v for k, v in patch["spec"].items() if k != "replicas"}
    return patch


def controlled_by_another(live: Mapping[str, Any], *, owner_uid: str) -> list[Mapping[str, Any]]:
    """The controller references of ``live`` that are not ``owner_uid`` (an orphan has none)."""
    refs = live.get("metadata", {}).get("ownerReferences") or []
    return [ref for ref in refs if ref.get("controller") and ref.get("uid") != owner_uid]


def _check_ownership(
    live: Mapping[str, Any], manifest: Mapping[str, Any], *, owner_uid: str
) -> None:
    """Never take over an object another controller owns; adopt an orphan."""
    others = controlled_by_another(live, owner_uid=owner_uid)
    if others:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        raise kopf.PermanentError(
            f"{kind} {name} exists and is controlled by {others[0].get('kind')} "
            f"{others[0].get('name')}: rename the ReportPool or remove that {kind}"
        )


async def _drop_owned_templates(body: kopf.Body, *, kube: k8s.Kube) -> None:
    namespace = body.metadata.namespace or ""
    path = k8s.object_path(
        "v1", "ConfigMap", namespace, specs.Names(body.metadata.name or "").templates
    )
    live = await kube.get(path)
    refs = (live or {}).get("metadata", {}).get("ownerReferences") or []
    if any(ref.get("uid") == body.metadata.uid for ref in refs):
        logger.info("templates are no longer inline: deleting %s", path)
        await kube.delete(path)
