"""The webhook dispatcher: consumes ``<queue>-events`` and POSTs each completion, at least once.

Events (see :mod:`reportfarm.contract`):

- ``{"kind": "job", "job_id": ...}``, put by a renderer after a job with a callback ended and
  before its message was deleted. The dispatcher reads the job's result record and POSTs
  ``job.finished`` (for a batch item only if its batch asked for item webhooks). For a batch item
  it also schedules a check of the batch: a ``{"kind": "batch"}`` event, sent with a short delay
  and coalesced (one pending check per batch and dispatcher), so a 2,000-item batch is not
  re-read 2,000 times.
- ``{"kind": "batch", "batch_id": ...}``: if every item is final, POST ``batch.finished`` once
  (the delivery log says whether this state and retry generation was delivered already).

Retries use the queue as their timer: a failed POST makes the event visible again after a backoff
delay (its dequeue count is the attempt number); after ``max_attempts`` it goes to the events'
poison queue. A dispatcher killed at any point loses nothing: the event comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Histogram

from reportfarm import backoff, batches, contract
from reportfarm.client import ReportFarmClient
from reportfarm.storage.queueing import Delivery
from reportfarm_gateway import tenancy
from reportfarm_gateway.webhooks import delivering
from reportfarm_gateway.webhooks.settings import WebhookSettings

logger = logging.getLogger(__name__)

FAILED_ITEMS_IN_PAYLOAD = 100


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter(
            "reportfarm_webhook_attempts",
            "Webhook POSTs by event and outcome (delivered, failed, refused, gave_up; "
            "deferred: not sent yet, its tenant's share of POSTs was in use).",
            ["event", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "reportfarm_webhook_post_duration_seconds",
            "Time of one webhook POST.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.events = Counter(
            "reportfarm_webhook_events",
            "Events taken from the events queue, by kind.",
            ["kind"],
            registry=registry,
        )


class Dispatcher:
    def __init__(
        self,
        *,
        client: ReportFarmClient,
        settings: WebhookSettings,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.client = client
        self.events = client.events
        self.blobs = client.blobs
        self.settings = settings
        self.metrics = WebhookMetrics(registry or CollectorRegistry())
        self.ready = False
        """True once a receive from the events queue succeeded (for /readyz)."""
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._checks: dict[str, float] = {}
        """Batch id -> when its pending check becomes visible (monotonic): the coalescing."""
        self._manifests: dict[str, contract.BatchManifest | None] = {}
        self._batch_locks: dict[str, asyncio.Lock] = {}
        self._session: aiohttp.ClientSession | None = None
        self._posting: dict[str, int] = {}
        """POSTs in flight per tenant (see WebhookSettings.per_tenant)."""

    async def run(self) -> None:
        """Receive events until stopped; each runs as a task, at most ``concurrency`` at once."""
        self._session = self.settings.policy.session(timeout_s=self.settings.timeout_s)
        pacing = backoff.Pacing(poll_max_s=self.settings.poll_max_s)
        try:
            while not self._stopping.is_set():
                room = self.settings.concurrency - len(self._tasks)
                if room <= 0:
                    await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    received = await self.events.receive(
                        max_messages=room, visibility_timeout=self.settings.visibility_s
                    )
                except Exception as error:
                    self.ready = False
                    failures = pacing.failed()
                    logger.warning("events queue unreachable (%d in a row): %s", failures, error)
                    await self._pause(pacing.pause_s())
                    continue
                pacing.received(len(received))
                self.ready = True
                for delivery in received:
                    task = asyncio.create_task(self._handle(delivery))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                if pause := pacing.pause_s():
                    await self._pause(pause)
        finally:
            await self._finish()

    def stop(self) -> None:
        self._stopping.set()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

    async def _finish(self, grace_s: float = 10.0) -> None:
        """Let running deliveries end; what is cut off comes back when its visibility ends."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace_s)
        for task in list(self._tasks):
            task.cancel()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, delivery: Delivery) -> None:
        try:
            event = json.loads(delivery.content)
            kind = event["kind"]
        except (ValueError, KeyError, TypeError):
            await self.events.poison(delivery, reason="not an event", job_id=None)
            return
        self.metrics.events.labels(kind=str(kind)[:16]).inc()
        try:
            if kind == "job" and isinstance(event.get("job_id"), str):
                await self._job_event(delivery, event["job_id"])
            elif kind == "batch" and isinstance(event.get("batch_id"), str):
                await self._batch_event(delivery, event["batch_id"])
            else:
                await self.events.poison(delivery, reason=f"unknown event {kind!r}", job_id=None)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Storage away: the event stays leased and comes back after its visibility.
            logger.exception("event %s could not be handled", delivery.message_id)

    async def _job_event(self, delivery: Delivery, job_id: str) -> None:
        record = await self.client.result(job_id)
        if record is None:
            await self._again(delivery, None, f"no result record for {job_id} yet")
            return
        manifest = await self._manifest(record.batch_id) if record.batch_id else None
        if manifest is not None:
            await self._schedule_check(manifest.batch_id)
            if not manifest.item_webhooks:
                await self.events.delete(delivery)
                return
        url = record.callback_url or (manifest.callback_url if manifest else None)
        if url is None:
            url = await self._noted_callback(job_id)
        if url is None:
            await self.events.delete(delivery)  # nothing asked for a webhook
            return
        webhook = delivering.Webhook(
            subject=job_id,
            event="job.finished",
            url=url,
            key=f"{job_id}:{record.state}",
            payload=job_payload(record),
        )
        await self._deliver(delivery, webhook, tenant=record.tenant)

    async def _batch_event(self, delivery: Delivery, batch_id: str) -> None:
        # One check of a batch at a time here: a second one then finds the first's delivery in
        # the log. Dispatchers in other processes may still both send: hence the key.
        if len(self._batch_locks) > 10_000 and not any(
            lock.locked() for lock in self._batch_locks.values()
        ):
            self._batch_locks.clear()
        async with self._batch_locks.setdefault(batch_id, asyncio.Lock()):
            await self._check_batch(delivery, batch_id)

    async def _check_batch(self, delivery: Delivery, batch_id: str) -> None:
        manifest = await self._manifest(batch_id)
        if manifest is None or not manifest.callback_url:
            await self.events.delete(delivery)
            return
        status = await self.client.batch_status(batch_id)
        if not status.final:
            await self.events.delete(delivery)  # a later item's event checks again
            return
        webhook = delivering.Webhook(
            subject=f"batch-{batch_id}",
            event="batch.finished",
            url=manifest.callback_url,
            key=f"batch-{tenancy.shown_batch_id(manifest.tenant, batch_id)}:{status.state}:"
            f"{status.retries}",
            payload=batch_payload(status, tenant=manifest.tenant),
        )
        await self._deliver(delivery, webhook, tenant=manifest.tenant)

    async def _deliver(
        self, delivery: Delivery, webhook: delivering.Webhook, *, tenant: str | None
    ) -> None:
        log = await delivering.read_log(self.blobs, webhook.subject)
        tried = [entry for entry in log if entry.get("idempotency_key") == webhook.key]
        if any(entry.get("outcome") == "delivered" for entry in tried):
            await self.events.delete(delivery)  # a redelivered event: once is enough
            return
        share = tenant or ""
        if self._posting.get(share, 0) >= self.settings.per_tenant:
            # This tenant's receivers hold all of its share: its turn comes again in a second.
            # Not an attempt (the attempt number comes from the log, not the dequeue count).
            self.metrics.attempts.labels(event=webhook.event, outcome="deferred").inc()
            await self.events.release(delivery, delay_s=1)
            return
        secret = self.settings.secret_for(tenant)
        attempt_number = len(tried) + 1
        if secret is None:
            attempt = delivering.Attempt(outcome="refused", error="no webhook secret for tenant")
        else:
            assert self._session is not None
            self._posting[share] = self._posting.get(share, 0) + 1
            try:
                attempt = await delivering.post(
                    self._session,
                    self.settings.policy,
                    webhook,
                    secret=secret,
                    attempt=attempt_number,
                )
            finally:
                self._posting[share] -= 1
        self.metrics.seconds.observe(attempt.duration_ms / 1000)
        if attempt.ok:
            await self._record(webhook, attempt_number, attempt, "delivered")
            await self.events.delete(delivery)
        elif attempt.outcome == "refused" or attempt_number >= self.settings.max_attempts:
            await self._record(webhook, attempt_number, attempt, "gave_up")
            reason = f"webhook {webhook.key} gave up after {attempt_number}: {attempt.error}"
            await self.events.poison(delivery, reason=reason, job_id=None)
            logger.error("%s", reason)
        else:
            await self._record(webhook, attempt_number, attempt, "failed")
            await self._again(delivery, webhook.key, attempt.error or "failed")

    async def _record(
        self,
        webhook: delivering.Webhook,
        number: int,
        attempt: delivering.Attempt,
        outcome: delivering.Outcome,
    ) -> None:
        self.metrics.attempts.labels(event=webhook.event, outcome=outcome).inc()
        await delivering.log(self.blobs, webhook, number, attempt, outcome)

    async def _again(self, delivery: Delivery, key: str | None, why: str) -> None:
        """Make the event visible again after a backoff (the queue keeps the timer)."""
        attempt = delivery.dequeue_count
        if attempt >= self.settings.max_attempts:
            await self.events.poison(delivery, reason=f"gave up: {why}", job_id=None)
            return
        delay = backoff.compute_backoff(
            attempt, factor=self.settings.backoff_s, max_backoff=self.settings.max_backoff_s
        )
        seconds = max(1, math.ceil(delay))
        logger.info("event %s (%s) again in %d s: %s", delivery.message_id, key, seconds, why)
        await self.events.release(delivery, delay_s=seconds)

    async def _schedule_check(self, batch_id: str) -> None:
        """Put a delayed batch check on the queue unless one is pending that will run later than
        now: that one will see this item's record (written before its event)."""
        now = time.monotonic()
        if self._checks.get(batch_id, 0.0) - now > 0.25:
            return
        delay = self.settings.batch_check_delay_s
        await self.events.send(contract.batch_event(batch_id), delay_s=delay)
        self._checks[batch_id] = now + delay
        if len(self._checks) > 10_000:
            self._checks = {key: at for key, at in self._checks.items() if at > now}

    async def _manifest(self, batch_id: str) -> contract.BatchManifest | None:
        if batch_id not in self._manifests:
            if len(self._manifests) > 10_000:
                self._manifests.clear()
            self._manifests[batch_id] = await self.client.batch_manifest(batch_id)
        return self._manifests[batch_id]

    async def _noted_callback(self, job_id: str) -> str | None:
        """The callback the gateway noted when it accepted the job (records may lack it)."""
        try:
            note = json.loads(await self.blobs.get(contract.job_note_blob(job_id)))
        except KeyError:
            return None
        url = note.get("callback_url")
        return url if isinstance(url, str) else None


def job_payload(record: contract.ResultRecord) -> dict[str, Any]:
    """The job under the id its tenant knows it by (see reportfarm_gateway.tenancy)."""
    job_id = tenancy.shown_job_id(record.tenant, record.job_id)
    return {
        "type": "job.finished",
        "job_id": job_id,
        "state": record.state,
        "error": record.error,
        "tenant": record.tenant,
        "batch_id": (
            tenancy.shown_batch_id(record.tenant, record.batch_id) if record.batch_id else None
        ),
        "item_index": record.item_index,
        "attempts": record.attempts,
        "output_blob": record.output_blob,
        "submitted_at": record.submitted_at,
        "finished_at": record.finished_at,
        "links": {
            "status": f"/v1/reports/{job_id}",
            "pdf": f"/v1/reports/{job_id}/pdf" if record.state == "succeeded" else None,
        },
    }


def batch_payload(status: batches.BatchStatus, *, tenant: str | None) -> dict[str, Any]:
    """The batch under the name its tenant gave it (see reportfarm_gateway.tenancy)."""
    body = status.to_dict(failed_limit=FAILED_ITEMS_IN_PAYLOAD)
    name = tenancy.shown_batch_id(tenant, status.batch_id)
    body["batch_id"] = name
    body["type"] = "batch.finished"
    body["links"] = {"status": f"/v1/batches/{name}"}
    return body
