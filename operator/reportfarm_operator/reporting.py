"""What a ReportPool says about itself: its status (with conditions) and its Events. Pure.

Conditions (``lastTransitionTime`` moves only when the status flips):
- ``Ready``: the pool can render: a pod is ready, or none is wanted (scaled to zero).
- ``QueueReachable``: the last queue read worked; if not, the size is kept as it was.
- ``Scaling``: pods or pool sizes are still converging to the last decision.
- ``Degraded``: something keeps the pool from what it needs (queue unreadable, resizes failing,
  or the need exceeds ``replicas.max`` full pods).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from reportfarm import policy

CHANGES = frozenset(
    {
        policy.Reason.SCALE_UP,
        policy.Reason.SCALE_DOWN,
        policy.Reason.POOL_GROW,
        policy.Reason.POOL_SHRINK,
        policy.Reason.WAKE_FROM_ZERO,
        policy.Reason.SCALE_TO_ZERO,
    }
)
"""Decisions that change the size: each gets an Event."""


@dataclasses.dataclass(frozen=True)
class Event:
    type: str
    """Normal or Warning."""
    reason: str
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Seen:
    """What one tick observed and did, as the status reports it."""

    decision: policy.Decision
    deployment_replicas: int
    """Pods the Deployment has (its status), before this tick's change."""
    ready_replicas: int
    pool_sizes: Sequence[int]
    """The pool size of each renderer that answered."""
    queue_depth: int | None
    poison_depth: int | None
    queue_error: str | None
    resize_errors: Sequence[str] = ()


def timestamp(now: float) -> str:
    """RFC 3339, as Kubernetes writes times."""
    return datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def most_common(sizes: Sequence[int]) -> int | None:
    return max(sorted(set(sizes)), key=sizes.count) if sizes else None


def status(
    seen: Seen, *, previous: Mapping[str, Any], now: float, generation: int | None
) -> dict[str, Any]:
    """The status to write. None values delete a field (merge patch): "unknown"."""
    decision = seen.decision
    changed = (decision.replicas, decision.browsers_per_pod) != (
        previous.get("replicas"),
        previous.get("browsersPerPod"),
    )
    return {
        "observedGeneration": generation,
        "replicas": decision.replicas,
        "browsersPerPod": decision.browsers_per_pod,
        "currentReplicas": seen.deployment_replicas,
        "readyReplicas": seen.ready_replicas,
        "currentBrowsersPerPod": most_common(seen.pool_sizes),
        "queueDepth": seen.queue_depth,
        "poisonDepth": seen.poison_depth,
        "requiredBrowsers": decision.required_browsers,
        "lastDecision": {
            "reason": decision.reason.value,
            "message": decision.message,
            "replicas": decision.replicas,
            "browsersPerPod": decision.browsers_per_pod,
            "time": timestamp(now),
        },
        "lastScaleTime": timestamp(now) if changed else previous.get("lastScaleTime"),
        "conditions": conditions(
            seen, previous=previous.get("conditions") or [], now=now, generation=generation
        ),
        "policy": decision.state.to_dict(),
    }


def conditions(
    seen: Seen, *, previous: Sequence[Mapping[str, Any]], now: float, generation: int | None
) -> list[dict[str, Any]]:
    decision = seen.decision
    wanted, ready = decision.replicas, seen.ready_replicas
    pods = f"{ready}/{wanted} pods ready"
    if wanted == 0:
        ready_condition = (True, "ScaledToZero", "no work: zero pods")
    else:
        ready_condition = (ready > 0, "PodsReady" if ready else "PodsNotReady", pods)
    if seen.queue_error is None:
        queue = (True, "QueueRead", f"depth {seen.queue_depth}, poison {seen.poison_depth}")
    else:
        queue = (False, "QueueUnreadable", f"keeping the current size: {seen.queue_error}")
    resizing = any(size != decision.browsers_per_pod for size in seen.pool_sizes)
    if seen.deployment_replicas != wanted or ready != wanted:
        direction = "ScalingUp" if wanted > min(ready, seen.deployment_replicas) else "ScalingDown"
        scaling = (True, direction, f"{pods}, {seen.deployment_replicas} exist")
    elif resizing:
        scaling = (True, "ResizingPools", f"pools -> {decision.browsers_per_pod} browsers")
    else:
        scaling = (False, "Stable", f"{wanted} pods x {decision.browsers_per_pod} browsers")
    if seen.resize_errors:
        degraded = (True, "PoolResizeFailed", "; ".join(seen.resize_errors)[:1000])
    elif seen.queue_error is not None:
        degraded = (True, "QueueUnreadable", queue[2])
    elif decision.saturated:
        degraded = (True, "AtMaxReplicas", f"need {decision.required_browsers} browsers")
    else:
        degraded = (False, "AsExpected", "")
    old = {str(c.get("type")): c for c in previous}
    return [
        _condition(kind, value, old=old.get(kind), now=now, generation=generation)
        for kind, value in (
            ("Ready", ready_condition),
            ("QueueReachable", queue),
            ("Scaling", scaling),
            ("Degraded", degraded),
        )
    ]


def _condition(
    kind: str,
    value: tuple[bool, str, str],
    *,
    old: Mapping[str, Any] | None,
    now: float,
    generation: int | None,
) -> dict[str, Any]:
    flag, reason, message = value
    state = "True" if flag else "False"
    since = old.get("lastTransitionTime") if old and old.get("status") == state else None
    return {
        "type": kind,
        "status": state,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or timestamp(now),
        "observedGeneration": generation,
    }


def events(seen: Seen, *, previous: Mapping[str, Any]) -> list[Event]:
    """An Event for each size change, and one when the queue becomes (un)reachable."""
    found = []
    decision = seen.decision
    if decision.reason in CHANGES:
        found.append(Event("Normal", decision.reason.value, decision.message))
    was = {str(c.get("type")): c for c in previous.get("conditions") or []}
    queue_was = was.get("QueueReachable", {}).get("status")
    reachable = seen.queue_error is None
    if not reachable and queue_was != "False":
        found.append(Event("Warning", "QueueUnreadable", f"keeping the size: {seen.queue_error}"))
    elif reachable and queue_was == "False":
        found.append(Event("Normal", "QueueReachable", f"queue depth {seen.queue_depth}"))
    if seen.resize_errors and was.get("Degraded", {}).get("reason") != "PoolResizeFailed":
        found.append(Event("Warning", "PoolResizeFailed", "; ".join(seen.resize_errors)[:1000]))
    return found
