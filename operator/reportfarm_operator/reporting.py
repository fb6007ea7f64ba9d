"""What a ReportPool says about itself: its status and its Events. Pure.

The status reports what was seen, never what was only asked for: per pod, the pool size is the
one the pod itself reported (absent when it did not answer); ``browsers`` (the BROWSERS column)
is ``running/desired``, with ``?`` for running while a ready pod's metrics are unreadable.
``reason`` (the REASON column) is the most pressing fact: an invalid spec, an unreachable queue,
pods Kubernetes cannot run, failed resizes; else the last decision's reason. The conditions are
in ``conditions`` (``reportfarm_operator.conditions``).

Events only for what happened: the Deployment's replicas changed, pools were resized (naming the
pods), a resize failed (Warning, pod and reason), and a condition turned bad or good again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from reportfarm import policy
from reportfarm_operator import conditions as conditioning
from reportfarm_operator import findings, observing, specs

MAX_PODS_IN_STATUS = 50
"""Pods listed one by one in the status (the rest are counted): a status stays small."""
_GROWING = frozenset({policy.Reason.SCALE_UP, policy.Reason.WAKE_FROM_ZERO})
_SHRINKING = frozenset({policy.Reason.SCALE_DOWN, policy.Reason.SCALE_TO_ZERO})


@dataclasses.dataclass(frozen=True)
class Event:
    type: str
    """Normal or Warning."""
    reason: str
    message: str


timestamp = conditioning.timestamp


def most_common(sizes: Sequence[int]) -> int | None:
    return max(sorted(set(sizes)), key=sizes.count) if sizes else None


def status(
    seen: findings.Seen, *, previous: Mapping[str, Any], now: float, generation: int | None
) -> dict[str, Any]:
    """The status to write. None values delete a field (merge patch): "unknown"."""
    decision = seen.decision
    changed = (decision.replicas, decision.browsers_per_pod) != (
        previous.get("replicas"),
        previous.get("browsersPerPod"),
    )
    found = conditioning.conditions(
        seen, previous=previous.get("conditions") or [], now=now, generation=generation
    )
    running, desired = seen.running_browsers, decision.replicas * decision.browsers_per_pod
    reason, message = headline(found, decision=decision)
    return {
        "observedGeneration": generation,
        "reason": reason,
        "message": message,
        "replicas": decision.replicas,
        "browsersPerPod": decision.browsers_per_pod,
        "browsers": f"{'?' if running is None else running}/{desired}",
        "runningBrowsers": running,
        "desiredBrowsers": desired,
        "currentReplicas": seen.deployment_replicas,
        "readyReplicas": seen.ready_replicas,
        "currentBrowsersPerPod": most_common(seen.pool_sizes),
        "pods": pod_list(seen),
        "podsNotListed": max(0, len(seen.pods) - MAX_PODS_IN_STATUS) or None,
        "queueDepth": seen.queue.depth,
        "poisonDepth": seen.queue.poison_depth,
        "requiredBrowsers": decision.required_browsers,
        "lastDecision": {
            "reason": decision.reason.value,
            "message": decision.message,
            "replicas": decision.replicas,
            "browsersPerPod": decision.browsers_per_pod,
            "reachedReplicas": seen.ready_replicas,
            "reachedBrowsersPerPod": most_common(seen.pool_sizes),
            "finishCpuSeconds": _rounded(seen.finish_cpu_s),
            "browserCpu": _rounded(seen.browser_cpu),
            "serviceSeconds": _rounded(seen.service_s),
            "time": timestamp(now),
        },
        "lastScaleTime": timestamp(now) if changed else previous.get("lastScaleTime"),
        "conditions": found,
        "policy": decision.state.to_dict(),
    }


def _rounded(value: float | None) -> float | None:
    """A figure for the status, to 3 decimals (None if unknown)."""
    return None if value is None else round(value, 3)


def headline(
    found: Sequence[Mapping[str, Any]], *, decision: policy.Decision | None
) -> tuple[str, str]:
    """(reason, message) for the REASON column: Degraded's reason when it is true, else the
    last decision's."""
    degraded = next((c for c in found if c["type"] == "Degraded"), None)
    if degraded is not None and degraded["status"] == "True":
        return str(degraded["reason"]), str(degraded["message"])
    if decision is None:
        return "Unknown", ""
    return decision.reason.value, decision.message


def pod_list(seen: findings.Seen) -> list[dict[str, Any]]:
    listed = []
    for pod in seen.pods[:MAX_PODS_IN_STATUS]:
        load = seen.loads.get(pod.name)
        entry: dict[str, Any] = {"name": pod.name, "phase": pod.phase, "ready": pod.ready}
        if isinstance(load, observing.PodLoad):
            entry["poolSize"], entry["busy"] = load.size, load.busy
        elif pod.ip:
            entry["metrics"] = load or "not read"
        if pod.stuck_reason:
            entry["reason"] = pod.stuck_reason
            entry["message"] = pod.stuck_message
        listed.append(entry)
    return listed


def invalid_status(
    error: specs.SpecError,
    *,
    previous: Mapping[str, Any],
    now: float,
    generation: int | None,
) -> dict[str, Any]:
    """The status of a pool whose spec cannot be used: nothing is decided, the size is kept."""
    found = conditioning.invalid(
        error, previous=previous.get("conditions") or [], now=now, generation=generation
    )
    reason, message = headline(found, decision=None)
    return {"observedGeneration": generation, "reason": reason, "message": message} | {
        "conditions": found
    }


def events(
    seen: findings.Seen, *, previous: Mapping[str, Any], current: Sequence[Mapping[str, Any]]
) -> list[Event]:
    """Events for what this tick did, and for conditions that turned bad or good again
    (``current``: this tick's conditions)."""
    found = []
    decision = seen.decision
    before, after = seen.replicas_before, decision.replicas
    if after != before:
        reason = decision.reason
        if reason not in (_GROWING if after > before else _SHRINKING):
            reason = policy.Reason.SCALE_UP if after > before else policy.Reason.SCALE_DOWN
        found.append(Event("Normal", reason.value, f"{before} -> {after} pods: {decision.message}"))
    if seen.resized:
        olds = {
            load.size
            for name in seen.resized
            if isinstance(load := seen.loads.get(name), observing.PodLoad)
        }
        grow = all(old < decision.browsers_per_pod for old in olds)
        reason = policy.Reason.POOL_GROW if grow else policy.Reason.POOL_SHRINK
        pods_text = ", ".join(seen.resized[:10]) + (" ..." if len(seen.resized) > 10 else "")
        message = f"{len(seen.resized)} pod(s) now run {decision.browsers_per_pod} browsers: "
        found.append(Event("Normal", reason.value, message + pods_text))
    was = {str(c.get("type")): c for c in previous.get("conditions") or []}
    if seen.resize_errors:  # once per new wording (another reason, other pods)
        text = conditioning.resize_failure(seen)
        degraded = was.get("Degraded", {})
        if "PoolResizeFailed" not in str(degraded.get("reason", "")).split(",") or text not in str(
            degraded.get("message", "")
        ):
            found.append(Event("Warning", "PoolResizeFailed", text))
    found += [Event(*event) for event in conditioning.transitions(current, was=was)]
    return found


def invalid_events(error: specs.SpecError, *, previous: Mapping[str, Any]) -> list[Event]:
    """One Warning per new wording of the problem (not one every tick)."""
    was = {str(c.get("type")): c for c in previous.get("conditions") or []}
    spec_valid = was.get("SpecValid", {})
    if spec_valid.get("status") == "False" and spec_valid.get("message") == str(error)[:1000]:
        return []
    return [Event("Warning", "InvalidSpec", str(error)[:1000])]
