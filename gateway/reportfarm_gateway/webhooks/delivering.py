"""One webhook delivery: a signed POST through the network policy, and its delivery-log entry.

The log is append-only without append blobs: one small blob per attempt under
``webhooks/<subject>/`` (a job id, or ``batch-<batch id>``), named by time, so attempts from
several dispatchers never overwrite each other and a listing reads as the log.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid
from typing import Any, Literal

import aiohttp

from reportfarm import contract, netpolicy
from reportfarm.storage.blobs import BlobStore
from reportfarm_gateway.webhooks import signing

logger = logging.getLogger(__name__)

Outcome = Literal["delivered", "failed", "refused", "gave_up"]
USER_AGENT = "reportfarm-webhooks/1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Webhook:
    """What to POST, where, and under which idempotency key."""

    subject: str
    """A job id, or ``batch-<batch id>``: names the delivery log."""
    event: str
    """``job.finished`` or ``batch.finished``."""
    url: str
    key: str
    """The Idempotency-Key: the same fact always has the same key, so receivers can dedupe."""
    payload: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Attempt:
    outcome: Outcome
    status: int | None = None
    error: str | None = None
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome == "delivered"


async def post(
    session: aiohttp.ClientSession,
    policy: netpolicy.NetworkPolicy,
    webhook: Webhook,
    *,
    secret: str,
    attempt: int,
) -> Attempt:
    """POST once. 2xx is delivered; anything else (3xx too: redirects are not followed) failed;
    a URL the policy refuses is refused (no retry helps)."""
    started = time.monotonic()
    body = json.dumps(webhook.payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.SIGNATURE_HEADER: signing.sign(secret, body),
        signing.IDEMPOTENCY_HEADER: webhook.key,
        signing.EVENT_HEADER: webhook.event,
        signing.ATTEMPT_HEADER: str(attempt),
    }
    try:
        await policy.check_url(webhook.url)  # IP literals skip the session's resolver
        async with session.post(
            webhook.url, data=body, headers=headers, allow_redirects=False
        ) as response:
            await response.read()
            status = response.status
    except netpolicy.Refused as refused:
        return Attempt(outcome="refused", error=str(refused), duration_ms=_ms(started))
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        text = f"{type(error).__name__}: {error}"[:300]
        return Attempt(outcome="failed", error=text, duration_ms=_ms(started))
    if 200 <= status < 300:
        return Attempt(outcome="delivered", status=status, duration_ms=_ms(started))
    return Attempt(
        outcome="failed", status=status, error=f"HTTP {status}", duration_ms=_ms(started)
    )


async def log(
    blobs: BlobStore, webhook: Webhook, attempt_number: int, attempt: Attempt, outcome: Outcome
) -> None:
    """Append one entry to the subject's delivery log."""
    now = time.time()
    entry = {
        "at": now,
        "attempt": attempt_number,
        "event": webhook.event,
        "url": webhook.url,
        "idempotency_key": webhook.key,
        "outcome": outcome,
        "status": attempt.status,
        "error": attempt.error,
        "duration_ms": attempt.duration_ms,
    }
    name = (
        f"{contract.webhook_log_prefix(webhook.subject)}"
        f"{int(now * 1000):015d}-{attempt_number:03d}-{uuid.uuid4().hex[:6]}.json"
    )
    await blobs.put(name, json.dumps(entry).encode("utf-8"), content_type="application/json")


async def read_log(blobs: BlobStore, subject: str) -> list[dict[str, Any]]:
    """A subject's delivery log, oldest first."""
    names = sorted(await blobs.list(contract.webhook_log_prefix(subject)))
    return [json.loads(await blobs.get(name)) for name in names]


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
