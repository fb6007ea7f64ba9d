"""The renderer's Prometheus metrics, on their own registry, named ``reportfarm_<thing>_<unit>``.

Stage names are the same as in the job log lines: load_data, render_html, pdf_generation,
storage_upload, generation_succeeded (the whole job, receive to stored).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reportfarm import renderer_api

STAGES = (
    "load_data",
    "render_html",
    renderer_api.RENDER_STAGE,
    "storage_upload",
    "generation_succeeded",
)
_LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 30, 60, 120)
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_LEASE_BUCKETS = (1, 2, 3, 4, 5, 7.5, 10, 15, 20, 25, 30, 40, 50, 60, 90, 120)
_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class RendererMetrics:
    """Every metric the renderer exports; also the pool's and the network guard's event sink."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs = Counter(
            renderer_api.JOBS_METRIC,
            "Jobs ended by outcome (succeeded, retried, poisoned) and template.",
            ["outcome", "template"],
            registry=r,
        )
        self.stage_seconds = Histogram(
            renderer_api.STAGE_SECONDS_METRIC,
            "Duration of each stage of a job.",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_cpu = Counter(
            renderer_api.STAGE_CPU_METRIC,
            "CPU time of the finishing stages (finish_<stage>), in their finishing process.",
            ["stage"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "reportfarm_event_loop_lag_seconds",
            "How late the renderer's event loop ran a timer (sampled every 100 ms).",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.lease_age = Histogram(
            "reportfarm_lease_age_seconds",
            "Seconds since a running job's message was received or last extended, at each "
            "extension (late when near the visibility timeout).",
            buckets=_LEASE_BUCKETS,
            registry=r,
        )
        self.finishing_busy = Gauge(
            renderer_api.FINISHING_BUSY_METRIC,
            "Finishing processes running a job's stages now.",
            registry=r,
        )
        self.signature_cpu = Gauge(
            renderer_api.SIGNATURE_CPU_METRIC,
            "CPU seconds a blank page's signature took in the finishing processes at their start "
            "(median; 0: unknown, or no signing).",
            registry=r,
        )
        self.finishing_replaced = Counter(
            "reportfarm_finishing_processes_replaced",
            "Finishing processes that died (and were replaced).",
            registry=r,
        )
        self.queue_wait = Histogram(
            "reportfarm_job_queue_wait_seconds",
            "From submission (client clock) to a worker starting the job.",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.hints = Counter(
            "reportfarm_hints",
            "Hints of the synchronous path: wake (heard: ended an idle pause, or found the worker "
            "busy), handoff (a job handed over: taken, busy, late: too little of its hold left, "
            "unkeyed: this renderer has no key to check it, or refused: a bad signature or body) "
            "and done (sent to the waiting gateway, or failed).",
            ["kind", "outcome"],
            registry=r,
        )
        self.poisoned = Counter(
            "reportfarm_poison_messages",
            "Messages moved to the poison queue, by reason kind.",
            ["reason"],
            registry=r,
        )
        self.in_flight = Gauge(
            "reportfarm_jobs_in_flight", "Jobs received and not yet finished.", registry=r
        )
        self.oldest_job = Gauge(
            renderer_api.OLDEST_JOB_METRIC,
            "Seconds the longest-running job (received, not yet settled) has run; 0: none.",
            registry=r,
        )
        self.pool_size = Gauge(
            renderer_api.POOL_SIZE_METRIC, "Browsers the pool is asked to hold.", registry=r
        )
        self.pool_live = Gauge(
            "reportfarm_pool_browsers", "Browsers running now (launched, not retired).", registry=r
        )
        self.pool_busy = Gauge(
            renderer_api.POOL_BUSY_METRIC, "Browsers rendering a job now.", registry=r
        )
        self.borrow_wait = Histogram(
            "reportfarm_pool_borrow_wait_seconds",
            "Time a job waited for a free browser.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.restarts = Counter(
            "reportfarm_browser_restarts",
            "Browsers closed and replaced after a failure, by reason.",
            ["reason"],
            registry=r,
        )
        self.recycles = Counter(
            "reportfarm_browser_recycles",
            "Browsers replaced on schedule (job count or memory cap), by reason.",
            ["reason"],
            registry=r,
        )
        self.browser_memory = Gauge(
            "reportfarm_browser_memory_bytes",
            "Memory of the pool's browsers (all their processes): max of one, and sum.",
            ["stat"],
            registry=r,
        )
        self.blocked_requests = Counter(
            "reportfarm_blocked_requests",
            "Requests from rendered documents refused by the network guard, by reason.",
            ["reason"],
            registry=r,
        )
        self.storage_errors = Counter(
            "reportfarm_storage_errors",
            "Failed calls to the queue or blob store, by operation.",
            ["operation"],
            registry=r,
        )
        self.draining = Gauge(
            "reportfarm_draining", "1 while the worker drains after SIGTERM.", registry=r
        )

    # The pool's event hooks (reportfarm_renderer.pool.PoolEvents).
    def borrow_waited(self, seconds: float) -> None:
        self.borrow_wait.observe(seconds)

    def worker_replaced(self, reason: str) -> None:
        self.restarts.labels(reason=reason).inc()

    def worker_recycled(self, reason: str) -> None:
        self.recycles.labels(reason=reason).inc()

    def render_finished(self, seconds: float, ok: bool) -> None:
        """Rendering is timed by the job runner, per stage; nothing more to record here."""

    # The network guard's hook.
    def request_blocked(self, reason: str) -> None:
        self.blocked_requests.labels(reason=reason).inc()
