"""
The latencies of the cluster in the simulator's model, measured on the real node: one place, so
that a later measurement is a one-line change here (``farm.Timings`` reads its defaults from
:data:`MEASURED`).

How they were measured: ``tests/node/test_latencies.py`` (root, ``REPORTFARM_NODE_TESTS=1``, under
``flock /tmp/reportfarm-node.lock``) on the real kubelet node with the chart's operator and the
renderer image: the ReportPool's floor raised from 1 to 3 pods (decision to pod created, pod
created to Ready), ``PUT /pool`` on a running renderer (down and up, as the operator sends it),
and the floor lowered back to 1 (whether the pod the ReplicaSet kept carried the highest
pod-deletion cost the operator wrote just before lowering the replicas). See :data:`SOURCE`.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class Latencies:
    """What the cluster takes to do what the controllers ask."""

    pod_start_s: float
    """A pod's creation (the decision to add it) to its first render: the Deployment controller,
    the scheduler, the kubelet, the renderer's Chromium and its first poll."""
    resize_s: float
    """A pool resize (``PUT /pool``) until the new browsers take jobs."""
    resize_failure: float
    """The share of pool resizes that fail (the operator retries at its next tick)."""
    deletion_cost_lag_s: float
    """How long after the operator's pod-deletion-cost patch the ReplicaSet still picks victims
    by the previous costs (its informer's lag); 0: the patch is seen before the replicas drop."""


MEASURED = Latencies(pod_start_s=20.0, resize_s=0.7, resize_failure=0.0, deletion_cost_lag_s=0.0)
"""The figures the model uses. Measured on the real node on 2026-12-04 (a shared 2-core machine),
``tests/node/test_latencies.py``, two runs: at load average 5-9 and at 4-5 (the second's figures
in brackets where they differ):

- ``resize_s``: ``PUT /pool`` answered in 0.00-0.67 s (6 resizes 1 <-> 2 browsers, median 0.01)
  [0.00-0.04 s]: the slowest, rounded up (the model's earlier 2 s was harsher to our side than
  the operator).
- ``resize_failure``: 0 of 12 failed, and none in the side-by-side runs' resizes.
- ``deletion_cost_lag_s``: the ReplicaSet kept the pod with the highest cost in 4 of 4 scale-downs
  (the operator annotates, then lowers the replicas; the first pod deleted 0.8-5.3 s after the
  floor was lowered): no lag seen.
- ``pod_start_s`` stays 20 s, a cluster's figure that both sides of a comparison share (a pull, a
  busy scheduler). The node, image cached: the operator's reaction to a raised floor 1.6-3.9 s
  (median 2.7) [2.7-3.4 s], a pod created to Ready 4-6 s (median 5) [5 s] for two at once, all
  Ready 7-11 s [8.6-9.0 s] after the floor was raised; in the side-by-side runs 6-7 s for a lone
  pod at load 5-7, 13-20 s for four at once at load 8, 24-26 s at load 18. ``reportfarm
  simulate --pod-start-s`` runs the node's figure.
- The tick: every 5 s at a random phase (``running.Scenario.policy_interval_s``), as the operator's
  timer.
"""

SOURCE = (
    "tests/node/test_latencies.py on the real node, 2026-12-04, two runs at load 4-9: PUT /pool"
    " 0.00-0.67 s, 0 of 12 resizes failed, the deletion cost honoured 4 of 4; pod start kept at a"
    " cluster's 20 s"
    " (the node: 5 s created to Ready, 7-11 s from the decision, up to 26 s for four under load)"
)
"""Where :data:`MEASURED` comes from (printed in the simulator's report)."""
