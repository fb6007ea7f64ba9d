"""A done hint that carries its answer (reportfarm.carrying): the gateway answers a waiting client
with the record and PDF the renderer stored and signed, and reads nothing back; anything that
does not check out is refused and the wait reads the stored record as before.

The gateway side runs on loopback against Azurite; the renderer's side (what it sends) is tested
with its hints object, the end to end in tests/gateway/test_sync_hints.py."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reportfarm_gateway import context, hinting, reports
from reportfarm_renderer.hints import DoneHints

from reportfarm import carrying, contract
from reportfarm.settings import StorageSettings

from .conftest import Gateway, gateway_settings, running_gateway

pytestmark = [pytest.mark.azurite]

JOB = "carried-1"
PDF = b"%PDF-1.7 the stored one\n%%EOF\n"


def _record(**changes: object) -> contract.ResultRecord:
    record = contract.ResultRecord(
        job_id=JOB,
        state="succeeded",
        output_blob=contract.default_output_blob(JOB),
        output_bytes=len(PDF),
        finished_at=1.0,
    )
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def _signed(
    key: bytes, record: contract.ResultRecord, pdf: bytes, *, job_id: str = JOB
) -> dict[str, str]:
    record_json = record.to_json()
    return {
        carrying.RECORD_HEADER: carrying.encode_record(record_json),
        carrying.SIGNATURE_HEADER: carrying.sign(key, job_id, record_json, pdf),
    }


async def _post(gateway: Gateway, body: bytes, headers: dict[str, str]) -> None:
    url = gateway.at(contract.DONE_PATH.format(job_id=JOB))
    async with gateway.http.post(url, data=body, headers=headers) as response:
        assert response.status == 204
        assert await response.read() == b""


def _count(gateway: Gateway, outcome: str) -> float:
    value = gateway.app[context.METRICS].registry.get_sample_value(
        "reportfarm_gateway_hints_total", {"kind": "done", "outcome": outcome}
    )
    return value or 0.0


CONNECTION = "AccountName=a;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net"
KEY = carrying.key_for(CONNECTION)
OTHER_KEY = carrying.key_for("AccountName=a;AccountKey=b3RoZXI=;EndpointSuffix=core.windows.net")


def _forgeries(key: bytes) -> list[tuple[str, bytes, dict[str, str]]]:
    assert OTHER_KEY is not None
    good = _signed(key, _record(), PDF)
    tampered = PDF.replace(b"stored", b"forged")
    return [
        ("another key", PDF, _signed(OTHER_KEY, _record(), PDF)),
        ("a tampered PDF", tampered, good),
        ("another job's record", PDF, _signed(key, _record(job_id="carried-2"), PDF)),
        ("signed for another job", PDF, _signed(key, _record(), PDF, job_id="carried-2")),
        ("a failed record", PDF, _signed(key, _record(state="failed"), PDF)),
        ("another blob", PDF, _signed(key, _record(output_blob="pdf/x/other.pdf"), PDF)),
        ("another size", PDF, _signed(key, _record(output_bytes=len(PDF) + 1), PDF)),
        ("not base64", PDF, {**good, carrying.RECORD_HEADER: "%%%"}),
        ("a non-ASCII signature", PDF, {**good, carrying.SIGNATURE_HEADER: "é" * 64}),
        ("a non-ASCII record", PDF, {**good, carrying.RECORD_HEADER: "é" * 64}),
        ("not a record", PDF, {**good, carrying.RECORD_HEADER: carrying.encode_record(b"[]")}),
        ("no signature", PDF, {carrying.RECORD_HEADER: good[carrying.RECORD_HEADER]}),
    ]


async def test_a_carried_answer_is_used_only_when_it_checks_out(storage: StorageSettings) -> None:
    async with running_gateway(gateway_settings(storage)) as gateway:
        waiters = gateway.app[hinting.WAITERS]
        key = carrying.key_for(storage.connection_string)
        assert key is not None and waiters.key == key  # Azurite's connection string has a key
        for name, body, headers in _forgeries(key):
            with waiters.waiting(JOB) as hint:
                await _post(gateway, body, headers)
                assert hint.is_set(), name  # it still wakes the wait: the record is read
                assert hint.carried is None, name
        refused = _count(gateway, "refused")
        assert refused == len(_forgeries(key)) - 1  # all but the unsigned one were read, refused
        assert waiters.refused == refused  # counted for the log, which warns only now and then
        with waiters.waiting(JOB) as hint, waiters.waiting(JOB) as other:
            await _post(gateway, PDF, _signed(key, _record(), PDF))
            for each in (hint, other):
                assert each.is_set() and each.carried is not None
                assert each.carried == (_record(), PDF)
        assert _count(gateway, "carried") == 1
        await _post(gateway, PDF, _signed(key, _record(), PDF))  # nobody waits: not even read
        assert _count(gateway, "nobody_waiting") == 1
        assert _count(gateway, "refused") == refused


async def test_a_carried_answer_is_the_waits_answer_and_a_refused_one_reads_the_store(
    storage: StorageSettings,
) -> None:
    """The wait returns the carried record without reading; with a refused one it reads the
    stored record (here: none stored, so the wait goes on to its end)."""
    async with running_gateway(gateway_settings(storage)) as gateway:
        client = gateway.app[context.CLIENT]
        waiters = gateway.app[hinting.WAITERS]
        assert waiters.key is not None
        with waiters.waiting(JOB) as hint:
            await _post(gateway, PDF, _signed(waiters.key, _record(), PDF))
            record = await reports.await_record(
                client, JOB, wait_s=5.0, poll_s=60.0, hint=hint, look_first=False
            )
            assert record == _record()  # nothing is stored: only the hint can have brought it
        with waiters.waiting(JOB) as hint:
            await _post(gateway, PDF, _signed(waiters.key, _record(state="failed"), PDF))
            record = await reports.await_record(
                client, JOB, wait_s=0.5, poll_s=0.1, hint=hint, look_first=False
            )
            assert record is None  # refused: the store was read, and holds no record


async def test_a_gateway_without_a_key_never_reads_what_a_hint_carries(
    storage: StorageSettings,
) -> None:
    """An account reached with Entra ID (no secret in a connection string) has no key."""
    assert carrying.key_for(None) is None
    assert carrying.key_for("BlobEndpoint=https://a.blob.core.windows.net/") is None
    # REPORTFARM_HINT_KEY is the key then, with or without a connection string, and wins
    given = carrying.key_for(None, hint_key="k" * 32)
    assert given is not None and given == carrying.key_for(CONNECTION, hint_key="k" * 32)
    assert given not in (KEY, carrying.key_for(None, hint_key="k" * 33))
    async with running_gateway(gateway_settings(storage)) as gateway:
        waiters = gateway.app[hinting.WAITERS]
        key = waiters.key
        assert key is not None
        waiters.key = None
        with waiters.waiting(JOB) as hint:
            await _post(gateway, PDF, _signed(key, _record(), PDF))
            assert hint.is_set() and hint.carried is None
        assert _count(gateway, "woke") == 1 and _count(gateway, "refused") == 0


def _job(**changes: object) -> contract.Job:
    job = contract.Job(
        job_id=contract.JobId(JOB), template="plain", data={}, notify="127.0.0.1:8000"
    )
    return dataclasses.replace(job, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("why", "hints", "record", "pdf"),
    [
        pytest.param("no key", lambda: DoneHints(), _record(), PDF, id="no-key"),
        pytest.param(
            "failed", lambda: DoneHints(key=KEY), _record(state="failed"), PDF, id="failed"
        ),
        pytest.param(
            "another blob",
            lambda: DoneHints(key=KEY),
            _record(output_blob="pdf/x/y.pdf"),
            PDF,
            id="another-blob",
        ),
        pytest.param("streamed", lambda: DoneHints(key=KEY), _record(), None, id="streamed"),
        pytest.param(
            "too big",
            lambda: DoneHints(key=KEY),
            _record(output_bytes=carrying.MAX_PDF_BYTES + 1),
            b"x" * (carrying.MAX_PDF_BYTES + 1),
            id="too-big",
        ),
        pytest.param(
            "record too big",
            lambda: DoneHints(key=KEY),
            _record(error="e" * carrying.MAX_RECORD_BYTES),
            PDF,
            id="record-too-big",
        ),
    ],
)
def test_the_renderer_carries_only_a_small_succeeded_default_pdf_it_can_sign(
    why: str,
    hints: Callable[[], DoneHints],
    record: contract.ResultRecord,
    pdf: bytes | None,
) -> None:
    assert hints()._carried(_job(), record, pdf) == (None, None), why


def test_the_renderer_signs_what_the_gateway_checks() -> None:
    assert KEY is not None
    body, headers = DoneHints(key=KEY)._carried(_job(), _record(), PDF)
    assert body == PDF and headers is not None
    waiters = hinting.Waiters(key=KEY)
    carried = waiters.carry(
        JOB,
        record_header=headers[carrying.RECORD_HEADER],
        signature=headers[carrying.SIGNATURE_HEADER],
        pdf=PDF,
    )
    assert carried == _record()


@settings(max_examples=200, deadline=None)
@given(
    job_id=st.text(min_size=1, max_size=40),
    record_json=st.binary(max_size=300),
    pdf=st.binary(max_size=300),
    flip=st.integers(min_value=0),
    part=st.sampled_from(["job_id", "record", "pdf"]),
)
def test_any_change_to_a_signed_hint_breaks_its_signature(
    job_id: str, record_json: bytes, pdf: bytes, flip: int, part: str
) -> None:
    assert KEY is not None
    signature = carrying.sign(KEY, job_id, record_json, pdf)
    assert carrying.verify(KEY, job_id, record_json, pdf, signature)
    assert carrying.decode_record(carrying.encode_record(record_json)) == record_json
    if part == "job_id":
        changed_id = job_id + "x"
        assert not carrying.verify(KEY, changed_id, record_json, pdf, signature)
        return
    original = record_json if part == "record" else pdf
    if not original:
        changed = b"\x00"
    else:
        at = flip % len(original)
        changed = original[:at] + bytes([original[at] ^ 0x01]) + original[at + 1 :]
    if part == "record":
        assert not carrying.verify(KEY, job_id, changed, pdf, signature)
        # Bytes moved between the record and the PDF change the signature too.
        moved = record_json + pdf[:1]
        if pdf:
            assert not carrying.verify(KEY, job_id, moved, pdf[1:], signature)
    else:
        assert not carrying.verify(KEY, job_id, record_json, changed, signature)


async def test_hints_in_flight_carry_at_most_their_bound_of_pdf_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gateway that does not answer must not make the renderer hold the PDFs it stored."""
    from reportfarm_renderer import hints as hinting_module

    monkeypatch.setattr(hinting_module, "MAX_CARRIED_BYTES", 2 * len(PDF))
    posted: list[bytes | None] = []
    release = asyncio.Event()
    done_hints = DoneHints(key=KEY)

    async def stalled(url: str, body: bytes | None, headers: dict[str, str] | None) -> None:
        posted.append(body)
        await release.wait()

    monkeypatch.setattr(done_hints, "_post", stalled)
    for _ in range(4):
        done_hints.send(_job(), record=_record(), pdf=PDF)
    await asyncio.sleep(0)
    assert posted == [PDF, PDF, None, None]  # two carry, then plain hints
    assert done_hints.carrying == 2 * len(PDF)
    release.set()
    await asyncio.gather(*done_hints._tasks)
    assert done_hints.carrying == 0
    done_hints.send(_job(), record=_record(), pdf=PDF)
    await asyncio.gather(*done_hints._tasks)
    assert posted[-1] == PDF  # room again


_RECORD_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "job_id": st.sampled_from([JOB, "carried-2", "", None]),
        "state": st.sampled_from(["succeeded", "failed", "running", None]),
        "output_blob": st.sampled_from(
            [contract.default_output_blob(JOB), "pdf/x/other.pdf", None, 3]
        ),
        "output_bytes": st.one_of(st.none(), st.integers(-2, 2 * len(PDF))),
        "finished_at": st.one_of(st.none(), st.floats(allow_nan=False)),
        "stages_ms": st.dictionaries(st.text(max_size=5), st.floats(allow_nan=False), max_size=3),
        "extra": st.text(max_size=10),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    fields=_RECORD_FIELDS,
    pdf=st.one_of(st.just(PDF), st.binary(max_size=64)),
    header=st.one_of(st.none(), st.text(max_size=40)),
    signature=st.one_of(st.none(), st.text(max_size=70)),
)
def test_whatever_a_hint_carries_only_a_signed_succeeded_answer_of_this_job_is_used(
    fields: dict[str, object], pdf: bytes, header: str | None, signature: str | None
) -> None:
    """Generated records (any fields, any values), PDFs and headers: what the gateway accepts
    is exactly a record signed with its key that names this job, succeeded, into its default
    blob, of the PDF's very size; any other header or signature is refused, never raised."""
    assert KEY is not None
    waiters = hinting.Waiters(key=KEY)
    record_json = json.dumps(fields).encode("utf-8")
    signed = carrying.sign(KEY, JOB, record_json, pdf)
    carried = waiters.carry(
        JOB, record_header=carrying.encode_record(record_json), signature=signed, pdf=pdf
    )
    expected = (
        fields.get("job_id") == JOB
        and fields.get("state") == "succeeded"
        and fields.get("output_blob") == contract.default_output_blob(JOB)
        and fields.get("output_bytes") == len(pdf)
    )
    assert (carried is not None) == expected, fields
    if carried is not None:
        assert carried.job_id == JOB and carried.output_bytes == len(pdf)
    # Forged or garbled headers: refused (None), never an exception.
    forged_header = header if header is not None else carrying.encode_record(record_json)
    forged_signature = signature if signature is not None else "0" * 64
    if forged_signature != signed:
        assert (
            waiters.carry(JOB, record_header=forged_header, signature=forged_signature, pdf=pdf)
            is None
        )
