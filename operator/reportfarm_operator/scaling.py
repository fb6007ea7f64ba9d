"""One iteration of the scaling loop: observe -> ``policy.decide`` -> apply -> report.

Apply, in this order:
1. browsers per pod: ``PUT /pool`` on every renderer that answered with another size (seconds,
   no restart; new pods start at the spec's size and are corrected at the next tick);
2. before lowering replicas, ``controller.kubernetes.io/pod-deletion-cost`` on every pod, the
   idlest lowest, so the ReplicaSet removes idle pods and spares busy ones (each drains anyway);
3. the Deployment's replicas.

The policy's memory comes from the ReportPool's status and goes back into it, so a restarted
operator carries on where the last one stopped. An unreadable queue keeps the current size; so
does a spec the operator cannot use (its status and a Warning Event name the field). When a ready
renderer's ``/metrics`` cannot be read, busy browsers are unknown (``None``) and the policy sizes
from the queue alone: the ``MetricsReadable`` condition says so, naming the pods.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import kopf

from reportfarm import capacity, policy
from reportfarm_operator import (
    findings,
    k8s,
    observing,
    pods,
    reconciling,
    reporting,
    specs,
    throttling,
)

logger = logging.getLogger(__name__)

DELETION_COST = pods.DELETION_COST
Pod = pods.Pod
pods_of = pods.pods_of
Loads = Mapping[str, observing.PodLoad | str]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a tick decided and what to write: the status patch and the Events.
    ``decision`` and ``seen`` are None when the spec cannot be used."""

    decision: policy.Decision | None
    status: dict[str, Any]
    events: list[reporting.Event]
    seen: findings.Seen | None


def observe(
    *,
    now: float,
    reading: observing.QueueReading,
    pods: Sequence[Pod],
    loads: Loads,
    start_size: int,
) -> policy.Observation:
    ready = [pod for pod in pods if pod.ready]
    answered = [load for load in loads.values() if isinstance(load, observing.PodLoad)]
    sizes = [load.size for load in answered]
    blind = any(not isinstance(loads.get(pod.name), observing.PodLoad) for pod in ready)
    # A job in a finishing process has left its browser but still takes the pod's CPU (a
    # signature's ~0.3 s after a 35 ms print): busy, up to the pool's size.
    busy = None if blind else sum(observing.busy(load) for load in answered)
    # Renders completed since the previous tick (the arrival rate during a backlog); unknown
    # while blind or when a pod is read for the first time (its count is its lifetime's).
    fresh = any(load.first_reading for load in answered)
    completed = None if blind or fresh else round(sum(load.renders for load in answered))
    reported = {name: load for name, load in loads.items() if isinstance(load, observing.PodLoad)}
    return policy.Observation(
        now=now,
        queue_depth=reading.depth,
        ready_replicas=len(ready),
        browsers_per_pod=reporting.most_common(sizes) or start_size,
        busy_browsers=busy,  # unknown if a ready pod did not answer: the policy uses the depth
        mean_render_s=observing.mean_render_s(reported),
        interactive_depth=reading.interactive_depth,
        completed=completed,
        finish_cpu_s=observing.finish_cpu_s(reported),
        signature_cpu_s=observing.signature_cpu_s(reported),
    )


async def scale(
    body: kopf.Body,
    *,
    kube: k8s.Kube,
    observer: observing.Observer,
    now: float,
    warnings: throttling.LogThrottle | None = None,
) -> Outcome | None:
    """One tick for one ReportPool; None if its Deployment was missing (then re-created)."""
    namespace, name = body.metadata.namespace or "", body.metadata.name or ""
    previous = dict(body.status)
    generation = body.metadata.get("generation")
    try:
        spec = specs.parse(body.spec)
    except specs.SpecError as error:
        return Outcome(
            decision=None,
            status=reporting.invalid_status(
                error, previous=previous, now=now, generation=generation
            ),
            events=reporting.invalid_events(error, previous=previous),
            seen=None,
        )
    deployment_path = k8s.object_path(
        "apps/v1", "Deployment", namespace, specs.Names(name).deployment
    )
    deployment = await kube.get(deployment_path)
    if deployment is None:
        logger.info("%s/%s: Deployment missing, reconciling", namespace, name)
        await reconciling.reconcile(body, spec, kube=kube)
        return None
    if reconciling.controlled_by_another(deployment, owner_uid=body.metadata.uid or ""):
        raise kopf.PermanentError(f"Deployment {deployment_path} belongs to another controller")
    items = await kube.list(
        k8s.collection_path("v1", "Pod", namespace), label_selector=specs.selector_labels(name)
    )
    found = pods_of(items)
    reading, loads = await asyncio.gather(
        observer.queue(namespace, spec.queue),
        observer.pod_loads({p.name: (p.uid, p.ip) for p in found if p.ip}),
    )
    observation = observe(
        now=now,
        reading=reading,
        pods=found,
        loads=loads,
        start_size=spec.start_pool_size,
    )
    state = policy.State.from_dict(previous.get("policy"))
    decision = policy.decide(observation, spec.policy, state)

    resized, errors = await resize_pools(
        body,
        spec,
        observer=observer,
        pods=found,
        loads=loads,
        size=decision.browsers_per_pod,
        warnings=warnings or throttling.LogThrottle(logger),
    )
    replicas = int(deployment.get("spec", {}).get("replicas", 0))
    if decision.replicas < replicas:
        busy, ages = busy_and_ages(found, loads)
        decision = policy.held_for_jobs(
            decision,
            current=replicas,
            outliving=policy.outliving(
                busy,
                oldest_s_by_pod=ages,
                render_s=observation.mean_render_s,
                drain_s=spec.drain_timeout_s,
            ),
        )
    if decision.replicas < replicas:
        await mark_idlest(
            kube,
            namespace=namespace,
            pods=found,
            loads=loads,
            render_s=observation.mean_render_s,
            drain_s=spec.drain_timeout_s,
        )
    if decision.replicas != replicas:
        await kube.merge_patch(deployment_path, {"spec": {"replicas": decision.replicas}})

    # The last known finishing CPU (else the spec's expected one), if none was read.
    sized_with = policy.remembered(observation, state, spec.policy)
    seen = findings.Seen(
        decision=decision,
        replicas_before=replicas,
        deployment_replicas=int(deployment.get("status", {}).get("replicas", 0)),
        ready_replicas=observation.ready_replicas,
        pods=found,
        loads=loads,
        queue=reading,
        queue_name=spec.queue.name,
        resized=resized,
        resize_errors=errors,
        spec_problems=spec.adjustments,
        finish_cpu_s=sized_with.finish_cpu_s,
        browser_cpu=capacity.sized(
            spec.policy, sized_with, render_s=decision.state.render_s
        ).browser_cpu,
        service_s=capacity.service_s(spec.policy, sized_with, render_s=decision.state.render_s),
    )
    status = reporting.status(seen, previous=previous, now=now, generation=generation)
    log_decision(body, observation=observation, decision=decision, previous=previous)
    return Outcome(
        decision=decision,
        status=status,
        events=reporting.events(seen, previous=previous, current=status["conditions"]),
        seen=seen,
    )


def log_decision(
    body: kopf.Body,
    *,
    observation: policy.Observation,
    decision: policy.Decision,
    previous: Mapping[str, Any],
) -> None:
    """One INFO line per new decision (size or reason changed), DEBUG for a repeated one.

    The fields go to the JSON log as they are (``pool``, ``from``, ``to``, ``reason``,
    ``inputs``); the text line says the same in words.
    """
    last = previous.get("lastDecision") or {}
    before = (last.get("replicas"), last.get("browsersPerPod"))
    after = (decision.replicas, decision.browsers_per_pod)
    new = before != after or last.get("reason") != decision.reason.value
    pool = f"{body.metadata.namespace}/{body.metadata.name}"
    inputs = {
        "queueDepth": observation.queue_depth,
        "interactiveDepth": observation.interactive_depth,
        "readyReplicas": observation.ready_replicas,
        "browsersPerPod": observation.browsers_per_pod,
        "busyBrowsers": observation.busy_browsers,
        "meanRenderSeconds": observation.mean_render_s,
        "finishCpuSeconds": observation.finish_cpu_s,
        **depth_trend(observation, previous.get("policy") or {}),
    }
    shown = "x".join("?" if value is None else str(value) for value in before)
    logger.log(
        logging.INFO if new else logging.DEBUG,
        "%s: %s -> %dx%d %s (depth %s, busy %s, need %d browsers)",
        pool,
        shown,
        *after,
        decision.reason.value,
        observation.queue_depth,
        "unknown" if observation.busy_browsers is None else observation.busy_browsers,
        decision.required_browsers,
        extra={
            "pool": pool,
            "from": {"replicas": before[0], "browsersPerPod": before[1]},
            "to": {"replicas": after[0], "browsersPerPod": after[1]},
            "reason": decision.reason.value,
            "decision": decision.message,
            "inputs": inputs,
        },
    )


def depth_trend(observation: policy.Observation, memory: Mapping[str, Any]) -> dict[str, Any]:
    """The queue depth at the previous decision and its trend since (jobs/s), as the policy
    sees them when it sizes blind."""
    depth, then = memory.get("depth"), memory.get("decidedAt")
    trend = None
    if observation.queue_depth is not None and depth is not None and then is not None:
        trend = round((observation.queue_depth - depth) / max(1.0, observation.now - then), 3)
    return {"previousDepth": depth, "depthTrendPerSecond": trend}


async def resize_pools(
    body: kopf.Body,
    spec: specs.ReportPoolSpec,
    *,
    observer: observing.Observer,
    pods: Sequence[Pod],
    loads: Loads,
    size: int,
    warnings: throttling.LogThrottle,
) -> tuple[list[str], list[str]]:
    """PUT /pool on each renderer that answered with another size.

    A failure is a WARNING through ``warnings`` (per pod: once per new reason, then a summary
    every few minutes, not one line per tick). Returns (the pods resized, ``pod: reason`` of
    each failure)."""
    targets = [
        pod
        for pod in pods
        if pod.ip
        and isinstance(load := loads.get(pod.name), observing.PodLoad)
        and load.size != size
    ]
    if not targets:
        return [], []
    try:
        token = await observer.admin_token(body.metadata.namespace or "", spec)
    except (KeyError, k8s.KubeError) as error:
        reason = f"admin token unreadable: {observing.short_reason(error)}"
        return [], [f"{pod.name}: {reason}" for pod in targets]
    results = await asyncio.gather(
        *(observer.resize(pod.ip or "", size, token=token) for pod in targets)
    )
    resized, failures = [], []
    for pod, failure in zip(targets, results, strict=True):
        key = f"{body.metadata.namespace}/{pod.name}"
        if failure is None:
            logger.info("pod %s: pool resized to %d browsers", pod.name, size)
            warnings.success(key)
            resized.append(pod.name)
        else:
            message = f"pool resize to {size} browsers failed: {failure}"
            warnings.failure(key, message, level=logging.WARNING)
            failures.append(f"{pod.name}: {failure}")
    return resized, failures


def busy_and_ages(
    pods: Sequence[Pod], loads: Loads
) -> tuple[dict[str, int | None], dict[str, float | None]]:
    """Per pod: its busy browsers (a job in finishing counts, ``observing.busy``) and its oldest
    job's age, as its renderer said them (None: it did not answer, or is too old to say its
    oldest job)."""
    answered = {
        pod.name: load for pod in pods if isinstance(load := loads.get(pod.name), observing.PodLoad)
    }
    busy = {
        pod.name: observing.busy(load) if (load := answered.get(pod.name)) else None for pod in pods
    }
    return busy, {name: load.oldest_s for name, load in answered.items()}


async def mark_idlest(
    kube: k8s.Kube,
    *,
    namespace: str,
    pods: Sequence[Pod],
    loads: Loads,
    render_s: float | None = None,
    drain_s: float | None = None,
) -> None:
    """Deletion costs from the policy's helper: a pod whose running job would outlive its drain
    (``drain_s``) last, then the idlest first; unknown load is spared."""
    busy, ages = busy_and_ages(pods, loads)
    costs = policy.deletion_costs(busy, oldest_s_by_pod=ages, render_s=render_s, drain_s=drain_s)
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
