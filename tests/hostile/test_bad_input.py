"""Bad input: the parser under hypothesis, then bad messages on a real queue to a real renderer.

The parser's properties that tests/contract/test_contract.py does not cover yet: ``peek_job_id``
(it names the result record of a message that failed to decode: it must never raise), every job
field and every PDF option with any JSON value, result records read back from any JSON, and
input nested deeper than Python's recursion limit.

On the real queue, every bad message ends in ``<queue>-poison`` with its reason (and, when it names
a job, a failed result record), and the worker never stops: its task runs, ``/readyz`` says 200
and a good job sent after them succeeds. ``FORMER_DEFECTS`` lists messages that once could not be
settled (they came back after every visibility timeout instead of reaching the poison queue),
with what broke: they stay here as regression tests.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import assume, given
from hypothesis import strategies as st

from reportfarm import azurite, contract
from reportfarm.client import Submission

from .conftest import Farm, farm, wait_for, write_templates

# -- the parser --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)
JOB_FIELDS = [field.name for field in dataclasses.fields(contract.Job) if field.name != "pdf"]
PDF_FIELDS = [field.name for field in dataclasses.fields(contract.PdfOptions)]
job_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,40}\Z")


@given(st.binary(max_size=512) | st.text(max_size=512).map(str.encode))
def test_peek_job_id_never_raises_and_names_only_valid_ids(raw: bytes) -> None:
    found = contract.peek_job_id(raw)
    if found is not None:  # a name fit for a result record
        contract.Job(job_id=contract.JobId(found), template="t", data={}).validate()


@given(job_ids, st.dictionaries(st.sampled_from(JOB_FIELDS), json_values, max_size=4))
def test_peek_job_id_names_the_job_of_any_message_that_carries_a_valid_id(
    job_id: str, others: dict[str, Any]
) -> None:
    body = {**others, "job_id": job_id}
    for wire in (json.dumps(body), base64.b64encode(json.dumps(body).encode()).decode()):
        assert contract.peek_job_id(wire) == job_id


@given(
    st.fixed_dictionaries(
        {"job_id": job_ids, "template": st.sampled_from(["plain", "achievement"])},
        optional={name: json_values for name in JOB_FIELDS if name not in ("job_id", "template")},
    )
)
def test_every_job_field_with_any_json_value_is_accepted_or_refused_cleanly(
    body: dict[str, Any],
) -> None:
    body.setdefault("data", {})
    try:
        decoded = contract.decode_message(json.dumps(body))
    except contract.ContractError:
        return
    assert contract.decode_message(contract.encode_message(decoded)) == decoded


@given(
    st.dictionaries(st.sampled_from(PDF_FIELDS), json_values, min_size=1, max_size=4),
)
def test_pdf_options_of_any_json_value_are_accepted_or_refused_cleanly(
    pdf: dict[str, Any],
) -> None:
    body = {"job_id": "j", "template": "plain", "data": {}, "pdf": pdf}
    try:
        decoded = contract.decode_message(json.dumps(body))
    except contract.ContractError:
        return
    assert contract.decode_message(contract.encode_message(decoded)) == decoded


records = st.builds(
    contract.ResultRecord,
    job_id=job_ids,
    state=st.sampled_from(["succeeded", "failed"]),
    template=st.none() | st.text(max_size=20),
    attempts=st.integers(min_value=1, max_value=100),
    stages_ms=st.dictionaries(st.text(max_size=12), st.floats(0, 1e6), max_size=4),
    output_blob=st.none() | st.text(max_size=40),
    output_bytes=st.none() | st.integers(min_value=0),
    error=st.none() | st.text(max_size=200),
    error_kind=st.none() | st.sampled_from(["permanent", "exhausted"]),
    tenant=st.none() | st.text(max_size=10),
    submitted_at=st.none() | st.floats(0, 2e9),
    finished_at=st.none() | st.floats(0, 2e9),
)


@given(records, st.dictionaries(st.text(max_size=10), json_values, max_size=3))
def test_result_records_round_trip_and_ignore_fields_they_do_not_know(
    record: contract.ResultRecord, extra: dict[str, Any]
) -> None:
    body = json.loads(record.to_json())
    assume(not set(extra) & set(body))
    assert contract.ResultRecord.from_json(json.dumps({**body, **extra})) == record


@given(json_values)
def test_any_json_in_a_result_blob_reads_as_a_record_or_a_clean_error(value: Any) -> None:
    try:
        contract.ResultRecord.from_json(json.dumps(value))
    except ValueError:  # ContractError is one
        pass


DEEP = [
    pytest.param(b"[" * 50_000, id="array"),
    pytest.param(
        b'{"job_id": "deep", "template": "t", "data": ' + b'{"a": ' * 8_000 + b"1" + b"}" * 8_001,
        id="object",
    ),
    pytest.param(base64.b64encode(b"[" * 40_000), id="base64-array"),
]


@pytest.mark.parametrize("raw", DEEP)
def test_deeply_nested_messages_are_refused_cleanly(raw: bytes) -> None:
    assert len(raw) < contract.MAX_QUEUE_MESSAGE_BYTES  # the queue takes it
    assert contract.peek_job_id(raw) in (None, "deep")
    with pytest.raises(contract.ContractError):
        contract.decode_message(raw)


# -- the real queue ----------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bad(
    azurite_server: azurite.Azurite, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Farm]:
    templates = write_templates(
        tmp_path_factory.mktemp("bad") / "templates", {"plain.html": "<p>{{ name }}</p>"}
    )
    async with farm(azurite_server, templates, visibility_timeout=20) as started:
        yield started


def raw_json(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def wire(body: dict[str, Any]) -> str:
    return base64.b64encode(raw_json(body).encode()).decode()


def bad_messages() -> dict[str, tuple[str, str | None, str]]:
    """id -> (message text, job id it names or None, what its poison reason says)."""
    plain = {"template": "plain", "data": {"name": "x"}}
    return {
        "not-json": ("this is not json", None, "neither base64 nor JSON"),
        "base64-not-json": (base64.b64encode(b"hello").decode(), None, "not JSON"),
        "not-utf8": (base64.b64encode(b"\xff\xfe\xfd{").decode(), None, "not UTF-8"),
        "json-array": ("[1, 2, 3]", None, "a job message is a JSON object"),
        "unknown-version": (
            wire({**plain, "job_id": "v-2", "version": 2}),
            "v-2",
            "unknown message version 2",
        ),
        "no-job-id": (wire(plain), None, "missing job field(s): job_id"),
        "no-template": (
            raw_json({"job_id": "no-template", "data": {}}),
            "no-template",
            "missing job field(s): template",
        ),
        "no-data": (
            wire({"job_id": "no-data", "template": "plain"}),
            "no-data",
            "exactly one of 'data' and 'data_blob'",
        ),
        "unknown-field": (
            wire({**plain, "job_id": "extra", "priority": 9}),
            "extra",
            "unknown job field(s): priority",
        ),
        "path-in-template": (
            wire({"job_id": "path", "template": "../etc/passwd", "data": {}}),
            "path",
            "template name '../etc/passwd'",
        ),
        "unknown-template": (
            wire({"job_id": "nosuch", "template": "nosuch", "data": {}}),
            "nosuch",
            "UnknownTemplateError: unknown template 'nosuch'",
        ),
        "missing-payload": (
            wire({"job_id": "gone", "template": "plain", "data_blob": "payloads/gone.json"}),
            "gone",
            "payload blob 'payloads/gone.json' does not exist",
        ),
        "data-breaks-template": (
            wire({"job_id": "broken", "template": "plain", "data": {}}),
            "broken",
            "TemplateRenderError",
        ),
    }


@pytest.mark.chromium
@pytest.mark.azurite
@pytest.mark.asyncio(loop_scope="module")
async def test_bad_messages_are_poisoned_with_their_reason_and_the_worker_serves_on(
    bad: Farm,
) -> None:
    messages = bad_messages()
    for text, _, _ in messages.values():
        await bad.queue.send(text)
    good = await bad.client.submit(Submission(template="plain", data={"name": "after the bad"}))
    poison = await bad.wait_poison(len(messages), timeout=120)
    by_original = {item["original"]: item for item in poison}
    for case, (text, job_id, reason) in messages.items():
        item = by_original.get(text)
        assert item is not None, f"{case} is not in the poison queue"
        assert reason in item["reason"], (case, item["reason"])
        assert item["job_id"] == job_id, case
        assert item["attempts"] == 1, case  # permanent: poisoned at the first delivery
        if job_id is not None:
            record = await bad.client.result(job_id)
            assert record is not None and record.state == "failed", case
            assert record.error == item["reason"] and record.error_kind == "permanent", case
    results = await bad.client.wait([good], timeout_s=120)
    assert results[good] is not None and results[good].state == "succeeded"
    await bad.serving()
    assert await bad.queue.depth() == 0


def unsettled_messages() -> dict[str, str]:
    plain = {"template": "plain", "data": {"name": "x"}}
    return {
        # Exactly the 64 KiB the queue takes: its poison message (reason + original) is larger.
        "64-kib-of-junk": "A" * contract.MAX_QUEUE_MESSAGE_BYTES,
        "64-kib-unknown-template": raw_json(
            {
                "job_id": "big",
                "template": "nosuch",
                "data": {"pad": "x" * (contract.MAX_QUEUE_MESSAGE_BYTES - 80)},
            }
        ),
        "nested-1000-deep": "[" * 1000 + "]" * 1000,
        "pdf-scale-text": wire({**plain, "job_id": "scale", "pdf": {"scale": "big"}}),
        "submitted-at-text": wire({**plain, "job_id": "when", "submitted_at": "yesterday"}),
    }


UNSETTLED_SENT: dict[str, float] = {}
REASONS = {  # what each one's poison reason says now
    "64-kib-of-junk": "not JSON",
    "64-kib-unknown-template": "UnknownTemplateError",
    "nested-1000-deep": "nested too deep",
    "pdf-scale-text": "pdf.scale",
    "submitted-at-text": "submitted_at",
}
FORMER_DEFECTS = {  # what each case once broke (fixed; kept as regression tests)
    "64-kib-of-junk": "JobQueue.poison (reportfarm/storage/queueing.py) sends the whole original "
    "inside the poison message: a message near the queue's 64 KiB limit makes a poison "
    "message over it, Azure refuses it, the job is never settled (fix: truncate the original "
    "in contract.poison_message, or keep it in a blob, so a poison message always fits)",
    "64-kib-unknown-template": "same as 64-kib-of-junk, for a valid job near 64 KiB: its failed "
    "result record is written, then poisoning fails, again on every delivery",
    "nested-1000-deep": "contract.decode_message and peek_job_id raise RecursionError, which "
    "JobRunner.run does not catch",
    "pdf-scale-text": "contract.PdfOptions.validate raises TypeError on a text scale, which "
    "JobRunner.run does not catch",
    "submitted-at-text": "contract.Job.validate does not check submitted_at; JobRunner.run "
    "subtracts it from time.time() and raises TypeError before any handling",
}


@pytest.mark.chromium
@pytest.mark.azurite
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    "case",
    [pytest.param(case, id=case) for case in FORMER_DEFECTS],
)
async def test_messages_that_once_stuck_are_poisoned_with_their_reason(
    bad: Farm, case: str
) -> None:
    loop = asyncio.get_running_loop()
    if not UNSETTLED_SENT:  # all at once, one shared deadline: the cases wait together
        for text in unsettled_messages().values():
            await bad.queue.send(text)
        UNSETTLED_SENT["deadline"] = loop.time() + 25
    text = unsettled_messages()[case]

    def mine(item: dict[str, Any]) -> bool:
        """This message, its original kept whole or cut short (a fix may truncate it)."""
        original = str(item.get("original") or "")
        return original == text or (len(original) >= 1000 and text.startswith(original[:1000]))

    async def poisoned() -> dict[str, Any] | None:
        found = [item for item in await bad.poison() if mine(item)]
        return found[0] if found else None

    try:
        left = max(1.0, UNSETTLED_SENT["deadline"] - loop.time())
        item = await wait_for(poisoned, timeout=left)
    finally:
        assert not bad.worker_task().done(), "the queue worker's task ended"
    assert REASONS[case] in item["reason"], item["reason"]
    if item["original"] != text:  # cut short in the message: kept whole in a blob
        assert (await bad.client.blobs.get(item["original_blob"])).decode() == text


def test_the_client_encodes_whatever_the_renderer_decodes() -> None:
    data = '{"c": [' * 250 + "]}" * 250
    job = contract.decode_message(f'{{"job_id": "j", "template": "t", "data": {data}}}')
    assert contract.fits_inline(job)
    assert contract.decode_message(contract.encode_message(job)) == job
