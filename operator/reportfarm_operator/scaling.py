"""One iteration of the scaling loop: observe -> ``policy.decide`` -> apply -> report.

Apply, in this order:
1. browsers per pod: ``PUT /pool`` on every renderer that answered with another size (seconds,
   no restart; new pods start at the spec's size and are corrected at the next tick);
2. before lowering replicas, ``controller.kubernetes.io/pod-deletion-cost`` on every pod, the
   idlest lowest, so the ReplicaSet removes idle pods and spares busy ones (each drains anyway);
3. the Deployment's replicas.

The policy's memory comes from the ReportPool's status and goes back into it, so a restarted
operator carries on where the last one stopped. An unreadable queue keeps the current size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import kopf

from reportfarm import policy
from reportfarm_operator import k8s, observing, reconciling, reporting, specs

logger = logging.getLogger(__name__)

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


@dataclasses.dataclass(frozen=True)
class Pod:
    name: str
    uid: str
    ip: str | None
    ready: bool
    deletion_cost: str | None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a tick decided and what to write: the status patch and the Events."""

    decision: policy.Decision
    status: dict[str, Any]
    events: list[reporting.Event]
    seen: reporting.Seen


def pods_of(items: Sequence[Mapping[str, Any]]) -> list[Pod]:
    """The pods that count: not terminating (a terminating pod drains and is gone)."""
    pods = []
    for item in items:
        meta, status = item.get("metadata", {}), item.get("status", {})
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        pods.append(
            Pod(
                name=meta["name"],
                uid=meta.get("uid", ""),
                ip=status.get("podIP") or None,
                ready=ready,
                deletion_cost=(meta.get("annotations") or {}).get(DELETION_COST),
            )
        )
    return sorted(pods, key=lambda pod: pod.name)


def observe(
    *,
    now: float,
    reading: observing.QueueReading,
    pods: Sequence[Pod],
    loads: Mapping[str, observing.PodLoad | None],
    start_size: int,
) -> policy.Observation:
    ready = [pod for pod in pods if pod.ready]
    sizes = [load.size for load in loads.values() if load is not None]
    all_answered = all(loads.get(pod.name) is not None for pod in ready)
    busy = sum(load.busy for load in loads.values() if load is not None) if all_answered else None
    return policy.Observation(
        now=now,
        queue_depth=reading.depth,
        ready_replicas=len(ready),
        browsers_per_pod=reporting.most_common(sizes) or start_size,
        busy_browsers=busy,  # unknown if a ready pod did not answer: the policy uses the depth
        mean_render_s=observing.mean_render_s(loads),
        interactive_depth=reading.interactive_depth,
    )


async def scale(
    body: kopf.Body, *, kube: k8s.Kube, observer: observing.Observer, now: float
) -> Outcome | None:
    """One tick for one ReportPool; None if its Deployment was missing (then re-created)."""
    namespace, name = body.metadata.namespace or "", body.metadata.name or ""
    try:
        pool_spec = specs.pool_spec(body.spec)
    except (ValueError, KeyError, TypeError) as error:
        raise kopf.PermanentError(f"unusable spec: {error}") from error
    deployment_path = k8s.object_path(
        "apps/v1", "Deployment", namespace, specs.Names(name).deployment
    )
    deployment = await kube.get(deployment_path)
    if deployment is None:
        logger.info("%s/%s: Deployment missing, reconciling", namespace, name)
        await reconciling.reconcile(body, kube=kube)
        return None
    if reconciling.controlled_by_another(deployment, owner_uid=body.metadata.uid or ""):
        raise kopf.PermanentError(f"Deployment {deployment_path} belongs to another controller")
    items = await kube.list(
        k8s.collection_path("v1", "Pod", namespace), label_selector=specs.selector_labels(name)
    )
    pods = pods_of(items)
    reading, loads = await asyncio.gather(
        observer.queue(namespace, body.spec),
        observer.pod_loads({p.name: (p.uid, p.ip) for p in pods if p.ip}),
    )
    observation = observe(
        now=now, reading=reading, pods=pods, loads=loads, start_size=pool_spec.browsers_that_fit
    )
    state = policy.State.from_dict(body.status.get("policy"))
    decision = policy.decide(observation, pool_spec, state)

    errors = await resize_pools(
        body, observer=observer, pods=pods, loads=loads, size=decision.browsers_per_pod
    )
    replicas = int(deployment.get("spec", {}).get("replicas", 0))
    if decision.replicas < replicas:
        await mark_idlest(kube, namespace=namespace, pods=pods, loads=loads)
    if decision.replicas != replicas:
        await kube.merge_patch(deployment_path, {"spec": {"replicas": decision.replicas}})

    seen = reporting.Seen(
        decision=decision,
        deployment_replicas=int(deployment.get("status", {}).get("replicas", 0)),
        ready_replicas=observation.ready_replicas,
        pool_sizes=[load.size for load in loads.values() if load is not None],
        queue_depth=reading.depth,
        poison_depth=reading.poison_depth,
        queue_error=reading.error,
        resize_errors=errors,
    )
    previous = dict(body.status)
    generation = body.metadata.get("generation")
    return Outcome(
        decision=decision,
        status=reporting.status(seen, previous=previous, now=now, generation=generation),
        events=reporting.events(seen, previous=previous),
        seen=seen,
    )


async def resize_pools(
    body: kopf.Body,
    *,
    observer: observing.Observer,
    pods: Sequence[Pod],
    loads: Mapping[str, observing.PodLoad | None],
    size: int,
) -> list[str]:
    """PUT /pool on each renderer that answered with another size; returns the failures."""
    targets = [
        pod
        for pod in pods
        if pod.ip and (load := loads.get(pod.name)) is not None and load.size != size
    ]
    if not targets:
        return []
    try:
        token = await observer.admin_token(body.metadata.namespace or "", body.spec)
    except (KeyError, k8s.KubeError) as error:
        return [f"admin token unreadable: {error}"]
    results = await asyncio.gather(
        *(observer.resize(pod.ip or "", size, token=token) for pod in targets)
    )
    failures = []
    for pod, failure in zip(targets, results, strict=True):
        if failure is None:
            logger.info("pod %s: pool resized to %d browsers", pod.name, size)
        else:
            failures.append(f"{pod.name}: {failure}")
    return failures


async def mark_idlest(
    kube: k8s.Kube,
    *,
    namespace: str,
    pods: Sequence[Pod],
    loads: Mapping[str, observing.PodLoad | None],
) -> None:
    """Deletion costs from the policy's helper: the idlest pods first; unknown load is spared."""
    busy = {pod.name: (load.busy if (load := loads.get(pod.name)) else None) for pod in pods}
    costs = policy.deletion_costs(busy)
    for pod in pods:
        cost = str(costs[pod.name])
        if pod.deletion_cost == cost:
            continue
        patch = {"metadata": {"annotations": {DELETION_COST: cost}}}
        try:
            await kube.merge_patch(k8s.object_path("v1", "Pod", namespace, pod.name), patch)
        except k8s.KubeError as error:  # gone meanwhile: nothing to spare
            if not error.not_found:
                raise
