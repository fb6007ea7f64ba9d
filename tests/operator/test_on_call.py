"""What an on-call SRE reads: status that means what it says, each failure announced once (also
after a restart), warnings that do not repeat every tick, and a liveness probe that knows the
scaling loop. Fakes for the API and the observer (tests/operator/test_scaling_unit.py); the real
control plane is in tests/kube/test_operator_on_call.py.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp
import pytest
from reportfarm_operator import observing, scaling, throttling, ticking

from reportfarm import policy
from tests.operator.test_scaling_unit import (
    NOW,
    FakeObserver,
    body,
    cluster,
    conditions,
    pod,
    remembered,
    tick,
)


async def test_an_unreadable_queue_is_not_healthy_even_at_zero() -> None:
    outcome = await tick(
        body(remembered(replicas=0, browsers_per_pod=1)), cluster(0), FakeObserver(depth=None)
    )
    found = conditions(outcome)
    assert found["Ready"]["status"] == "False"  # the HEALTHY column
    assert found["Ready"]["reason"] == "QueueUnreadable"


async def test_degraded_lists_every_active_reason() -> None:
    path, stuck = pod("c", ready=False)
    stuck["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 Insufficient cpu.",
            }
        ],
    }
    kube = cluster(2, pod("a"), pod("b"), (path, stuck))
    loads = {n: observing.PodLoad(size=4, busy=4) for n in ("a", "b")}
    status = remembered(replicas=2, browsers_per_pod=4, decided_at=NOW - 5, busy_average=8.0)
    outcome = await tick(
        body(status, replicas={"min": 0, "max": 2}), kube, FakeObserver(depth=500, loads=loads)
    )
    degraded = conditions(outcome)["Degraded"]
    assert outcome.decision is not None and outcome.decision.saturated
    assert degraded["reason"] == "Unschedulable,AtMaxReplicas", degraded
    assert "Insufficient cpu" in degraded["message"] and "need" in degraded["message"]
    assert outcome.status["reason"] == "Unschedulable,AtMaxReplicas"  # the REASON column


async def test_blind_pods_going_away_is_no_recovery() -> None:
    """A blind pool scaled to zero: MetricsReadable holds vacuously, no Normal Event."""
    kube = cluster(1, pod("a"))
    status = remembered(replicas=1, browsers_per_pod=4, decided_at=NOW - 5)
    blind = await tick(body(status), kube, FakeObserver(depth=3))
    assert conditions(blind)["MetricsReadable"]["reason"] == "Blind"
    gone = await tick(body(blind.status), cluster(0), FakeObserver(depth=0), now=NOW + 5)
    metrics = conditions(gone)["MetricsReadable"]
    assert (metrics["status"], metrics["reason"]) == ("True", "NoReadyPods")
    assert not [e for e in gone.events if e.reason == "MetricsReadable"], gone.events
    # Pods that answer again are a recovery, and say so.
    loads = {"b": observing.PodLoad(size=4, busy=0)}
    back = await tick(body(blind.status), cluster(1, pod("b")), FakeObserver(depth=3, loads=loads))
    assert ("Normal", "MetricsReadable") in [(e.type, e.reason) for e in back.events]


async def test_the_reached_size_is_beside_the_decided_one() -> None:
    kube = cluster(1, pod("a"))
    loads = {"a": observing.PodLoad(size=1, busy=1)}
    status = remembered(replicas=1, browsers_per_pod=4, decided_at=NOW - 5, busy_average=1.0)
    outcome = await tick(
        body(status, replicas={"min": 1, "max": 1}),
        kube,
        FakeObserver(depth=1, loads=loads, resize_error="HTTP 503: busy"),
    )
    last = outcome.status["lastDecision"]
    assert (last["reachedReplicas"], last["reachedBrowsersPerPod"]) == (1, 1)
    assert last["browsersPerPod"] != last["reachedBrowsersPerPod"]


@pytest.mark.parametrize("pods", [1, 3, 40])
async def test_a_blind_message_has_each_reason_once_however_many_pods(pods: int) -> None:
    names = [f"renderer-{i:02d}" for i in range(pods)]
    kube = cluster(pods, *(pod(n) for n in names))
    status = remembered(replicas=pods, browsers_per_pod=4, decided_at=NOW - 5)
    outcome = await tick(body(status, replicas={"min": 0, "max": 50}), kube, FakeObserver(depth=3))
    message = conditions(outcome)["MetricsReadable"]["message"]
    assert message.count("timed out") == 1, message
    assert "\n" not in message and len(message) < 400, message
    assert names[0] in message


async def test_a_failing_resize_warns_once_per_change(caplog: pytest.LogCaptureFixture) -> None:
    kube = cluster(1, pod("a"))
    loads = {"a": observing.PodLoad(size=1, busy=1)}
    status = remembered(replicas=1, browsers_per_pod=1, decided_at=NOW - 5, busy_average=1.0)
    warnings = throttling.LogThrottle(logging.getLogger(scaling.__name__))
    caplog.set_level(logging.INFO, logger=scaling.__name__)

    async def ticks(error: str, count: int, start: float) -> None:
        nonlocal status
        for index in range(count):
            observer = FakeObserver(depth=4, loads=loads, resize_error=error)
            outcome = await scaling.scale(
                body(status, replicas={"min": 1, "max": 5}),
                kube=kube,  # type: ignore[arg-type]
                observer=observer,  # type: ignore[arg-type]
                now=start + 5 * index,
                warnings=warnings,
            )
            assert outcome is not None
            status = outcome.status

    await ticks("HTTP 401: unauthorized", 10, NOW)
    await ticks("HTTP 503: busy", 10, NOW + 50)
    failed = [r.getMessage() for r in caplog.records if "resize" in r.getMessage()]
    assert len(failed) == 2, failed
    assert all(r.levelno == logging.WARNING for r in caplog.records if "resize" in r.getMessage())


def test_a_restart_re_announces_every_ongoing_failure() -> None:
    """``ticking.ongoing``: each failure the status shows, as if none had been seen."""

    async def go() -> tuple[scaling.Outcome, scaling.Outcome]:
        path, stuck = pod("c", ready=False)
        stuck["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
        kube = cluster(2, pod("a"), (path, stuck))
        status = remembered(replicas=2, browsers_per_pod=4, decided_at=NOW - 5)
        first = await tick(body(status), kube, FakeObserver(depth=None))
        again = await tick(body(first.status), kube, FakeObserver(depth=None), now=NOW + 5)
        return first, again

    _, again = asyncio.run(go())
    assert not [e for e in again.events if e.type == "Warning"]  # the same process: quiet
    announced = {(e.type, e.reason) for e in ticking.ongoing(again)}  # a new process
    assert {
        ("Warning", "QueueUnreadable"),
        ("Warning", "Unschedulable"),
        ("Warning", "Blind"),
    } <= announced, announced
    assert all(e.type == "Warning" for e in ticking.ongoing(again))


async def test_a_timeout_names_the_timeout() -> None:
    server = await asyncio.start_server(lambda r, w: asyncio.sleep(30), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    timeout = aiohttp.ClientTimeout(total=0.3)
    async with server, aiohttp.ClientSession(timeout=timeout) as session:
        seen = observing.Observer(kube=None, session=session, queue_timeout=1, port=port)  # type: ignore[arg-type]
        failure = await seen.resize("127.0.0.1", 2, token=None)
        loads = await seen.pod_loads({"a": ("uid-a", "127.0.0.1")})
    assert failure == "no answer within 0.3 s (pod timeout)"
    assert loads["a"] == failure


def test_liveness_fails_when_the_loop_stops_completing_passes() -> None:
    ticker = ticking.Ticker(None, pools=list, interval=5.0)  # type: ignore[arg-type]
    assert ticker.alive(running=True, stuck_after=30) < 5
    ticker.completed_at = time.monotonic() - 45
    with pytest.raises(ticking.Stuck, match="not completed a pass for 45 s"):
        ticker.alive(running=True, stuck_after=30)
    ticker.completed_at = time.monotonic()
    with pytest.raises(ticking.Stuck, match="ended"):
        ticker.alive(running=False, stuck_after=30)


def test_policy_reasons_are_condition_reasons() -> None:
    """A comma-joined Degraded reason stays a valid condition reason (Kubernetes' pattern)."""
    import re

    pattern = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    joined = ",".join(["QueueUnreadable", "Unschedulable", "PoolResizeFailed", "AtMaxReplicas"])
    assert pattern.match(joined)
    assert all(pattern.match(reason.value) for reason in policy.Reason)


def test_json_log_times_are_rfc_3339_with_their_zone(capsys: pytest.CaptureFixture[str]) -> None:
    import datetime
    import json

    from reportfarm import logs

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.configure(json_lines=True, level="INFO")
        logging.getLogger("reportfarm.test").info("hello", extra={"pool": "ns/p"})
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    when = datetime.datetime.fromisoformat(line["time"])
    assert when.tzinfo is not None and line["time"][10] == "T", line
    assert abs(time.time() - when.timestamp()) < 3600
