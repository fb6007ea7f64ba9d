"""The gateway's Prometheus metrics, on their own registry, named ``reportfarm_gateway_*``.

The webhook dispatcher registers its ``reportfarm_webhook_*`` metrics on the same registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "reportfarm_gateway_requests",
            "HTTP requests answered, by route (its pattern), method and status.",
            ["route", "method", "status"],
            registry=r,
        )
        self.seconds = Histogram(
            "reportfarm_gateway_request_duration_seconds",
            "Time to answer, by route (a sync report's includes its wait).",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.rejected = Counter(
            "reportfarm_gateway_rejections",
            "Requests refused before any work: unauthorized, rate, in_flight, query, backpressure.",
            ["reason"],
            registry=r,
        )
        self.jobs = Counter(
            "reportfarm_gateway_jobs_submitted",
            "Jobs put on the queue by the gateway, by lane.",
            ["lane"],
            registry=r,
        )
        self.sync = Counter(
            "reportfarm_gateway_sync_reports",
            "POST /v1/reports by how they ended: pdf (in time), failed, accepted (202).",
            ["outcome"],
            registry=r,
        )
        self.hints = Counter(
            "reportfarm_gateway_hints",
            "Hints of the synchronous path: wake (sent to a renderer, or failed), handoff (a job "
            "handed to a renderer: taken, or not and revealed on its lane) and done (heard "
            "from a renderer: woke a waiting request, carried its answer to one, refused a "
            "carried answer that did not check out, or nobody waited here).",
            ["kind", "outcome"],
            registry=r,
        )
        self.in_flight = Gauge(
            "reportfarm_gateway_requests_in_flight", "Requests being answered now.", registry=r
        )
        self.queue_depth = Gauge(
            "reportfarm_gateway_queue_depth",
            "Each lane's approximate depth as last read for backpressure.",
            ["lane"],
            registry=r,
        )
