"""The synchronous path's hints: the gateway wakes an idle renderer, the renderer tells the waiting
gateway replica its job is done. Real Chromium, Azurite, renderer and gateway on loopback.

The hints only shorten waits: with them a report comes back long before the gateway's polling
would have read its record; without them (lost, refused, forged) nothing is lost."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from reportfarm_gateway import context, hinting, prefetching
from reportfarm_renderer import service

from reportfarm import contract
from reportfarm.settings import StorageSettings

from ..renderer.conftest import pdf_text, renderer_settings, wait_for
from .conftest import auth, free_port, gateway_on_port, hinting_gateway

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]

SLOW_POLL_S = 60.0
"""The gateway's first look at the record after this (and the renderer's longest idle pause):
without the hints a report could not come back before it."""


async def _until(check: Callable[[], bool], *, timeout: float, every: float = 0.2) -> None:
    async def checked() -> bool:
        return check()

    await wait_for(checked, timeout=timeout, every=every)


async def test_hints_bring_the_pdf_back_long_before_polling_would(
    storage: StorageSettings, template_dir: Path
) -> None:
    settings = renderer_settings(storage, template_dir, poll_max_s=SLOW_POLL_S)
    async with service.running(settings) as renderer:
        worker = renderer.worker
        await _until(lambda: worker._pacing.idle_s >= 0.4, timeout=30, every=0.05)
        async with hinting_gateway(  # wakes only (the hand-off: test_handoff.py)
            storage, renderer_port=renderer.port, handoff_s=0, poll_s=SLOW_POLL_S
        ) as gateway:
            client = gateway.app[context.CLIENT]
            reads: list[str] = []
            read = client.blobs.get

            async def counted(name: str) -> bytes:
                reads.append(name)
                return await read(name)

            client.blobs.get = counted  # type: ignore[method-assign]
            body = {"template": "plain", "data": {"name": "王小明"}, "wait_s": 2 * SLOW_POLL_S}
            started = time.monotonic()
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=body, headers=auth()
            ) as response:
                assert response.status == 200, await response.text()
                pdf = await response.read()
            took = time.monotonic() - started
            waker = gateway.app[hinting.WAKER]
            assert waker.sent >= 1 and waker.failed == 0
            assert len(gateway.app[hinting.WAITERS]) == 0  # nobody left registered
            registry = gateway.app[context.METRICS].registry
            # The hint carried the stored record and PDF (signed with the key both derive from
            # the account's connection string): the wait read nothing back.
            heard = registry.get_sample_value(
                "reportfarm_gateway_hints_total", {"kind": "done", "outcome": "carried"}
            )
            assert heard == 1
            assert reads == []  # neither the record nor the PDF was read back
            stored_at = gateway.at(response.headers["Content-Location"])
            async with gateway.http.get(stored_at, headers=auth()) as stored:
                assert stored.status == 200
                assert await stored.read() == pdf  # what the hint carried is what is stored
    assert "王小明" in pdf_text(pdf)
    assert worker.wakes >= 1
    woken = renderer.parts.metrics.registry.get_sample_value(
        "reportfarm_hints_total", {"kind": "wake", "outcome": "idle"}
    )
    assert woken is not None and woken >= 1
    # Generous: a report takes well under a second here; polling would have taken a minute.
    assert took < SLOW_POLL_S / 2, took


async def test_lost_hints_cost_only_the_polling_they_would_have_saved(
    storage: StorageSettings, template_dir: Path
) -> None:
    nobody = free_port()  # nothing listens there: every hint is lost
    async with service.running(renderer_settings(storage, template_dir)) as renderer:
        async with gateway_on_port(
            storage,
            port=free_port(),
            wake=(f"127.0.0.1:{nobody}",),
            notify_address=f"127.0.0.1:{nobody}",
        ) as gateway:
            body = {"template": "plain", "data": {"name": "x"}, "wait_s": 60}
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=body, headers=auth()
            ) as response:
                assert response.status == 200, await response.text()
                assert (await response.read()).startswith(b"%PDF")
            waker = gateway.app[hinting.WAKER]
            await _until(lambda: waker.failed >= 1, timeout=10)
            assert waker.sent == 0
            assert (waker.handed, waker.revealed) == (0, 1)  # the offer was lost: on the lane
        await _until(lambda: renderer.worker.runner.hints.failed >= 1, timeout=10)


async def test_a_forged_done_hint_answers_nothing_and_changes_nothing(
    storage: StorageSettings,
) -> None:
    async with gateway_on_port(storage, port=free_port()) as gateway:
        for job_id in ("nosuch", "acme-123", "x" * 500):
            async with gateway.http.post(
                gateway.at(contract.DONE_PATH.format(job_id=job_id))
            ) as response:
                assert response.status == 204
                assert await response.read() == b""
        assert len(gateway.app[hinting.WAITERS]) == 0
        async with gateway.http.get(gateway.at("/v1/reports/nosuch"), headers=auth()) as state:
            assert state.status == 404


async def test_the_pdf_read_with_its_record_is_used_only_when_the_record_names_it(
    storage: StorageSettings,
) -> None:
    """On a done hint the gateway reads the PDF together with the record (one round trip less);
    the record stays the answer: bytes it does not name are dropped, none found is a None."""
    async with gateway_on_port(storage, port=free_port()) as gateway:
        client = gateway.app[context.CLIENT]
        blob = contract.default_output_blob("prefetched")
        await client.blobs.put(blob, b"%PDF-1.7 stored", content_type="application/pdf")

        def record(state: contract.JobState, output: str | None) -> contract.ResultRecord:
            return contract.ResultRecord(
                job_id="prefetched", state=state, finished_at=0.0, output_blob=output
            )

        cases = [
            (record("succeeded", blob), b"%PDF-1.7 stored"),
            (record("succeeded", "pdf/prefetched/other.pdf"), None),  # not the blob it read
            (record("failed", blob), None),
            (None, None),  # no record (a forged or early hint)
        ]
        for found, expected in cases:
            prefetch = prefetching.PdfPrefetch(client, blob=blob)
            assert await prefetch.take(found) is None  # never started: nothing read
            prefetch.start()
            prefetch.start()  # once
            assert await prefetch.take(found) == expected
            await prefetch.drop()
        missing = prefetching.PdfPrefetch(client, blob=contract.default_output_blob("nosuch"))
        missing.start()
        gone = record("succeeded", missing.blob)
        assert await missing.take(gone) is None  # not stored: the usual read decides


@pytest.mark.parametrize(
    ("address", "valid"),
    [
        pytest.param("10.1.2.3:8000", True, id="ipv4"),
        pytest.param("[fd00::1]:8000", True, id="ipv6"),
        pytest.param("fd00::1:8000", False, id="ipv6-without-brackets"),
        pytest.param("gateway:8000", False, id="a-name"),
        pytest.param("10.1.2.3", False, id="no-port"),
        pytest.param("10.1.2.3:0", False, id="port-0"),
        pytest.param("10.1.2.3:65536", False, id="port-too-big"),
        pytest.param("10.1.2.3:80/x", False, id="a-path"),
        pytest.param("http://10.1.2.3:80", False, id="a-url"),
    ],
)
def test_a_job_names_its_gateway_by_ip_and_port_only(address: str, valid: bool) -> None:
    job = contract.Job(job_id=contract.JobId("j1"), template="plain", data={}, notify=address)
    if valid:
        decoded = contract.decode_message(contract.encode_message(job))
        assert decoded.notify == address
        assert contract.done_url(decoded) == f"http://{address}/internal/v1/done/j1"
    else:
        with pytest.raises(contract.ContractError, match="notify"):
            contract.encode_message(job)
