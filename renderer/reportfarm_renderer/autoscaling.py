"""The local farm's autoscaler: the operator's policy, applied to one process's pool.

``reportfarm up`` runs one renderer; this loop asks ``reportfarm.policy.decide`` for browsers per
pod with replicas pinned to 1 and the pod's limits set to this machine's cores and memory, then
resizes the pool in place. One brain (the policy), three bodies (operator, local farm, simulator).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

from reportfarm import policy, renderer_api
from reportfarm_renderer.settings import BROWSER_MEMORY_BYTES, default_pool_size

if TYPE_CHECKING:
    from reportfarm_renderer.service import Renderer

logger = logging.getLogger(__name__)

INTERVAL_S = 2.0


def machine_spec() -> policy.PoolSpec:
    """This machine as one pod: a browser per core at most, 500 MiB each."""
    cores = float(os.cpu_count() or 1)
    fit = default_pool_size()
    return policy.PoolSpec(
        min_replicas=1,
        max_replicas=1,
        min_browsers_per_pod=1,
        max_browsers_per_pod=fit,
        pod_cpu=cores,
        pod_memory_mib=fit * BROWSER_MEMORY_BYTES / 2**20,
        browser_cpu=cores / fit,
        browser_memory_mib=BROWSER_MEMORY_BYTES / 2**20,
        target_wait_s=5.0,
        scale_down_stabilization_s=30.0,
    )


class RenderTimes:
    """Mean PDF render time over the last interval, from the renderer's own histogram."""

    def __init__(self, renderer: Renderer) -> None:
        self.registry = renderer.parts.metrics.registry
        self.last = (0.0, 0.0)

    def mean(self) -> float | None:
        labels = {"stage": renderer_api.RENDER_STAGE}
        name = renderer_api.STAGE_SECONDS_METRIC
        total = self.registry.get_sample_value(f"{name}_sum", labels)
        count = self.registry.get_sample_value(f"{name}_count", labels)
        if total is None or count is None:
            return None
        (last_total, last_count), self.last = self.last, (total, count)
        if count == last_count:
            return None
        return (total - last_total) / (count - last_count)


def observe(renderer: Renderer, *, depth: int | None, render_s: float | None) -> policy.Observation:
    return policy.Observation(
        now=time.monotonic(),
        queue_depth=depth,
        ready_replicas=1,
        browsers_per_pod=renderer.pool.size,
        busy_browsers=renderer.pool.busy,
        mean_render_s=render_s,
    )


async def run_local(renderer: Renderer, *, spec: policy.PoolSpec | None = None) -> None:
    spec = spec or machine_spec()
    state = policy.State()
    times = RenderTimes(renderer)
    while True:
        await asyncio.sleep(INTERVAL_S)
        try:
            depth: int | None = sum([await lane.depth() for lane in renderer.lanes])
        except Exception as error:
            logger.warning("local autoscaler: queue unreadable: %s", error)
            depth = None
        decision = policy.decide(observe(renderer, depth=depth, render_s=times.mean()), spec, state)
        state = decision.state
        if decision.browsers_per_pod != renderer.pool.size:
            logger.info(
                "local autoscaler: pool %d -> %d (%s: %s)",
                renderer.pool.size,
                decision.browsers_per_pod,
                decision.reason,
                decision.message,
            )
            await renderer.pool.resize(decision.browsers_per_pod)
