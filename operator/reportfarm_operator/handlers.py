"""kopf handlers for ReportPools: decorators only, each handing off to one function.

- start-up: tune kopf, open the runtime (API client, HTTP session, metrics server) and start the
  scaling loop (``ticking.Ticker``: every few seconds ``scaling.scale`` for each pool, then the
  status, the Events and the operator's metrics);
- a liveness probe: /healthz fails when the scaling loop has stopped completing passes;
- an index of the ReportPools (their latest bodies), which the scaling loop ticks;
- create / update / resume: ``reconciling.reconcile`` (the children match the spec).

No finalizer: no handler needs one (no timer, no daemon, no mandatory on-delete handler; kopf
adds a finalizer for any timer or daemon). Deleting a ReportPool, with the operator up or down,
deletes its children through ownerReferences (the garbage collector).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from typing import Any

import kopf

from reportfarm_operator import reconciling, specs, ticking
from reportfarm_operator.runtime import Runtime, open_runtime
from reportfarm_operator.settings import OperatorSettings
from reportfarm_operator.specs import GROUP, PLURAL, VERSION

TICK_INTERVAL_S = 5.0
"""The scaling loop's period."""


def runtime_of(memo: kopf.Memo) -> Runtime:
    runtime = memo.get("runtime")
    if not isinstance(runtime, Runtime):
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return runtime


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    report_pools: kopf.Index[Any, Any] = kwargs["report_pools"]  # the index below, by name
    # Only warnings become Events: kopf would post "Handler ... succeeded" on every change.
    settings.posting.level = logging.WARNING
    # kopf's own bookkeeping goes to annotations under our domain, not into our status.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # No handler needs a finalizer. Earlier versions (with a kopf timer) put this one on every
    # pool: kopf removes a finalizer of this name when no handler requires it, so upgrading
    # cleans them up. With the operator gone, remove it by hand (docs/operator.md: "Deleting a
    # pool").
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
    runtime = await open_runtime(OperatorSettings.from_env())
    memo.runtime = runtime
    ticker = ticking.Ticker(
        runtime,
        pools=lambda: _latest(report_pools),
        interval=TICK_INTERVAL_S,
        tick_timeout=runtime.settings.tick_timeout,
    )
    memo.ticker = asyncio.create_task(ticker.run(), name="reportfarm scaling loop")
    memo.scaling_loop = ticker


@kopf.on.probe(id="scalingLoop")
def scaling_loop(memo: kopf.Memo, **_: Any) -> float:
    """Liveness (/healthz): seconds since the scaling loop last completed a pass; the probe
    fails (HTTP 500) past ``stuck_after``, or when the loop has ended. kopf's own /healthz
    only says that its event loop runs: a wedged or dead scaling loop would pass it."""
    ticker, task = memo.get("scaling_loop"), memo.get("ticker")
    if not isinstance(ticker, ticking.Ticker) or not isinstance(task, asyncio.Task):
        return 0.0  # still starting
    try:
        return ticker.alive(
            running=not task.done(), stuck_after=runtime_of(memo).settings.stuck_after
        )
    except ticking.Stuck as error:
        raise kopf.PermanentError(str(error)) from error


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    task = memo.get("ticker")
    if isinstance(task, asyncio.Task):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    runtime = memo.get("runtime")
    if isinstance(runtime, Runtime):
        await runtime.close()


@kopf.index(GROUP, VERSION, PLURAL)
def report_pools(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, name) -> the pool's latest body, for the scaling loop."""
    return {(namespace or "", name): copy.deepcopy(dict(body))}


def _latest(index: kopf.Index[Any, Any]) -> list[dict[str, Any]]:
    found = []
    for key in list(index):
        for body in index.get(key, ()):
            found.append(body)
            break
    return found


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.on.resume(GROUP, VERSION, PLURAL)
async def reconcile(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    try:
        spec = specs.parse(body.spec)
    except specs.SpecError as error:
        # Not retried until the spec changes (kopf posts it as an Error Event on the pool); the
        # scaling loop reports it in the status, with a Warning Event naming the field.
        raise kopf.PermanentError(f"invalid spec: {error}") from error
    applied = await reconciling.reconcile(body, spec, kube=runtime_of(memo).kube)
    logger.info("children applied: %s", ", ".join(applied))
