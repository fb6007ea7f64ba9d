"""
The baseline: KEDA's azure-queue scaler driving an HPA (KEDA 2.x, autoscaling/v2), on the same
draining renderers as ours, configured as a preset (``default``, ``tuned``, ``tuned-120``) or any
``KedaHpaSettings``.

Two loops with their own timing phases:

- KEDA polls every ``polling_s``: 0 -> 1 when the queue holds a message (activation: not an HPA
  step, so not in the HPA's rate-limit history), 1 -> 0 once no message was seen for
  ``cooldown_s``. While the target is at zero the HPA does nothing.
- The HPA syncs every ``sync_s`` on the external metric (the approximate count, in-flight
  included) with an AverageValue target of ``queue_length`` per pod: desired = ceil(count /
  queueLength), unchanged while the ratio is within ``tolerance`` of 1. Stabilization as in
  ``stabilizeRecommendationWithBehaviors``: the highest recommendation of the scale-down window
  caps a decrease; scale-up window 0. Rate limits as ``convertDesiredReplicasWithBehaviorRate``:
  up to max(+``scale_up_percent`` %, +``scale_up_pods``) over the replicas at the start of the
  period, down by at most ``scale_down_percent`` % per period.
- The ReplicaSet picks victims: pods not ready first (newest first), then ready pods by time ready
  in log2 buckets (the most recently ready first), ties at random. No pod-deletion-cost is set.
  Victims drain (``farm.Farm.drain``), as our renderers do on SIGTERM whoever scales.
- Browsers per pod are fixed (``browsers_per_pod``), independent of ``queue_length``.
"""

from __future__ import annotations

import dataclasses
import math
import random

from reportfarm.simulate import farm as farming


@dataclasses.dataclass(frozen=True, kw_only=True)
class KedaHpaSettings:
    """One ScaledObject (with ``advanced.horizontalPodAutoscalerConfig.behavior``)."""

    queue_length: int
    """The azure-queue trigger's ``queueLength``: target messages per pod (KEDA default 5)."""
    browsers_per_pod: int
    """The renderer's REPORTFARM_POOL_SIZE: fixed, whatever the queueLength."""
    min_replicas: int = 0
    """``minReplicaCount`` (0: KEDA scales to zero)."""
    max_replicas: int = 20
    """``maxReplicaCount``."""
    polling_s: float = 30.0
    """``pollingInterval``: how often KEDA checks activation (0 <-> 1)."""
    cooldown_s: float = 300.0
    """``cooldownPeriod``: no message for this long -> zero."""
    sync_s: float = 15.0
    """The HPA controller's sync period (``--horizontal-pod-autoscaler-sync-period``)."""
    tolerance: float = 0.1
    """The HPA's tolerance around a usage ratio of 1."""
    scale_down_window_s: float = 300.0
    """``behavior.scaleDown.stabilizationWindowSeconds``."""
    scale_up_percent: float = 100.0
    """``behavior.scaleUp`` Percent policy (selectPolicy Max with the Pods policy)."""
    scale_up_pods: int = 4
    """``behavior.scaleUp`` Pods policy."""
    scale_up_period_s: float = 15.0
    """``periodSeconds`` of both scale-up policies."""
    scale_down_percent: float = 100.0
    """``behavior.scaleDown`` Percent policy."""
    scale_down_period_s: float = 15.0
    """``periodSeconds`` of the scale-down policy."""


PRESETS = ("default", "tuned", "tuned-120")


def preset(
    name: str, *, capacity: int, min_replicas: int = 0, max_replicas: int = 20
) -> KedaHpaSettings:
    """
    ``default``: what KEDA and the HPA do out of the box (queueLength 5, polling 30 s, HPA
    scale-down window 300 s, scale-up max(+100 %, +4 pods) per 15 s). ``tuned``: what a competent
    user sets with renderers that drain (queueLength = the browsers in a pod, polling 5 s,
    scale-down window 60 s, scale-up +20 pods per 15 s). ``tuned-120``: tuned with a 120 s window.
    ``capacity`` is the browsers in a pod (the same pods as ours).
    """
    base = KedaHpaSettings(
        queue_length=5,
        browsers_per_pod=capacity,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
    )
    if name == "default":
        return base
    tuned = dataclasses.replace(
        base, queue_length=capacity, polling_s=5.0, scale_down_window_s=60.0, scale_up_pods=20
    )
    if name == "tuned":
        return tuned
    if name == "tuned-120":
        return dataclasses.replace(tuned, scale_down_window_s=120.0)
    raise ValueError(f"unknown baseline preset {name!r}: use one of {', '.join(PRESETS)}")


class KedaHpaController:
    name = "keda_hpa"

    def __init__(
        self,
        *,
        settings: KedaHpaSettings,
        rng: random.Random,
        poll_phase_s: float = 0.0,
        sync_phase_s: float = 0.0,
    ):
        self.settings = settings
        self.rng = rng
        self.next_poll = poll_phase_s
        self.next_sync = sync_phase_s
        self.last_active: float | None = None
        self.recommendations: list[tuple[float, int]] = []
        self.events: list[tuple[float, int]] = []
        """(time, replica change) of the HPA's own rescales, for its rate limits."""

    def initial_browsers_per_pod(self) -> int:
        return self.settings.browsers_per_pod

    def tick(self, now: float, farm: farming.Farm) -> None:
        if now >= self.next_poll:
            self.next_poll += self.settings.polling_s
            self._keda_poll(now, farm)
        if now >= self.next_sync:
            self.next_sync += self.settings.sync_s
            if farm.replicas > 0:  # the HPA is inactive while KEDA holds the target at zero
                self._hpa_sync(now, farm)

    def _keda_poll(self, now: float, farm: farming.Farm) -> None:
        s = self.settings
        if farm.approximate_count(now) > 0:  # activationQueueLength 0
            self.last_active = now
            if farm.replicas == 0:
                self._scale(now, farm, max(1, s.min_replicas))
        elif farm.replicas > 0 and s.min_replicas == 0:
            if self.last_active is None or now - self.last_active >= s.cooldown_s:
                self._scale(now, farm, 0)

    def _hpa_sync(self, now: float, farm: farming.Farm) -> None:
        s = self.settings
        current, count = farm.replicas, farm.approximate_count(now)
        ratio = count / (s.queue_length * current)
        desired = current if abs(ratio - 1) <= s.tolerance else math.ceil(count / s.queue_length)
        window_start = now - s.scale_down_window_s
        self.recommendations = [(t, r) for t, r in self.recommendations if t > window_start]
        highest = max([desired, *(r for _, r in self.recommendations)])
        self.recommendations.append((now, desired))
        stabilized = max(current, desired) if desired > current else min(current, highest)
        replicas = self._limit(now, current=current, desired=stabilized)
        if replicas != current:
            self.events.append((now, replicas - current))
            self._scale(now, farm, replicas)

    def _limit(self, now: float, *, current: int, desired: int) -> int:
        s = self.settings
        if desired > current:
            added = sum(d for t, d in self.events if d > 0 and t > now - s.scale_up_period_s)
            start = current - added
            by_percent = math.ceil(start * (1 + s.scale_up_percent / 100))
            desired = min(desired, max(by_percent, start + s.scale_up_pods))
        elif desired < current:
            removed = -sum(d for t, d in self.events if d < 0 and t > now - s.scale_down_period_s)
            start = current + removed
            desired = max(desired, math.floor(start * (1 - s.scale_down_percent / 100)))
        horizon = max(s.scale_up_period_s, s.scale_down_period_s)
        self.events = [(t, d) for t, d in self.events if t > now - horizon]
        return max(1, min(s.max_replicas, max(s.min_replicas, desired)))

    def _scale(self, now: float, farm: farming.Farm, replicas: int) -> None:
        delta = replicas - farm.replicas
        if delta > 0:
            farm.add_pods(delta, now=now)
        elif delta < 0:
            farm.drain(victims(farm, now=now, rng=self.rng)[:-delta], now=now)


def victims(farm: farming.Farm, *, now: float, rng: random.Random) -> list[str]:
    """The ReplicaSet's deletion order without pod-deletion-cost (``ActivePodsWithRanks``):
    not-ready pods first (newest first), then ready pods by log2 bucket of time ready (the most
    recently ready first), ties at random."""

    def rank(pod: farming.Pod) -> tuple[int, float, float]:
        if pod.ready_at > now:
            return (0, -pod.created_at, rng.random())
        return (1, math.floor(math.log2(max(1.0, now - pod.ready_at))), rng.random())

    live = [pod for pod in farm.pods if not pod.draining]
    return [pod.name for pod in sorted(live, key=rank)]
