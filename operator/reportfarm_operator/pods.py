"""The renderer pods as the scaling loop and the status see them: ready, starting, or stuck.

A pod is *stuck* when Kubernetes itself says it cannot progress: the scheduler found no node
(``PodScheduled=False``, e.g. ``0/3 nodes are available: 3 Insufficient cpu``) or a container
waits for a reason other than creation (``ImagePullBackOff``, ``CrashLoopBackOff``, ...). A pod
that is merely being created or started is *starting*, not a problem.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_STARTING = frozenset({"ContainerCreating", "PodInitializing"})


@dataclasses.dataclass(frozen=True)
class Pod:
    name: str
    uid: str
    ip: str | None
    ready: bool
    deletion_cost: str | None
    phase: str = "Running"
    stuck_reason: str | None = None
    """Why Kubernetes cannot run it (``Unschedulable``, ``ImagePullBackOff``); None if not stuck."""
    stuck_message: str = ""
    """Kubernetes' own words for it (the scheduler's message, the kubelet's)."""


def pods_of(items: Sequence[Mapping[str, Any]]) -> list[Pod]:
    """The pods that count: not terminating (a terminating pod drains and is gone)."""
    found = []
    for item in items:
        meta, status = item.get("metadata", {}), item.get("status", {})
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        reason, message = _stuck(status)
        found.append(
            Pod(
                name=meta["name"],
                uid=meta.get("uid", ""),
                ip=status.get("podIP") or None,
                ready=ready,
                deletion_cost=(meta.get("annotations") or {}).get(DELETION_COST),
                phase=str(status.get("phase") or "Pending"),
                stuck_reason=reason,
                stuck_message=message,
            )
        )
    return sorted(found, key=lambda pod: pod.name)


def _stuck(status: Mapping[str, Any]) -> tuple[str | None, str]:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("reason") or "Unschedulable"), _line(condition)
    containers = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    for container in containers:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason and reason not in _STARTING:
            return str(reason), _line(waiting)
    return None, ""


def _line(source: Mapping[str, Any]) -> str:
    text = str(source.get("message") or "").strip()
    return text.splitlines()[0][:300] if text else ""
