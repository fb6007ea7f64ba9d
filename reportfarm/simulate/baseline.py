"""
The baseline: KEDA's azure-queue scaler driving an HPA, with the defaults users keep (KEDA's
docs and the HPA's algorithm in kube-controller-manager).

- KEDA polls every 30 s for activation: 0 -> 1 when the queue holds a message, 1 -> 0 when it has
  held none for the 300 s cooldown. While at zero the HPA does not act.
- The HPA syncs every 15 s on the external metric (the approximate count, in-flight included) with
  an AverageValue target of ``queueLength`` = browsers per pod: desired = ceil(count / target),
  unchanged within the 0.1 tolerance; scale-down takes the highest recommendation of the last
  300 s; scale-up is limited to max(+100 %, +4 pods) per 15 s; scale-down to -100 % per 15 s.
- Browsers per pod are fixed. Which pod goes is the ReplicaSet's choice (not-ready pods first,
  then arbitrary with respect to load: modelled at random); running renders are lost.
"""

from __future__ import annotations

import dataclasses
import math
import random

from reportfarm.simulate import farm as farming


@dataclasses.dataclass(frozen=True, kw_only=True)
class KedaHpaSettings:
    """A ScaledObject with the defaults users keep (KEDA 2.x, autoscaling/v2 HPA)."""

    queue_length: int
    """The azure-queue trigger's target messages per pod (here: the browsers per pod)."""
    min_replicas: int = 0
    max_replicas: int = 20
    polling_s: float = 30.0
    cooldown_s: float = 300.0
    sync_s: float = 15.0
    tolerance: float = 0.1
    scale_down_stabilization_s: float = 300.0
    scale_up_percent: float = 100.0
    scale_up_pods: int = 4
    scale_period_s: float = 15.0


class KedaHpaController:
    name = "keda_hpa"

    def __init__(self, *, settings: KedaHpaSettings, rng: random.Random, phase_s: float = 0.0):
        self.settings = settings
        self.rng = rng
        self.next_poll = phase_s
        self.next_sync = phase_s
        self.last_active: float | None = None
        self.recommendations: list[tuple[float, int]] = []
        self.events: list[tuple[float, int]] = []  # (time, replica delta) for the rate limits

    def initial_browsers_per_pod(self) -> int:
        return self.settings.queue_length

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
        self.recommendations.append((now, desired))
        window_start = now - s.scale_down_stabilization_s
        self.recommendations = [(t, r) for t, r in self.recommendations if t > window_start]
        # The HPA's stabilizeRecommendationWithBehaviors: up-window 0 s, down-window 300 s.
        highest = max(r for _, r in self.recommendations)
        stabilized = desired if desired > current else min(current, highest)
        self._scale(now, farm, self._limit(now, current=current, desired=stabilized))

    def _limit(self, now: float, *, current: int, desired: int) -> int:
        s = self.settings
        self.events = [(t, d) for t, d in self.events if t > now - s.scale_period_s]
        if desired > current:
            period_start = current - sum(d for _, d in self.events if d > 0)
            by_percent = math.ceil(period_start * (1 + s.scale_up_percent / 100))
            desired = min(desired, max(by_percent, period_start + s.scale_up_pods))
        return max(1, min(s.max_replicas, max(s.min_replicas, desired)))

    def _scale(self, now: float, farm: farming.Farm, replicas: int) -> None:
        delta = replicas - farm.replicas
        if delta == 0:
            return
        self.events.append((now, delta))
        if delta > 0:
            farm.add_pods(delta, now=now)
            return
        starting = farm.starting(now)
        ready = [name for name in farm.busy_by_pod(now) if name not in starting]
        self.rng.shuffle(ready)
        farm.kill((starting + ready)[:-delta], now=now)
