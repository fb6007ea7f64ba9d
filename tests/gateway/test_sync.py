"""The synchronous path: POST /v1/reports waits up to wait_s for the PDF, else 202 + Location."""

from __future__ import annotations

from pathlib import Path

import pytest

from reportfarm import contract
from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from ..renderer.conftest import pdf_text, wait_for
from .conftest import auth, farm

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


async def test_a_report_ready_within_the_deadline_comes_back_as_the_pdf(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    async with farm(storage, template_dir) as gateway:
        body = {"template": "plain", "data": {"name": "王小明"}, "wait_s": 30}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth()
        ) as response:
            assert response.status == 200, await response.text()
            assert response.content_type == "application/pdf"
            pdf = await response.read()
            job_id = response.headers["X-Reportfarm-Job-Id"]
        # The id came with the PDF, and the record answers GET: no note was written for it.
        async with gateway.http.get(gateway.at(f"/v1/reports/{job_id}"), headers=auth()) as got:
            assert got.status == 200 and (await got.json())["state"] == "succeeded"
    assert "王小明" in pdf_text(pdf)
    record = await client.result(job_id)
    assert record is not None and record.tenant == "acme"
    assert await client.queues["interactive"].depth() == 0
    with pytest.raises(KeyError):
        await client.blobs.get(contract.job_note_blob(job_id))


async def test_past_the_deadline_it_answers_202_with_a_location_to_poll(
    storage: StorageSettings, template_dir: Path
) -> None:
    async with farm(storage, template_dir) as gateway:
        body = {"template": "slow", "data": {"name": "x", "busy_ms": 3000}, "wait_s": 0.5}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth()
        ) as response:
            assert response.status == 202, await response.text()
            location = response.headers["Location"]
            assert (await response.json())["state"] == "pending"
        assert location.startswith("/v1/reports/")
        # The note was written before the 202 gave the id: GET answers "pending", not 404.
        async with gateway.http.get(gateway.at(location), headers=auth()) as pending:
            assert pending.status == 200 and (await pending.json())["state"] == "pending"

        async def done() -> dict[str, object] | None:
            async with gateway.http.get(gateway.at(location), headers=auth()) as polled:
                assert polled.status == 200
                state = await polled.json()
            return state if state["state"] != "pending" else None

        state = await wait_for(done, timeout=60)
        assert state["state"] == "succeeded"
        async with gateway.http.get(gateway.at(f"{location}/pdf"), headers=auth()) as pdf:
            assert pdf.status == 200 and (await pdf.read()).startswith(b"%PDF")
        async with gateway.http.get(
            gateway.at(location), params={"format": "pdf"}, headers=auth()
        ) as pdf:
            assert pdf.status == 200 and pdf.content_type == "application/pdf"
        # Another tenant cannot see it, nor can anyone without a token.
        async with gateway.http.get(gateway.at(location), headers=auth("globex")) as other:
            assert other.status == 404
        async with gateway.http.get(gateway.at(location)) as anonymous:
            assert anonymous.status == 401
            assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")


async def test_a_job_that_fails_within_the_deadline_answers_422_with_the_reason(
    storage: StorageSettings, template_dir: Path
) -> None:
    async with farm(storage, template_dir) as gateway:
        body = {"template": "nosuch", "data": {}, "wait_s": 30}
        async with gateway.http.post(
            gateway.at("/v1/reports"), json=body, headers=auth()
        ) as response:
            assert response.status == 422
            state = await response.json()
    assert state["state"] == "failed" and "UnknownTemplateError" in state["error"]


async def test_the_same_idempotency_key_sends_nothing_new(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    async with farm(storage, template_dir) as gateway:
        body = {"template": "plain", "data": {"name": "a"}, "wait_s": 30}
        headers = {**auth(), "Idempotency-Key": "order-42"}
        ids = []
        for _ in range(2):
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=body, headers=headers
            ) as response:
                assert response.status == 200
                ids.append(response.headers["X-Reportfarm-Job-Id"])
        async with gateway.http.post(
            gateway.at("/v1/reports"),
            json=body,
            headers={**auth("globex"), "Idempotency-Key": "order-42"},
        ) as response:
            assert response.status == 200
            other = response.headers["X-Reportfarm-Job-Id"]
    assert ids[0] == ids[1] != other
    record = await client.result(ids[0])
    assert record is not None and record.attempts == 1
    assert await client.blobs.list(f"pdf/{ids[0]}") == [f"pdf/{ids[0]}.pdf"]
    assert contract.job_note_blob(ids[0]) in await client.blobs.list("jobs/")
