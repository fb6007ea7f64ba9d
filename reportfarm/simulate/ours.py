"""Our strategy: the operator's timer calls the pure policy and applies its decision to the farm."""

from __future__ import annotations

from typing import Any

from reportfarm import policy
from reportfarm.simulate import farm as farming


class PolicyController:
    """Every ``interval_s``: observe, ``policy.decide``, resize pools, drain the idlest pods."""

    name = "reportfarm"

    def __init__(
        self,
        *,
        spec: policy.PoolSpec,
        interval_s: float = 5.0,
        phase_s: float = 0.0,
        blind: tuple[tuple[float, float], ...] = (),
    ):
        self.spec = spec
        self.blind = blind
        """(from, to) seconds when the renderers' metrics cannot be read."""
        self.interval_s = interval_s
        self.next_at = phase_s
        self.status: dict[str, Any] = {}
        """The scaling memory as the operator keeps it: a plain dict in the ReportPool status."""
        self.reasons: dict[str, int] = {}
        self.annotated: dict[str, list[tuple[float, int]]] = {}
        """Per pod, the pod-deletion costs written and when (the ReplicaSet sees each one
        ``deletion_cost_lag_s`` later)."""

    def initial_browsers_per_pod(self) -> int:
        return self.spec.fewest_browsers

    def tick(self, now: float, farm: farming.Farm) -> None:
        if now < self.next_at:
            return
        self.next_at += self.interval_s
        blind = any(start <= now < end for start, end in self.blind)
        # What scaling.observe reads: busy browsers from the pods not terminating (a job in
        # finishing counts), the render time and count from the renderers' counters since the
        # previous tick (renders that ended, not renders that started), else their lifetime
        # mean, and a job's finishing CPU per job ended (None before one ended).
        completed, seconds = farm.read_renders(now)
        finish_cpu_s = farm.read_finish_cpu(now)
        lifetime, lifetime_s = farm.lifetime
        mean = seconds / completed if completed else (lifetime_s / lifetime if lifetime else None)
        observation = policy.Observation(
            now=now,
            queue_depth=farm.approximate_count(now),
            ready_replicas=farm.ready(now),
            browsers_per_pod=farm.browsers_per_pod,
            busy_browsers=None if blind else farm.busy_seen(now),
            mean_render_s=None if blind else mean,
            completed=None if blind else completed,
            finish_cpu_s=None if blind else finish_cpu_s,
            signature_cpu_s=None if blind else farm.read_signature_cpu(now),
        )
        state = policy.State.from_dict(self.status)
        decision = policy.decide(observation, spec=self.spec, state=state)
        if decision.replicas < farm.replicas and not blind:  # as the operator: jobs a drain
            decision = policy.held_for_jobs(  # would interrupt keep their pods for now
                decision,
                current=farm.replicas,
                outliving=policy.outliving(
                    farm.busy_by_pod(now),
                    oldest_s_by_pod=farm.oldest_by_pod(now),
                    render_s=observation.mean_render_s,
                    drain_s=farm.timings.drain_timeout_s,
                ),
            )
        self.status = decision.state.to_dict()
        self.reasons[decision.reason.value] = self.reasons.get(decision.reason.value, 0) + 1
        farm.resize(decision.browsers_per_pod, now=now)
        surplus = farm.replicas - decision.replicas
        if surplus < 0:
            farm.add_pods(-surplus, now=now)
        elif surplus > 0:  # annotate pod-deletion-cost, lower replicas: the idlest pods drain
            victims = self.victims(
                surplus, now=now, farm=farm, blind=blind, render_s=observation.mean_render_s
            )
            farm.drain(victims, now=now)

    def victims(
        self,
        count: int,
        *,
        now: float,
        farm: farming.Farm,
        blind: bool,
        render_s: float | None = None,
    ) -> list[str]:
        """Annotate every pod's deletion cost (``policy.deletion_costs``, from what the operator
        reads: busy browsers, the oldest job's age, the mean render time, the drain timeout),
        then the pods the ReplicaSet removes: not ready first (newest first), then by the costs
        it sees."""
        starting = farm.starting(now)[::-1]
        loads: dict[str, int | None] = dict(farm.busy_by_pod(now))
        if blind:  # no metrics, no pod-deletion-cost: the ReplicaSet's own order
            loads = dict.fromkeys(loads)
        costs = policy.deletion_costs(
            loads,
            oldest_s_by_pod=farm.oldest_by_pod(now),
            render_s=render_s,
            drain_s=farm.timings.drain_timeout_s,
        )
        for name, cost in costs.items():
            kept = self.annotated.setdefault(name, [])[-9:]
            self.annotated[name] = [*kept, (now, cost)]
        seen = {name: self._seen_cost(name, now=now, farm=farm) for name in loads}
        ready = sorted((name for name in seen if name not in starting), key=seen.__getitem__)
        return (starting + ready)[:count]

    def _seen_cost(self, name: str, *, now: float, farm: farming.Farm) -> tuple[int, str]:
        """The pod-deletion cost the ReplicaSet sees now (the latest written at least
        ``deletion_cost_lag_s`` ago; none is 0), ties by name."""
        lag = farm.timings.deletion_cost_lag_s
        visible = [cost for at, cost in self.annotated.get(name, []) if at <= now - lag]
        return (visible[-1] if visible else 0, name)
