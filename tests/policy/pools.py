"""The pool the policy's tables size: exact arithmetic, shared by the policy's tests."""

from __future__ import annotations

from typing import Any

EXACT: dict[str, Any] = dict(
    pod_start_s=0.0,
    full_pools=False,
    tolerance=0.1,
    target_utilization=1.0,
    busy_smoothing_s=0.0,
    default_render_s=1.0,
    target_wait_s=10.0,
    max_replicas=10,
    pod_cpu=2.0,
    browser_cpu=0.5,
    scale_down_stabilization_s=60.0,
    scale_to_zero_idle_s=300.0,
    jobs_per_browser=None,
)
"""No smoothing, no utilization headroom, 1 s renders, a 10 s target, pods ready at once:
need = busy + ceil(waiting / 10). 2 CPU / 0.5 CPU -> 4 browsers fit a pod. The depth floor
(``jobs_per_browser``) is off: these tables check the wait-target arithmetic; the floor has
its own tests."""
