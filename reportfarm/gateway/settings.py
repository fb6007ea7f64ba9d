"""The gateway's settings, from ``REPORTFARM_*`` environment variables (one object, no globals)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from reportfarm import settings as common
from reportfarm.webhooks.settings import WebhookSettings, env_pairs


@dataclasses.dataclass(frozen=True, kw_only=True)
class GatewaySettings:
    storage: common.StorageSettings
    """Queue, container and connection string (see reportfarm.settings.StorageSettings)."""
    tokens: Mapping[str, str]
    """REPORTFARM_TOKENS: ``tenant=token,tenant2=token2``; each tenant's bearer token."""
    port: int = 8000
    """REPORTFARM_GATEWAY_PORT (or ``--port``): the HTTP port."""
    rate_per_s: float = 20.0
    """REPORTFARM_GATEWAY_RATE: requests per second each tenant may make on /v1 (token bucket)."""
    burst: int = 40
    """REPORTFARM_GATEWAY_BURST: the bucket's size: requests a tenant may make at once."""
    in_flight: int = 32
    """REPORTFARM_GATEWAY_IN_FLIGHT: a tenant's requests being answered at once (sync waits
    count for their whole wait)."""
    max_interactive_depth: int = 1_000
    """REPORTFARM_GATEWAY_MAX_INTERACTIVE_DEPTH: interactive lane depth past which new reports
    get 503 + Retry-After."""
    max_bulk_depth: int = 200_000
    """REPORTFARM_GATEWAY_MAX_BULK_DEPTH: bulk lane depth past which batches and retries get 503."""
    depth_cache_s: float = 1.0
    """How long a read queue depth is reused (depth is never read per request)."""
    backpressure_retry_s: int = 5
    """REPORTFARM_GATEWAY_BACKPRESSURE_RETRY_S: the Retry-After of a 503."""
    default_wait_s: float = 30.0
    """POST /v1/reports without ``wait_s`` waits this long."""
    max_wait_s: float = 120.0
    """REPORTFARM_GATEWAY_MAX_WAIT_S: the longest ``wait_s`` honoured."""
    poll_s: float = 0.1
    """When a waiting request first looks for its result record; then less and less often, up
    to 4x this (see reports.await_record)."""
    max_batch_items: int = 10_000
    """REPORTFARM_GATEWAY_MAX_BATCH_ITEMS: items in one POST /v1/batches."""
    max_body_bytes: int = 64 * 2**20
    """REPORTFARM_GATEWAY_MAX_BODY_MB: the largest request body."""
    max_merge_items: int = 2_000
    """REPORTFARM_GATEWAY_MAX_MERGE_ITEMS: the largest batch merged into one PDF."""
    dispatcher: bool = True
    """REPORTFARM_GATEWAY_DISPATCHER=0 runs the gateway without the webhook dispatcher."""
    webhooks: WebhookSettings = dataclasses.field(default_factory=WebhookSettings)
    """The dispatcher's and the callback check's settings (REPORTFARM_WEBHOOK_*)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> GatewaySettings:
        env = os.environ if env is None else env
        values: dict[str, object] = dict(
            storage=common.StorageSettings.from_env(env),
            tokens=env_pairs(env, "REPORTFARM_TOKENS"),
            port=common.env_int(env, "REPORTFARM_GATEWAY_PORT", 8000),
            rate_per_s=common.env_float(env, "REPORTFARM_GATEWAY_RATE", 20.0, minimum=0.01),
            burst=common.env_int(env, "REPORTFARM_GATEWAY_BURST", 40, minimum=1),
            in_flight=common.env_int(env, "REPORTFARM_GATEWAY_IN_FLIGHT", 32, minimum=1),
            max_interactive_depth=common.env_int(
                env, "REPORTFARM_GATEWAY_MAX_INTERACTIVE_DEPTH", 1_000, minimum=1
            ),
            max_bulk_depth=common.env_int(
                env, "REPORTFARM_GATEWAY_MAX_BULK_DEPTH", 200_000, minimum=1
            ),
            backpressure_retry_s=common.env_int(
                env, "REPORTFARM_GATEWAY_BACKPRESSURE_RETRY_S", 5, minimum=1
            ),
            max_wait_s=common.env_float(env, "REPORTFARM_GATEWAY_MAX_WAIT_S", 120.0),
            max_batch_items=common.env_int(
                env, "REPORTFARM_GATEWAY_MAX_BATCH_ITEMS", 10_000, minimum=1
            ),
            max_body_bytes=common.env_int(env, "REPORTFARM_GATEWAY_MAX_BODY_MB", 64, minimum=1)
            * 2**20,
            max_merge_items=common.env_int(env, "REPORTFARM_GATEWAY_MAX_MERGE_ITEMS", 2_000),
            dispatcher=env.get("REPORTFARM_GATEWAY_DISPATCHER", "1") not in ("0", "false"),
            webhooks=WebhookSettings.from_env(env),
        )
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
