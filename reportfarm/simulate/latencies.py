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


MEASURED = Latencies(pod_start_s=20.0, resize_s=2.0, resize_failure=0.0, deletion_cost_lag_s=0.0)
"""The figures the model uses."""

SOURCE = (
    "earlier runs of tests/node/test_real_node.py (first resize visible 1-8 s after a burst, a"
    " tick's wait included; the second pod 16-28 s after it), not yet re-measured"
)
"""Where :data:`MEASURED` comes from (printed in the simulator's report)."""
