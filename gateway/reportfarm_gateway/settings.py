"""The gateway's settings, from ``REPORTFARM_*`` environment variables (one object, no globals)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from reportfarm import contract
from reportfarm import settings as common
from reportfarm_gateway.webhooks.settings import WebhookSettings, env_pairs


@dataclasses.dataclass(frozen=True, kw_only=True)
class GatewaySettings(common.FromEnv):
    storage: common.StorageSettings
    """Queue, container and connection string (see reportfarm.settings.StorageSettings)."""
    tokens: Mapping[str, str] = common.setting("REPORTFARM_TOKENS", {}, parse=env_pairs)
    """REPORTFARM_TOKENS: ``tenant=token,tenant2=token2``; each tenant's bearer token."""
    port: int = common.setting("REPORTFARM_GATEWAY_PORT", 8000)
    """REPORTFARM_GATEWAY_PORT (or ``--port``): the HTTP port."""
    rate_per_s: float = common.setting("REPORTFARM_GATEWAY_RATE", 20.0, minimum=0.01)
    """REPORTFARM_GATEWAY_RATE: requests per second each tenant may make on /v1 (token bucket)."""
    burst: int = common.setting("REPORTFARM_GATEWAY_BURST", 40, minimum=1)
    """REPORTFARM_GATEWAY_BURST: the bucket's size: requests a tenant may make at once."""
    in_flight: int = common.setting("REPORTFARM_GATEWAY_IN_FLIGHT", 32, minimum=1)
    """REPORTFARM_GATEWAY_IN_FLIGHT: a tenant's requests being answered at once (sync waits
    count for their whole wait)."""
    max_interactive_depth: int = common.setting(
        "REPORTFARM_GATEWAY_MAX_INTERACTIVE_DEPTH", 1_000, minimum=1
    )
    """REPORTFARM_GATEWAY_MAX_INTERACTIVE_DEPTH: interactive lane depth past which new reports
    get 503 + Retry-After."""
    max_bulk_depth: int = common.setting("REPORTFARM_GATEWAY_MAX_BULK_DEPTH", 200_000, minimum=1)
    """REPORTFARM_GATEWAY_MAX_BULK_DEPTH: bulk lane depth past which batches and retries get 503."""
    depth_cache_s: float = 1.0
    """How long a read queue depth is reused (depth is never read per request)."""
    backpressure_retry_s: int = common.setting(
        "REPORTFARM_GATEWAY_BACKPRESSURE_RETRY_S", 5, minimum=1
    )
    """REPORTFARM_GATEWAY_BACKPRESSURE_RETRY_S: the Retry-After of a 503."""
    default_wait_s: float = 30.0
    """POST /v1/reports without ``wait_s`` waits this long."""
    max_wait_s: float = common.setting("REPORTFARM_GATEWAY_MAX_WAIT_S", 120.0)
    """REPORTFARM_GATEWAY_MAX_WAIT_S: the longest ``wait_s`` honoured."""
    poll_s: float = 0.1
    """When a waiting request first looks for its result record; then less and less often, up
    to 4x this (see reports.await_record). A done hint reads it at once (notify_address)."""
    hinted_poll_s: float = 1.0
    """The same when done hints are on (notify_address set): the hint is the fast path, the
    polling only finds a job whose hint was lost (then up to 4x this late). At 0.1 s a request
    waiting 0.6-1.5 s behind others read its record 3-5 times for nothing."""
    wake: tuple[str, ...] = common.setting("REPORTFARM_GATEWAY_WAKE", ())
    """REPORTFARM_GATEWAY_WAKE: ``host:port`` list where renderers listen (each host resolved
    to all its addresses: the pool's headless Service, ``<pool>-metrics:8080``); after sending a
    synchronous report the gateway wakes ``wake_fanout`` of them. Empty: no wake hints."""
    wake_fanout: int = common.setting("REPORTFARM_GATEWAY_WAKE_FANOUT", 2, minimum=1)
    """REPORTFARM_GATEWAY_WAKE_FANOUT: renderers woken per synchronous report (picked at random;
    each wake costs an idle renderer one receive)."""
    handoff_s: int = common.setting("REPORTFARM_GATEWAY_HANDOFF_S", 10, minimum=0)
    """REPORTFARM_GATEWAY_HANDOFF_S: with wake hints on and a storage secret to sign with, a
    synchronous report's message is sent invisible for this long and handed, with its pop
    receipt, to one renderer, which runs it without a receive; one that has no room says so and
    the message is made visible at once. A renderer that took one and died leaves it invisible
    this long at most. 0: no hand-offs (wakes only). Under 4 s few or none are taken: a renderer
    refuses an offer with less than 3 s of its hold left (its lease could not be extended in
    time: ``reportfarm_renderer.worker.HANDOFF_MIN_LEFT_S``), counted from the message's
    insertion, which storage keeps in whole seconds."""
    notify_address: str | None = common.setting("REPORTFARM_GATEWAY_NOTIFY_ADDRESS", None)
    """REPORTFARM_GATEWAY_NOTIFY_ADDRESS: ``ip:port`` where renderers reach this replica (the
    chart: the pod's IP and the gateway's port), put in each synchronous job so its renderer
    says when the record is stored. Unset: no done hints (the wait polls). Renderers older than
    this field refuse jobs that carry it: upgrade them first."""
    max_batch_items: int = common.setting("REPORTFARM_GATEWAY_MAX_BATCH_ITEMS", 10_000, minimum=1)
    """REPORTFARM_GATEWAY_MAX_BATCH_ITEMS: items in one POST /v1/batches."""
    max_body_bytes: int = common.setting(
        "REPORTFARM_GATEWAY_MAX_BODY_MB",
        contract.MAX_DATA_BYTES,
        minimum=1,
        unit=2**20,
        only_lower=True,
    )
    """REPORTFARM_GATEWAY_MAX_BODY_MB: the largest request body (413 past it, before it is read);
    the contract's one limit (contract.MAX_DATA_BYTES) unless lowered, never above it."""
    body_budget_bytes: int = common.setting(
        "REPORTFARM_GATEWAY_BODY_BUDGET_MB", 2 * contract.MAX_DATA_BYTES, minimum=1, unit=2**20
    )
    """REPORTFARM_GATEWAY_BODY_BUDGET_MB: request bodies read and processed at once, in bytes; a
    request that does not fit waits (its body unread) up to body_wait_s, then gets 503. This
    bounds the gateway's memory under concurrent large requests; only bytes that have arrived
    count (see gateway.bodies)."""
    tenant_body_budget_bytes: int = common.setting(
        "REPORTFARM_GATEWAY_TENANT_BODY_BUDGET_MB", contract.MAX_DATA_BYTES, minimum=1, unit=2**20
    )
    """REPORTFARM_GATEWAY_TENANT_BODY_BUDGET_MB: each tenant's own share of bodies being read: a
    request reserves its Content-Length of it (inflated bytes past that count too), so a tenant
    that stalls or floods bodies waits on its own share, never on the others' (gateway.bodies)."""
    body_wait_s: float = common.setting("REPORTFARM_GATEWAY_BODY_WAIT_S", 30.0)
    """REPORTFARM_GATEWAY_BODY_WAIT_S: how long a request waits for room in the body budget."""
    body_read_s: float = common.setting("REPORTFARM_GATEWAY_BODY_READ_S", 30.0, minimum=0.1)
    """REPORTFARM_GATEWAY_BODY_READ_S: the whole body must arrive within this (else 408)."""
    check_workers: int = common.setting("REPORTFARM_GATEWAY_CHECK_WORKERS", 2, minimum=1)
    """REPORTFARM_GATEWAY_CHECK_WORKERS: worker processes that parse and check request bodies
    (the event loop never does); one tenant may use all but one of them (gateway.offloading)."""
    inline_check_bytes: int = common.setting(
        "REPORTFARM_GATEWAY_INLINE_CHECK_KB", 16 * 1024, minimum=0, unit=1024
    )
    """REPORTFARM_GATEWAY_INLINE_CHECK_KB: bodies up to this size are checked on the event loop,
    within each tenant's share of it (gateway.offloading), not in a worker; the workers start with
    the first body that needs one. 0: every body in a worker, the workers started at once."""
    parse_cpu_s: float = common.setting("REPORTFARM_GATEWAY_PARSE_CPU_S", 5.0, minimum=0.01)
    """REPORTFARM_GATEWAY_PARSE_CPU_S: CPU seconds one body's parsing and checking may take, in a
    worker process (else 400)."""
    max_merge_items: int = common.setting("REPORTFARM_GATEWAY_MAX_MERGE_ITEMS", 2_000)
    """REPORTFARM_GATEWAY_MAX_MERGE_ITEMS: the largest batch merged into one PDF."""
    shutdown_delay_s: float = common.setting("REPORTFARM_GATEWAY_SHUTDOWN_DELAY_S", 3.0)
    """REPORTFARM_GATEWAY_SHUTDOWN_DELAY_S: after SIGTERM, how long the listener keeps serving
    while /readyz answers 503 (endpoint lists and load balancers drop the pod meanwhile)."""
    shutdown_timeout_s: float = common.setting("REPORTFARM_GATEWAY_SHUTDOWN_TIMEOUT_S", 125.0)
    """REPORTFARM_GATEWAY_SHUTDOWN_TIMEOUT_S: then, how long requests in flight may take to
    finish (a synchronous report waits up to max_wait_s); keep it under the pod's grace."""
    dispatcher: bool = common.setting("REPORTFARM_GATEWAY_DISPATCHER", True)
    """REPORTFARM_GATEWAY_DISPATCHER=0 runs the gateway without the webhook dispatcher."""
    webhooks: WebhookSettings = dataclasses.field(default_factory=WebhookSettings)
    """The dispatcher's and the callback check's settings (REPORTFARM_WEBHOOK_*)."""
