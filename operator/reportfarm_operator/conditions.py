"""A ReportPool's conditions: what an admin reads first. Pure.

``lastTransitionTime`` moves only when a condition's status flips.

- ``Ready``: the pool can render: a pod is ready, or none is wanted (scaled to zero) and the
  queue was read (an unreadable queue is never Ready: its work is unknown).
- ``QueueReachable``: the last queue read worked. A queue that does not exist yet is reachable
  (``QueueNotCreated``: waiting for the first job; a lane not created yet is named in the
  message); an unreadable one keeps the current size.
- ``MetricsReadable``: every ready renderer answered ``/metrics``. False (``Blind``): busy
  browsers are unknown, the policy sizes from the queue depth alone; the message names each
  silent pod and why (timeout, connection refused, HTTP status).
- ``PodsRunning``: every pod runs. False with Kubernetes' reason (``Unschedulable``,
  ``ImagePullBackOff``, ``CrashLoopBackOff``) when pods are stuck, or ``Starting`` while they start.
- ``Scaling``: pods or pool sizes still converge to the last decision (pool sizes as reported).
- ``SpecValid``: the spec is usable as written; False names the field (``InvalidSpec``: nothing
  is scaled; ``SpecAdjusted``: a value was lowered to what fits).
- ``Degraded``: something keeps the pool from what it needs: an invalid spec, the queue
  unreadable, pods stuck, resizes failing, or the need exceeds ``replicas.max`` full pods. All of
  those at once are listed: the reason joins them with commas (``Unschedulable,AtMaxReplicas``),
  the message has one short clause each.

A condition that turns good because there is nothing left to check (no ready pod to read, no
pod to run) is not a recovery: it gets no Normal Event.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from reportfarm_operator import findings, specs

TYPES = ("Ready", "QueueReachable", "MetricsReadable", "PodsRunning", "Scaling", "SpecValid")
_MAX_MESSAGE = 1000
_MAX_PODS_NAMED = 10
"""Pods named one by one in a message; the rest are counted."""
VACUOUS = frozenset({"NoReadyPods", "NoPods"})
"""Reasons of a condition that holds only because there is nothing to check."""

Value = tuple[bool, str, str]


def timestamp(now: float) -> str:
    """RFC 3339, as Kubernetes writes times."""
    return datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(
    seen: findings.Seen,
    *,
    previous: Sequence[Mapping[str, Any]],
    now: float,
    generation: int | None,
) -> list[dict[str, Any]]:
    values = {
        "Ready": _ready(seen),
        "QueueReachable": _queue(seen),
        "MetricsReadable": _metrics(seen),
        "PodsRunning": _pods(seen),
        "Scaling": _scaling(seen),
        "SpecValid": _spec(seen.spec_problems),
    }
    values["Degraded"] = _degraded(seen, values)
    return _build(values, previous=previous, now=now, generation=generation)


def invalid(
    error: specs.SpecError,
    *,
    previous: Sequence[Mapping[str, Any]],
    now: float,
    generation: int | None,
) -> list[dict[str, Any]]:
    """The conditions of a pool whose spec cannot be used; the others stay as they were."""
    message = str(error)[:_MAX_MESSAGE]
    values: dict[str, Value] = {
        "SpecValid": (False, "InvalidSpec", message),
        "Degraded": (True, "InvalidSpec", f"nothing is scaled, the size is kept: {message}"),
    }
    kept = [dict(c) for c in previous if c.get("type") not in values]
    return kept + _build(values, previous=previous, now=now, generation=generation)


def transitions(
    current: Sequence[Mapping[str, Any]], *, was: Mapping[str, Mapping[str, Any]]
) -> Iterator[tuple[str, str, str]]:
    """(type, reason, message) of the Events for conditions that turned bad or good again."""
    for condition in current:
        kind, reason, message = condition["type"], condition["reason"], condition["message"]
        good = condition["status"] == ("False" if kind == "Degraded" else "True")
        old = was.get(kind)
        if kind in ("Ready", "Scaling", "Degraded") or reason == "Starting":
            continue  # they follow every decision; Degraded repeats the others
        if not good and (
            old is None
            or (old.get("status"), old.get("reason"))
            != (
                condition["status"],
                reason,
            )
        ):
            yield "Warning", reason, message
        elif (
            good
            and reason not in VACUOUS
            and old is not None
            and old.get("status") != condition["status"]
        ):
            yield "Normal", kind, message


def _ready(seen: findings.Seen) -> Value:
    wanted, ready = seen.decision.replicas, seen.ready_replicas
    if seen.queue.error is not None:
        return False, "QueueUnreadable", f"{ready}/{wanted} pods ready; the queue is unreadable"
    if wanted == 0:
        return True, "ScaledToZero", "no work: zero pods"
    return ready > 0, "PodsReady" if ready else "PodsNotReady", f"{ready}/{wanted} pods ready"


def _queue(seen: findings.Seen) -> Value:
    reading = seen.queue
    if reading.error is not None:
        return False, "QueueUnreadable", f"keeping the current size: {reading.error}"
    if reading.missing:
        return (
            True,
            "QueueNotCreated",
            (f"waiting for the first job: queue {seen.queue_name} does not exist yet"),
        )
    text = f"depth {reading.depth}, poison {reading.poison_depth}"
    if reading.missing_lanes:
        text += f"; not created yet (empty): {', '.join(reading.missing_lanes)}"
    return True, "QueueRead", text


def _metrics(seen: findings.Seen) -> Value:
    silent = seen.silent
    if silent:
        return (
            False,
            "Blind",
            (
                f"running blind: {len(silent)} ready pod(s) did not answer /metrics "
                f"({grouped(silent)}); busy browsers unknown, sized from the queue depth"
            )[:_MAX_MESSAGE],
        )
    ready = sum(1 for pod in seen.pods if pod.ready)
    if not ready:
        return True, "NoReadyPods", "no ready pod to read"
    return True, "MetricsRead", f"{ready} ready pod(s) answered /metrics"


def grouped(reasons: Mapping[str, str]) -> str:
    """``why: pod, pod; why: pod``: each reason once, however many pods share it."""
    by_reason: dict[str, list[str]] = {}
    for name, why in sorted(reasons.items()):
        by_reason.setdefault(why, []).append(name)
    parts = []
    for why, names in by_reason.items():
        shown = ", ".join(names[:_MAX_PODS_NAMED])
        more = f" and {len(names) - _MAX_PODS_NAMED} more" if len(names) > _MAX_PODS_NAMED else ""
        parts.append(f"{why}: {shown}{more}")
    return "; ".join(parts)


def _pods(seen: findings.Seen) -> Value:
    stuck = [pod for pod in seen.pods if pod.stuck_reason]
    if stuck:
        first = stuck[0]
        text = f"{len(stuck)} of {len(seen.pods)} pods stuck: {first.name}: {first.stuck_reason}"
        return (
            False,
            str(first.stuck_reason),
            (f"{text} ({first.stuck_message})" if first.stuck_message else text)[:_MAX_MESSAGE],
        )
    starting = [pod for pod in seen.pods if pod.phase != "Running"]
    if starting:
        return False, "Starting", f"{len(starting)} of {len(seen.pods)} pods starting"
    if not seen.pods:
        return True, "NoPods", "no pods"
    return True, "AllRunning", f"{len(seen.pods)} pods running"


def _scaling(seen: findings.Seen) -> Value:
    decision = seen.decision
    wanted, ready, exist = decision.replicas, seen.ready_replicas, seen.deployment_replicas
    pods = f"{ready}/{wanted} pods ready"
    if exist != wanted or ready != wanted:
        direction = "ScalingUp" if wanted > min(ready, exist) else "ScalingDown"
        return True, direction, f"{pods}, {exist} exist"
    sizes = seen.pool_sizes
    want = decision.browsers_per_pod
    if any(size != want for size in sizes):
        listed = ", ".join(str(size) for size in sorted(sizes))
        return True, "ResizingPools", f"pods report {listed} browsers, {want} asked"
    if seen.silent:
        return (
            False,
            "Unverified",
            (f"{wanted} pods; browsers per pod unknown (metrics unreadable), {want} asked"),
        )
    return False, "Stable", f"{wanted} pods x {want} browsers, as reported by the pods"


def _spec(problems: Sequence[specs.Problem]) -> Value:
    if problems:
        return False, "SpecAdjusted", "; ".join(map(str, problems))[:_MAX_MESSAGE]
    return True, "SpecUsable", "the spec is used as written"


def _degraded(seen: findings.Seen, values: Mapping[str, Value]) -> Value:
    """Every active reason, most pressing first."""
    pods_running = values["PodsRunning"]
    active: list[tuple[str, str]] = []
    if seen.queue.error is not None:
        active.append(("QueueUnreadable", values["QueueReachable"][2]))
    if not pods_running[0] and pods_running[1] != "Starting":
        active.append((pods_running[1], pods_running[2]))  # Kubernetes' reason: Unschedulable
    if seen.resize_errors:
        active.append(("PoolResizeFailed", resize_failure(seen)))
    if seen.decision.saturated:
        active.append(("AtMaxReplicas", f"need {seen.decision.required_browsers} browsers"))
    if not active:
        return False, "AsExpected", ""
    reasons = ",".join(reason for reason, _ in active)
    return True, reasons, "; ".join(message for _, message in active)[:_MAX_MESSAGE]


def resize_failure(seen: findings.Seen) -> str:
    """The failed resizes in one clause, each reason once: ``resize failed (why: pod, pod)``."""
    reasons = {}
    for text in seen.resize_errors:  # ``pod: reason``
        pod, _, why = text.partition(": ")
        reasons[pod] = why
    return f"resize failed ({grouped(reasons)})"


def _build(
    values: Mapping[str, Value],
    *,
    previous: Sequence[Mapping[str, Any]],
    now: float,
    generation: int | None,
) -> list[dict[str, Any]]:
    old = {str(c.get("type")): c for c in previous}
    built = []
    for kind, (flag, reason, message) in values.items():
        state = "True" if flag else "False"
        was = old.get(kind)
        since = was.get("lastTransitionTime") if was and was.get("status") == state else None
        built.append(
            {
                "type": kind,
                "status": state,
                "reason": reason,
                "message": message,
                "lastTransitionTime": since or timestamp(now),
                "observedGeneration": generation,
            }
        )
    return built
