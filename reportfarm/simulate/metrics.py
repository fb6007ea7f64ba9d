"""What a run is worth: waits, cost, stability, lost work."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from reportfarm.quantiles import quantile
from reportfarm.simulate import running


def reversals(changes: Sequence[tuple[float, int, int]]) -> int:
    """Direction changes in a sequence of (time, before, after) scale events."""
    signs = [1 if after > before else -1 for _, before, after in changes if after != before]
    return sum(1 for prev, cur in itertools.pairwise(signs) if prev != cur)


def summarize(run: running.Run) -> dict[str, Any]:
    waits = [job.wait_s for job in run.jobs if job.start is not None]
    farm = run.farm
    return {
        "p50_wait_s": round(quantile(waits, 0.50) or 0.0, 3),
        "p95_wait_s": round(quantile(waits, 0.95) or 0.0, 3),
        "p99_wait_s": round(quantile(waits, 0.99) or 0.0, 3),
        "max_wait_s": round(max(waits, default=0.0), 3),
        "pod_seconds": round(farm.pod_seconds, 1),
        "cpu_seconds": round(farm.pod_seconds * farm.pod_cpu_request, 1),
        "scale_events": len(farm.replica_changes),
        "reversals": reversals(farm.replica_changes),
        "pool_resizes": len(farm.pool_changes),
        "pool_reversals": reversals(farm.pool_changes),
        "peak_replicas": max(run.replicas, default=0),
        "interrupted_jobs": farm.interrupted,
        "jobs_completed": len(waits),
        "jobs_total": len(run.jobs),
        "end_s": run.end_s,
    }
