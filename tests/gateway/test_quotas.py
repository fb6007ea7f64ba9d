"""Tenant quotas (429 + Retry-After), auth (401) and backpressure (503 + Retry-After), against
the real gateway and Azurite; the token bucket as a table."""

from __future__ import annotations

import asyncio

import pytest
from reportfarm_gateway import quotas

from reportfarm.settings import StorageSettings

from .conftest import auth, gateway_settings, running_gateway

REPORT = {"template": "plain", "data": {"name": "x"}, "wait_s": 0}


@pytest.mark.azurite
async def test_a_tenant_over_its_rate_gets_429_with_retry_after_and_others_do_not(
    storage: StorageSettings,
) -> None:
    settings = gateway_settings(storage, rate_per_s=0.5, burst=3, dispatcher=False)
    async with running_gateway(settings) as gateway:
        statuses = []
        for _ in range(4):
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=REPORT, headers=auth()
            ) as response:
                statuses.append(response.status)
                retry_after = response.headers.get("Retry-After")
        assert statuses == [202, 202, 202, 429]
        assert retry_after is not None and 1 <= int(retry_after) <= 2
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=REPORT, headers=auth("globex")
        ) as other:
            assert other.status == 202
        async with gateway.http.get(gateway.at("/metrics")) as metrics:
            text = await metrics.text()
    assert 'reportfarm_gateway_rejections_total{reason="rate"} 1.0' in text


@pytest.mark.azurite
async def test_a_tenant_past_its_in_flight_cap_gets_429(storage: StorageSettings) -> None:
    settings = gateway_settings(storage, in_flight=2, dispatcher=False)
    waiting = {**REPORT, "wait_s": 3}  # nothing renders: each waits its full 3 s
    async with running_gateway(settings) as gateway:

        async def post() -> tuple[int, str | None]:
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=waiting, headers=auth()
            ) as response:
                return response.status, response.headers.get("Retry-After")

        first = [asyncio.create_task(post()) for _ in range(2)]
        await asyncio.sleep(1)
        assert await post() == (429, "1")
        assert [(await task)[0] for task in first] == [202, 202]


@pytest.mark.azurite
@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-token"),
        pytest.param({"Authorization": "Bearer wrong"}, id="wrong-token"),
        pytest.param({"Authorization": "Basic YWNtZTphY21lLXRva2Vu"}, id="not-bearer"),
    ],
)
async def test_without_a_tenant_token_401(
    storage: StorageSettings, headers: dict[str, str]
) -> None:
    async with running_gateway(gateway_settings(storage, dispatcher=False)) as gateway:
        for method, path in [("POST", "/v1/reports"), ("GET", "/v1/batches/x")]:
            async with gateway.http.request(
                method, gateway.at(path), json=REPORT, headers=headers
            ) as response:
                assert response.status == 401
        async with gateway.http.get(gateway.at("/healthz")) as health:
            assert health.status == 200


@pytest.mark.azurite
async def test_past_the_depth_bound_503_with_retry_after(storage: StorageSettings) -> None:
    settings = gateway_settings(
        storage, max_interactive_depth=2, depth_cache_s=0.2, dispatcher=False
    )
    async with running_gateway(settings) as gateway:
        for _ in range(2):  # no renderer: both stay queued
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=REPORT, headers=auth()
            ) as response:
                assert response.status == 202
        await asyncio.sleep(0.3)  # the cached depth expires
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=REPORT, headers=auth()
        ) as response:
            assert response.status == 503
            assert response.headers["Retry-After"] == "5"
        async with gateway.http.post(  # the bulk lane has its own bound
            gateway.at("/v1/batches"), json=[{"template": "plain", "data": {}}], headers=auth()
        ) as batch:
            assert batch.status == 202


def test_the_token_bucket_refills_at_its_rate() -> None:
    bucket = quotas.TokenBucket(rate=2.0, capacity=2)
    assert [bucket.take(0.0), bucket.take(0.0)] == [0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.5) == 0.0
    assert bucket.take(10.0) == 0.0 and bucket.tokens == pytest.approx(1.0)  # capped at 2


def test_in_flight_is_released_per_tenant() -> None:
    limits = quotas.TenantQuotas(rate_per_s=100, burst=100, in_flight=1)
    assert limits.admit("a", 0.0) is None
    refusal = limits.admit("a", 0.0)
    assert refusal is not None and refusal.reason == "in_flight"
    assert limits.admit("b", 0.0) is None
    limits.release("a")
    assert limits.admit("a", 0.0) is None
