"""The scaling loop: every few seconds, one tick (``scaling.scale``) for each ReportPool.

Not a kopf timer, on purpose: kopf puts a finalizer on every object that has a timer or a daemon
(kopf issue #1074, no option turns it off), so with the operator down (crash loop, image pull
failure, uninstalled first) ``kubectl delete reportpool``, and deleting its namespace, would
hang until it came back. Nothing here needs a finalizer: the children go with their owner
(ownerReferences). So kopf only keeps an index of the pools (``handlers.report_pools``, no
finalizer) and this loop ticks them: a pass never overlaps the previous one; the pools of one
pass tick concurrently, each bounded by ``tick_timeout``.

What a tick writes: the status (a merge patch of the status subresource) and its Events. The
status the loop wrote last is remembered per pool (by uid), so a watch stream that lags behind
never feeds the policy an older memory. A failing tick is logged with a rate limit (the first
with its traceback, then a summary every few minutes) and reported once as a Warning Event.

After a restart, the first tick of each pool re-announces every failure still going on (a log
line and a Warning Event each: wrong key, missing Secret, Unschedulable, failing resizes, an
invalid spec), derived afresh as if the previous status had none; later ticks report changes only.
A restarted operator's log says what its status says.

``completed_at`` is when the last pass over all pools ended: the liveness probe
(``handlers.alive``) fails when it is older than a few periods (a wedged or dead loop).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import kopf

from reportfarm_operator import k8s, observing, reporting, scaling, specs, throttling
from reportfarm_operator.runtime import Runtime

logger = logging.getLogger(__name__)

Pools = Callable[[], Iterable[Mapping[str, Any]]]
"""The pools to tick now: their latest bodies (kopf's index)."""


def status_path(namespace: str, name: str) -> str:
    base = f"/apis/{specs.GROUP}/{specs.VERSION}/namespaces/{namespace}/{specs.PLURAL}"
    return f"{base}/{name}/status"


class Stuck(Exception):
    """The scaling loop has stopped completing passes (the liveness probe fails)."""


class Ticker:
    def __init__(
        self, runtime: Runtime, *, pools: Pools, interval: float, tick_timeout: float = 60.0
    ) -> None:
        self.runtime = runtime
        self.pools = pools
        self.interval = interval
        self.tick_timeout = tick_timeout
        self.throttle = throttling.LogThrottle(logger)
        self.warnings = throttling.LogThrottle(logging.getLogger(scaling.__name__))
        """Repeated warnings of the ticks themselves (a failing resize, per pod)."""
        self.completed_at = time.monotonic()
        """``time.monotonic()`` when the last pass over all pools ended (at first: creation)."""
        self._written: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (uid, status)
        self._announced: set[str] = set()
        """Pools (by uid) whose ongoing failures this process has announced."""

    async def run(self) -> None:
        """Tick every pool every ``interval`` seconds, until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self.tick_all()
            self.completed_at = time.monotonic()
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    def alive(self, *, running: bool, stuck_after: float) -> float:
        """Seconds since the last pass over all pools ended; :class:`Stuck` when the loop has
        ended (``running`` false) or that is more than ``stuck_after``."""
        if not running:
            raise Stuck("the scaling loop has ended")
        stalled = time.monotonic() - self.completed_at
        if stalled > stuck_after:
            raise Stuck(
                f"the scaling loop has not completed a pass for {stalled:.0f} s "
                f"(> {stuck_after:g} s)"
            )
        return round(stalled, 1)

    async def tick_all(self) -> None:
        bodies = [dict(body) for body in self.pools()]
        live = {_key(body) for body in bodies}
        self._announced &= {str((body.get("metadata") or {}).get("uid")) for body in bodies}
        for key in set(self._written) - live:  # deleted: forget it and its metric series
            del self._written[key]
            namespace, name = key.split("/", 1)
            self.runtime.metrics.forget(namespace, name)
        await asyncio.gather(*(self.tick(body) for body in bodies))

    async def tick(self, raw: Mapping[str, Any]) -> None:
        key = _key(raw)
        meta = raw.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return
        body = kopf.Body(cast(kopf.RawBody, self._freshest(key, raw)))
        metrics = self.runtime.metrics
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.tick_timeout):
                outcome = await scaling.scale(
                    body,
                    kube=self.runtime.kube,
                    observer=self.runtime.observer,
                    now=time.time(),
                    warnings=self.warnings,
                )
                if outcome is not None:
                    await self.write(body, outcome)
        except Exception as error:
            metrics.loop_errors.inc()
            reason = (
                f"no result within {self.tick_timeout:g} s (tick timeout)"
                if isinstance(error, TimeoutError)
                else observing.short_reason(error)
            )
            if self.throttle.failure(key, f"scaling tick failed: {reason}", error=error):
                await self.post(body, reporting.Event("Warning", "TickFailed", reason))
        else:
            self.throttle.success(key)
        finally:
            metrics.loop_seconds.observe(time.monotonic() - started)

    async def write(self, body: kopf.Body, outcome: scaling.Outcome) -> None:
        namespace, name = body.metadata.namespace or "", body.metadata.name or ""
        # When this loop last looked (the OBSERVED column): its age is the staleness signal while
        # no operator runs, since nobody else can write the status then.
        observed = {**outcome.status, "observedAt": reporting.timestamp(time.time())}
        outcome = dataclasses.replace(outcome, status=observed)
        try:
            await self.runtime.kube.merge_patch(
                status_path(namespace, name), {"status": outcome.status}
            )
        except k8s.KubeError as error:
            if error.not_found:  # deleted meanwhile
                return
            raise
        uid = body.metadata.uid or ""
        self._written[f"{namespace}/{name}"] = (uid, _merged(body, outcome))
        events = list(outcome.events)
        if uid not in self._announced:  # this process's first word on the pool
            events += [event for event in ongoing(outcome) if event not in events]
            self._announced.add(uid)
        for event in events:
            await self.post(body, event)
        self.runtime.metrics.record(namespace, name, outcome)

    async def post(self, body: kopf.Body, event: reporting.Event) -> None:
        """An Event on the ReportPool; a failure to post is logged (rate-limited), not raised."""
        manifest = k8s.event_manifest(
            body,
            type=event.type,
            reason=event.reason,
            message=event.message,
            now=reporting.timestamp(time.time()),
        )
        level = logging.WARNING if event.type == "Warning" else logging.INFO
        logger.log(
            level,
            "%s/%s %s: %s",
            body.metadata.namespace,
            body.metadata.name,
            event.reason,
            event.message,
            extra={"pool": _key(body), "event": event.reason},
        )
        try:
            await self.runtime.kube.create(manifest)
        except Exception as error:
            self.throttle.failure(_key(body), f"Event not posted: {observing.short_reason(error)}")

    def _freshest(self, key: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The indexed body with the status this loop wrote last (the watch may lag behind)."""
        written = self._written.get(key)
        uid = (raw.get("metadata") or {}).get("uid") or ""
        if written is None or written[0] != uid:
            return dict(raw)
        return {**raw, "status": written[1]}


def ongoing(outcome: scaling.Outcome) -> list[reporting.Event]:
    """Every failure the outcome's status shows, as Events, as if none had been seen before."""
    current = outcome.status.get("conditions") or []
    if outcome.seen is None:  # an invalid spec: nothing was observed
        return [
            reporting.Event("Warning", str(c["reason"]), str(c["message"]))
            for c in current
            if c.get("type") == "SpecValid" and c.get("status") == "False"
        ]
    return [
        event
        for event in reporting.events(outcome.seen, previous={}, current=current)
        if event.type == "Warning"
    ]


def _key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _merged(body: kopf.Body, outcome: scaling.Outcome) -> dict[str, Any]:
    """The status after the merge patch (None deletes a field, as the API server does)."""
    merged = dict(body.status)
    for field, value in outcome.status.items():
        if value is None:
            merged.pop(field, None)
        else:
            merged[field] = value
    return merged
