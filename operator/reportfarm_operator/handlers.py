"""kopf handlers for ReportPools: decorators only, each handing off to one function.

- start-up: tune kopf, open the runtime (API client, HTTP session, metrics server);
- create / update / resume: ``reconciling.reconcile`` (the children match the spec);
- a timer every few seconds: ``scaling.scale`` (observe, decide, apply), then the status, the
  Events and the operator's metrics;
- delete: nothing to do: the children go with their owner (ownerReferences, garbage collector),
  so no finalizer; an optional handler drops the pool's metric series.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

from reportfarm_operator import reconciling, scaling
from reportfarm_operator.runtime import Runtime, open_runtime
from reportfarm_operator.settings import OperatorSettings
from reportfarm_operator.specs import GROUP, PLURAL, VERSION

TICK_INTERVAL_S = 5.0
"""The scaling loop's period (kopf timers never overlap themselves)."""


def runtime_of(memo: kopf.Memo) -> Runtime:
    runtime = memo.get("runtime")
    if not isinstance(runtime, Runtime):
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return runtime


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Only warnings become Events: kopf would post "Timer ... succeeded" on every tick.
    settings.posting.level = logging.WARNING
    # kopf's own bookkeeping goes to annotations under our domain, not into our status.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # Named for our domain, should a handler ever need one (none does: children are owned).
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    # Reconnect watch streams every few minutes, so a silently dropped connection heals.
    settings.watching.server_timeout = 270
    settings.watching.client_timeout = 300
    settings.watching.connect_timeout = 30
    # Any single API request kopf makes gives up after this long (then retries).
    settings.networking.request_timeout = 60
    # No scanning of CRDs and namespaces: the ReportPool CRD is installed before the operator
    # (Helm installs crds/ first) and the namespaces are given. Least privilege: no cluster-scoped
    # permission at all when watching one namespace. Restart the operator if the CRD comes later.
    settings.scanning.disabled = True
    memo.runtime = await open_runtime(OperatorSettings.from_env())


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    runtime = memo.get("runtime")
    if isinstance(runtime, Runtime):
        await runtime.close()


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.on.resume(GROUP, VERSION, PLURAL)
async def reconcile(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    applied = await reconciling.reconcile(body, kube=runtime_of(memo).kube)
    logger.info("children applied: %s", ", ".join(applied))


# No ``idle=``: every tick writes the status (the policy's memory), which would reset kopf's idle
# clock and starve the timer. A failed tick is retried after one interval, not kopf's default 60 s.
@kopf.timer(GROUP, VERSION, PLURAL, interval=TICK_INTERVAL_S, backoff=TICK_INTERVAL_S)
async def scale(
    body: kopf.Body,
    patch: kopf.Patch,
    name: str,
    namespace: str | None,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    runtime = runtime_of(memo)
    started = time.monotonic()
    try:
        outcome = await scaling.scale(
            body, kube=runtime.kube, observer=runtime.observer, now=time.time()
        )
    except Exception:
        runtime.metrics.loop_errors.inc()
        raise
    finally:
        runtime.metrics.loop_seconds.observe(time.monotonic() - started)
    if outcome is None:
        return
    patch.status.update(outcome.status)
    for event in outcome.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)
        logger.info("%s: %s", event.reason, event.message)
    runtime.metrics.record(namespace or "", name, outcome)


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
async def forget(name: str, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    runtime_of(memo).metrics.forget(namespace or "", name)
