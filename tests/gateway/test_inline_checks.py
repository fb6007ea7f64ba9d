"""Small bodies are checked on the event loop, within each tenant's share of it; the rest, and a
tenant past its share, in the worker processes, which start with the first body that needs one.

What may not happen: an answer that differs with where a body was checked, a tenant that spends
more of the loop than its share (or takes another tenant's), workers started for nothing."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from reportfarm_gateway import checking, offloading
from reportfarm_gateway.context import OFFLOADER

from reportfarm.settings import StorageSettings

from .conftest import auth, gateway_settings, running_gateway
from .strategies import bodies


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_tenants_bucket_refills_at_its_share_and_the_total_bounds_them_all() -> None:
    clock = Clock()
    budget = offloading.InlineBudget(tenant_share=0.1, total_share=0.25, burst_s=0.1, clock=clock)
    assert budget.allows("acme", 0.1) and not budget.allows("acme", 0.11)  # a burst at most
    budget.charge("acme", 0.1)
    assert not budget.allows("acme", 0.001)  # spent
    assert budget.allows("globex", 0.1)  # its own bucket, and the total still holds 0.15
    assert not budget.allows("globex", 0.16)
    clock.now += 0.5  # refills 0.05 at its share
    assert budget.allows("acme", 0.05) and not budget.allows("acme", 0.051)
    budget.charge("acme", 0.3)  # a check that cost more than it was expected to: in debt
    clock.now += 2.0  # 0.05 - 0.3 + 0.2 = -0.05
    assert not budget.allows("acme", 0.0001)
    clock.now += 10.0
    assert budget.allows("acme", 0.1)  # full again, never more than a burst
    assert not budget.allows("acme", 0.1001)


def test_all_tenants_together_spend_at_most_the_total_share() -> None:
    clock = Clock()
    budget = offloading.InlineBudget(tenant_share=0.1, total_share=0.25, burst_s=0.1, clock=clock)
    spent = 0.0
    tenants = [f"t{i}" for i in range(20)]
    for _ in range(1000):  # 100 s, every tenant trying a 5 ms check every 0.1 s
        clock.now += 0.1
        for tenant in tenants:
            if budget.allows(tenant, 0.005):
                budget.charge(tenant, 0.005)
                spent += 0.005
    assert spent <= 0.25 * clock.now + 0.25  # the total's share, and its one burst
    assert spent >= 0.2 * clock.now  # and the share is used: the bucket is not lost


def _bodies() -> dict[str, bytes]:
    report = {"template": "plain", "data": {"name": "王小明", "n": [1, 2.5, -3]}, "wait_s": 0}
    return {
        "valid": json.dumps(report).encode(),
        "not-json": b'{"template": "plain", "data": ',
        "duplicate-keys": b'{"template": "plain", "data": {"a": 1, "a": 2}}',
        "lone-surrogate": b'{"template": "plain", "data": {"a": "\\ud800"}}',
        "unknown-field": b'{"template": "plain", "data": {}, "colour": "red"}',
        "null": b'{"template": "plain", "data": {}, "pdf": null}',
        "deep": b'{"template": "plain", "data": ' + b'{"a": ' * 300 + b"1" + b"}" * 301,
        "not-an-object": b"[1, 2, 3]",
    }


def _comparable(answer: object) -> object:
    """What must not depend on where the body was checked: a refusal whole; a report's stored
    job without the fields that are new each time (its id, its time)."""
    if isinstance(answer, checking.Refusal):
        return answer
    assert isinstance(answer, checking.CheckedReport)
    job = json.loads(base64.b64decode(answer.job.message))
    for field in ("job_id", "submitted_at", "id", "output_blob"):
        job.pop(field, None)
    note = {
        key: value for key, value in answer.note.items() if key not in ("job_id", "submitted_at")
    }
    return job, note, answer.wait_s, answer.files, answer.keyed


async def _check(offloader: offloading.Offloader, raw: bytes) -> object:
    """``raw`` checked as tenant acme's report, where ``offloader`` says."""
    return await offloader.run(
        "acme",
        checking.check_report,
        raw=raw,
        tenant="acme",
        key=None,
        default_wait_s=30.0,
        cpu_s=5.0,
    )


async def test_the_same_body_gets_the_same_answer_on_the_loop_and_in_a_worker() -> None:
    on_loop = offloading.Offloader(workers=2)
    in_workers = offloading.Offloader(workers=2, inline_bytes=0)
    try:
        for name, raw in _bodies().items():
            answers = [await _check(offloader, raw) for offloader in (on_loop, in_workers)]
            assert _comparable(answers[0]) == _comparable(answers[1]), name
        assert (on_loop.inline, on_loop.offloaded) == (len(_bodies()), 0)
        assert not on_loop.started  # no worker was needed: none was started
        assert (in_workers.inline, in_workers.offloaded) == (0, len(_bodies()))
    finally:
        on_loop.close()
        in_workers.close()


@pytest.fixture(scope="module")
def loop_and_workers() -> Iterator[tuple[offloading.Offloader, offloading.Offloader]]:
    on_loop = offloading.Offloader(workers=1)
    in_workers = offloading.Offloader(workers=1, inline_bytes=0)
    try:
        yield on_loop, in_workers
    finally:
        on_loop.close()
        in_workers.close()


@given(raw=bodies)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_generated_body_gets_the_same_answer_on_the_loop_and_in_a_worker(
    loop_and_workers: tuple[offloading.Offloader, offloading.Offloader], raw: bytes
) -> None:
    on_loop = loop_and_workers[0]
    inline_before = on_loop.inline
    answers = [asyncio.run(_check(offloader, raw)) for offloader in loop_and_workers]
    assert _comparable(answers[0]) == _comparable(answers[1])
    assert on_loop.inline == inline_before + 1  # it was checked on the loop, not by a worker


async def test_a_tenant_past_its_share_goes_to_the_workers_and_the_others_stay_on_the_loop() -> (
    None
):
    clock = Clock()  # stopped: nothing refills while the test runs
    offloader = offloading.Offloader(
        workers=2, budget=offloading.InlineBudget(burst_s=0.1, clock=clock)
    )
    small = _bodies()["valid"]
    try:
        for _ in range(5000):  # ~0.1 ms each: the tenant's 0.1 s is spent long before
            await offloader.run(
                "acme", checking.check_report, raw=small, tenant="acme", key=None,
                default_wait_s=30.0, cpu_s=5.0,
            )  # fmt: skip
            if offloader.offloaded:
                break
        assert offloader.offloaded == 1 and offloader.started  # past its share: a worker
        assert 50 < offloader.inline < 5000
        inline = offloader.inline
        answer = await offloader.run(
            "globex", checking.check_report, raw=small, tenant="globex", key=None,
            default_wait_s=30.0, cpu_s=5.0,
        )  # fmt: skip
        assert isinstance(answer, checking.CheckedReport)
        assert offloader.inline == inline + 1  # the other tenant's share is untouched
    finally:
        offloader.close()


@pytest.mark.azurite
async def test_a_gateway_of_small_reports_runs_no_worker_until_a_large_body_comes(
    storage: StorageSettings,
) -> None:
    async with running_gateway(gateway_settings(storage)) as gateway:
        offloader = gateway.app[OFFLOADER]
        body = {"template": "plain", "data": {"name": "x"}, "wait_s": 0}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth()
        ) as response:
            assert response.status == 202, await response.text()
        assert offloader.inline == 1 and not offloader.started
        large = {**body, "data": {"rows": ["x" * 100] * 400}}  # ~40 KB: past the 16 KiB
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=large, headers=auth()
        ) as response:
            assert response.status == 202, await response.text()
        assert offloader.offloaded == 1 and offloader.started
