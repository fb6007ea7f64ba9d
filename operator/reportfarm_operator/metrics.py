"""The operator's own Prometheus metrics, on their own registry, ``reportfarm_operator_*``.

Per-pool series carry ``namespace`` and ``pool`` labels (bounded by the number of ReportPools) and
are dropped when a ReportPool goes away.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reportfarm_operator import scaling

_LOOP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_POOL = ("namespace", "pool")


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter(
            "reportfarm_operator_decisions",
            "Scaling decisions by reason (one per pool per tick).",
            ["reason"],
            registry=r,
        )
        self.loop_seconds = Histogram(
            "reportfarm_operator_loop_duration_seconds",
            "Duration of one scaling-loop iteration for one pool (observe, decide, apply).",
            buckets=_LOOP_BUCKETS,
            registry=r,
        )
        self.loop_errors = Counter(
            "reportfarm_operator_loop_errors",
            "Scaling-loop iterations that failed (retried at the next tick).",
            registry=r,
        )
        self.queue_read_errors = Counter(
            "reportfarm_operator_queue_read_errors",
            "Queue depth reads that failed (the pool size is then kept).",
            _POOL,
            registry=r,
        )
        self.resize_errors = Counter(
            "reportfarm_operator_pool_resize_errors",
            "PUT /pool calls to renderers that failed.",
            _POOL,
            registry=r,
        )
        self.desired_replicas = Gauge(
            "reportfarm_operator_desired_replicas",
            "Pods the last decision asked for.",
            _POOL,
            registry=r,
        )
        self.desired_browsers = Gauge(
            "reportfarm_operator_desired_browsers_per_pod",
            "Browsers per pod the last decision asked for.",
            _POOL,
            registry=r,
        )
        self.required_browsers = Gauge(
            "reportfarm_operator_required_browsers",
            "The stabilized need the last decision was shaped from.",
            _POOL,
            registry=r,
        )
        self.queue_depth = Gauge(
            "reportfarm_operator_queue_depth",
            "Approximate queue depth at the last read (includes in-flight messages).",
            _POOL,
            registry=r,
        )
        self.blind = Gauge(
            "reportfarm_operator_blind",
            "1 when a ready renderer's /metrics could not be read (busy browsers unknown).",
            _POOL,
            registry=r,
        )
        self.spec_invalid = Gauge(
            "reportfarm_operator_spec_invalid",
            "1 when the pool's spec cannot be used (nothing is scaled).",
            _POOL,
            registry=r,
        )
        self.saturated = Gauge(
            "reportfarm_operator_saturated",
            "1 when the need exceeds replicas.max full pods.",
            _POOL,
            registry=r,
        )

    def record(self, namespace: str, pool: str, outcome: scaling.Outcome) -> None:
        labels = {"namespace": namespace, "pool": pool}
        decision, seen = outcome.decision, outcome.seen
        self.spec_invalid.labels(**labels).set(1 if decision is None else 0)
        if decision is None or seen is None:
            return
        self.blind.labels(**labels).set(1 if seen.silent else 0)
        self.decisions.labels(reason=decision.reason.value).inc()
        self.desired_replicas.labels(**labels).set(decision.replicas)
        self.desired_browsers.labels(**labels).set(decision.browsers_per_pod)
        self.required_browsers.labels(**labels).set(decision.required_browsers)
        self.saturated.labels(**labels).set(1 if decision.saturated else 0)
        if seen.queue.error is None:
            self.queue_depth.labels(**labels).set(seen.queue.depth or 0)
        else:
            self.queue_read_errors.labels(**labels).inc()
        if seen.resize_errors:
            self.resize_errors.labels(**labels).inc(len(seen.resize_errors))

    def forget(self, namespace: str, pool: str) -> None:
        """Drop a deleted pool's series."""
        per_pool = (
            self.queue_read_errors,
            self.resize_errors,
            self.desired_replicas,
            self.desired_browsers,
            self.required_browsers,
            self.queue_depth,
            self.saturated,
            self.blind,
            self.spec_invalid,
        )
        for metric in per_pool:
            try:
                metric.remove(namespace, pool)
            except KeyError:
                pass

    def serve(self, port: int, *, address: str = "0.0.0.0") -> tuple[WSGIServer, threading.Thread]:
        """Serve /metrics on a daemon thread; stop with ``server.shutdown()``."""
        return prometheus_client.start_http_server(port, addr=address, registry=self.registry)
