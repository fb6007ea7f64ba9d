"""Nothing a request sends runs in the gateway's event loop at more than linear cost (issue 25).

The bodies that once froze the loop (escaped quotes under 201 brackets: 24 KB took 5-6 s, the
cost growing with the square of the size; a valid 2 MiB body nested 200 deep: 6-11 s), scaled
up, and the other classes a parser pays for (deep nesting, duplicate keys, numbers, bad text),
are sent to a real gateway (real Azurite) while a probe asks ``/healthz`` back to back, in the
same process and loop: any stretch the loop spends on a body lands inside some probe.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from reportfarm_gateway import parsing

from reportfarm.settings import StorageSettings

from .conftest import Gateway, auth, gateway_settings, running_gateway

pytestmark = [pytest.mark.azurite]

LOOP_BOUND_S = 0.1
"""The issue's bound: /healthz answers within 100 ms while the worst bodies are checked, held
for 99% of the probes: on this shared 2-core machine at load 8-12 the OS alone now and then
leaves the process unscheduled for longer (a probe during a body refused in a millisecond, with
no worker busy, waited 135 ms). The rest must still be far from a freeze (FREEZE_S)."""
FREEZE_S = 1.0
"""What the old pre-check did: 5-11 s with the loop stopped."""


def _report(data: str) -> bytes:
    return f'{{"template": "plain", "wait_s": 0, "data": {data}}}'.encode()


def _nested(depth: int, size: int) -> str:
    """``{"x": [[[...["aaaa..."]...]]]}`` nested ``depth`` deep, about ``size`` bytes."""
    leaf = json.dumps(["a" * 64] * (size // 70))
    return '{"x": ' + "[" * (depth - 3) + leaf + "]" * (depth - 3) + "}"


def hostile_bodies() -> dict[str, bytes]:
    quotes = 2 * 2**20
    return {
        # The body (24 KB, invalid: the string never ends), and 2 MiB of the same.
        "escaped-quotes-24KB": b"[" * 201 + b'"' + b'\\"' * 12_000,
        "escaped-quotes-2MiB": b"[" * 201 + b'"' + b'\\"' * (quotes // 2),
        "valid-2MiB-nested-200": _report(_nested(parsing.MAX_DEPTH - 2, 2 * 2**20)),
        "valid-2MiB-nested-201": _report(_nested(parsing.MAX_DEPTH + 1, 2 * 2**20)),
        "brackets-4MiB": b"[" * (4 * 2**20),
        "duplicate-keys-2MiB": _report(
            "{" + ",".join(f'"k{i % 1000}": {i}' for i in range(150_000)) + "}"
        ),
        "objects-4MiB": _report("[" + ",".join(['{"a": 1}'] * 450_000) + "]"),
        "numbers-4MiB": _report('{"n": [' + ",".join(["1e9"] * 1_000_000) + "]}"),
        "valid-15MiB-of-text": _report(
            '{"rows": [' + ",".join(['"' + "x" * 30 + '"'] * 480_000) + "]}"
        ),
        "lone-surrogate-at-the-end-2MiB": _report(
            '{"rows": [' + ",".join(['"ok"'] * 400_000) + ', "\\ud800"]}'
        ),
    }


@pytest_asyncio.fixture
async def gateway(storage: StorageSettings) -> AsyncIterator[Gateway]:
    async with running_gateway(gateway_settings(storage, dispatcher=False)) as front:
        yield front


async def _probe(
    gateway: Gateway, stop: asyncio.Event, seen: list[float], now: list[str] | None = None
) -> None:
    """/healthz back to back until ``stop``; each latency into ``seen``, and into ``by_body``
    under the body being sent when it ended (``now[0]``)."""
    while not stop.is_set():
        started = time.perf_counter()
        async with gateway.http.get(gateway.at("/healthz")) as answer:
            assert answer.status == 200
        seen.append(time.perf_counter() - started)
        if now is not None:
            _BY_BODY.setdefault(now[0], []).append(seen[-1])


_BY_BODY: dict[str, list[float]] = {}


async def test_healthz_answers_within_100ms_while_the_worst_bodies_are_checked(
    gateway: Gateway,
) -> None:
    bodies = hostile_bodies()
    headers = {**auth(), "Content-Type": "application/json"}
    # This pytest process holds the heap of every test before this one: a full collection of
    # it (not the gateway's, whose heap is small) would land in some probe. Set it aside.
    gc.collect()
    gc.freeze()
    idle: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(gateway, stop, idle))
    await asyncio.sleep(1.0)
    stop.set()
    await probe
    seen: list[float] = []
    stop = asyncio.Event()
    now = ["start"]
    probe = asyncio.create_task(_probe(gateway, stop, seen, now))
    answers: dict[str, tuple[int, float]] = {}
    try:
        for name, body in bodies.items():
            for path in ("/v1/reports", "/v1/batches"):
                now[0] = f"{name} {path}"
                started = time.perf_counter()
                async with gateway.http.post(gateway.at(path), data=body, headers=headers) as r:
                    answer = await r.json()
                    assert r.status in (202, 400), (name, path, r.status, answer)
                answers[f"{name} {path}"] = (r.status, time.perf_counter() - started)
    finally:
        stop.set()
        await probe
        gc.unfreeze()
    worst = max(seen)
    p50, p95 = statistics.median(seen), statistics.quantiles(seen, n=20)[-1]
    p99 = statistics.quantiles(seen, n=100)[-1]
    print(f"\nidle /healthz: n={len(idle)} p50={statistics.median(idle) * 1e3:.1f} ms")
    print(f"under bodies:  n={len(seen)} p50={p50 * 1e3:.1f} p95={p95 * 1e3:.1f} ms")
    print(f"               p99={p99 * 1e3:.1f} max={worst * 1e3:.1f} ms")
    for name, (status, seconds) in answers.items():
        stall = max(_BY_BODY.get(name, [0.0]))
        print(f"  {name}: {status} in {seconds * 1e3:.0f} ms, /healthz max {stall * 1e3:.1f} ms")
    assert answers["valid-2MiB-nested-201 /v1/reports"][0] == 400
    assert answers["lone-surrogate-at-the-end-2MiB /v1/reports"][0] == 400
    assert p99 < LOOP_BOUND_S, f"1% of probes waited {p99 * 1e3:.0f} ms or more"
    assert worst < FREEZE_S, f"the loop stalled {worst * 1e3:.0f} ms"


@pytest.mark.parametrize("size", [2**10, 2**14, 2**18, 2**21])
def test_a_hostile_body_costs_time_linear_in_its_size(size: int) -> None:
    """The class that was quadratic, at sizes 2,048x apart: CPU per byte stays in one band (a
    generous 20x; a quadratic cost would grow 2,048x). A pure check of gateway.parsing."""
    per_byte = []
    for scale in (size, size * 8):
        body = b"[" * 201 + b'"' + b'\\"' * scale
        started = time.thread_time()
        with pytest.raises(parsing.BodyError):
            parsing.parse(body)
        per_byte.append((time.thread_time() - started + 1e-4) / len(body))
    assert per_byte[1] < 20 * per_byte[0], per_byte
