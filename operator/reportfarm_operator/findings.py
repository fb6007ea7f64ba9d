"""What one tick of the scaling loop observed and did: the input of the status, its conditions
and its Events (``reporting``, ``conditions``), which both read it and neither owns it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from reportfarm import policy
from reportfarm_operator import observing, pods, specs


@dataclasses.dataclass(frozen=True, kw_only=True)
class Seen:
    """What one tick observed and did, as the status reports it."""

    decision: policy.Decision
    replicas_before: int
    """The Deployment's spec.replicas before this tick (a change gets an Event)."""
    deployment_replicas: int
    """Pods the Deployment has (its status), before this tick's change."""
    ready_replicas: int
    pods: Sequence[pods.Pod]
    loads: Mapping[str, observing.PodLoad | str]
    """Per pod: what it reported on /metrics, or why it did not answer."""
    queue: observing.QueueReading
    queue_name: str
    resized: Sequence[str] = ()
    """Pods whose pool was resized to the decision's browsers per pod this tick."""
    resize_errors: Sequence[str] = ()
    """``pod: reason`` of each failed PUT /pool."""
    spec_problems: Sequence[specs.Problem] = ()
    """Non-fatal problems of the spec (adjusted values)."""
    finish_cpu_s: float | None = None
    """CPU seconds of a job's finishing stages the decision sized with: as the renderers
    reported, else the last figure they reported (the policy's memory); None: never reported."""
    browser_cpu: float | None = None
    """Cores per busy browser the decision sized with: the spec's, or more when the jobs'
    CPU needs more (``reportfarm.capacity``)."""
    service_s: float | None = None
    """Seconds a job holds its browser's share of the pod as sized: the render time, or the
    pod's CPU time per job when it needs more (``capacity.service_s``)."""

    @property
    def pool_sizes(self) -> list[int]:
        return [load.size for load in self.loads.values() if isinstance(load, observing.PodLoad)]

    @property
    def silent(self) -> dict[str, str]:
        """Ready pods whose /metrics could not be read, and why."""
        return {
            pod.name: load if isinstance(load, str) else "no pod IP"
            for pod in self.pods
            if pod.ready and not isinstance(load := self.loads.get(pod.name), observing.PodLoad)
        }

    @property
    def running_browsers(self) -> int | None:
        """Browsers the ready pods run, by their own word; None if a ready pod did not answer."""
        if self.silent:
            return None
        return sum(
            load.size
            for pod in self.pods
            if pod.ready and isinstance(load := self.loads.get(pod.name), observing.PodLoad)
        )
