"""The job contract: round trips, validation with clear errors, hostile input never crashes."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reportfarm import contract


def job(**fields: object) -> contract.Job:
    values: dict[str, object] = {"job_id": "job-1", "template": "achievement", "data": {"a": 1}}
    values.update(fields)
    return contract.Job(**values)  # type: ignore[arg-type]


def test_round_trip_through_the_wire_format() -> None:
    original = job(
        data={"name": "张三", "scores": [1, 2, 3]},
        pdf=contract.PdfOptions(format="Letter", landscape=True, margin_top="10mm"),
        batch_id="b1",
        item_index=3,
        tenant="acme",
    )
    decoded = contract.decode_message(contract.encode_message(original))
    assert decoded == original


def test_raw_json_text_is_accepted_too() -> None:
    text = json.dumps(
        {"job_id": "j2", "template": "outlook", "data": {"x": "李四"}}, ensure_ascii=False
    )
    decoded = contract.decode_message(text)
    assert decoded.data == {"x": "李四"}
    assert decoded.output == "pdf/j2.pdf"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"\xff\xfe not utf-8", "neither base64 nor JSON", id="binary"),
        pytest.param(base64.b64encode(b"\xff\xfe{"), "not UTF-8", id="base64-of-binary"),
        pytest.param(b"{not json", "not JSON", id="not-json"),
        pytest.param(b"[1, 2]", "JSON object", id="array"),
        pytest.param(b'{"template": "t", "data": {}}', "missing job field", id="no-id"),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": {}, "x": 1}', "unknown job field", id="extra"
        ),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": {}, "version": 9}',
            "unknown message version",
            id="version",
        ),
        pytest.param(b'{"job_id": "j", "template": "t"}', "exactly one of", id="no-data"),
        pytest.param(
            b'{"job_id": "j", "template": "../etc", "data": {}}', "template name", id="bad-template"
        ),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": []}', "JSON object", id="data-list"
        ),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": {}, "pdf": {"scale": 5}}',
            "scale",
            id="scale",
        ),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": {}, "pdf": {"format": "B9"}}',
            "format",
            id="format",
        ),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": {}, "output_blob": "../x"}',
            "blob name",
            id="blob",
        ),
        pytest.param(
            b'{"job_id": "j", "template": "t", "data": {}, "batch_id": "b"}',
            "go together",
            id="batch",
        ),
        pytest.param(b"x" * (70 * 1024), "64 KiB", id="too-large"),
    ],
)
def test_bad_messages_say_why(body: bytes, message: str) -> None:
    with pytest.raises(contract.ContractError, match=message):
        contract.decode_message(body)


def test_a_message_over_the_queue_limit_is_refused_with_advice() -> None:
    with pytest.raises(contract.ContractError, match="payload blob"):
        contract.encode_message(job(data={"text": "x" * 60_000}))
    assert not contract.fits_inline(job(data={"text": "x" * 60_000}))
    assert contract.fits_inline(job())


def test_batch_items_have_stable_ids() -> None:
    assert contract.batch_item_job_id("b1", 7) == contract.batch_item_job_id("b1", 7) == "b1-000007"


def test_header_footer_gets_blank_defaults() -> None:
    kwargs = contract.PdfOptions(
        display_header_footer=True, footer_template="<span class=pageNumber></span>"
    ).playwright_kwargs()
    assert kwargs["header_template"] == "<span></span>"
    assert "pageNumber" in kwargs["footer_template"]


def test_result_record_round_trip() -> None:
    record = contract.ResultRecord(job_id="j", state="succeeded", stages_ms={"render_html": 1.5})
    assert contract.ResultRecord.from_json(record.to_json()) == record


@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_crash_the_parser(raw: bytes) -> None:
    try:
        contract.decode_message(raw)
    except contract.ContractError:
        pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "job_id",
                "template",
                "data",
                "pdf",
                "version",
                "batch_id",
                "item_index",
                "lane",
                "data_blob",
            ]
        ),
        json_values,
    )
)
def test_arbitrary_json_objects_are_accepted_or_refused_cleanly(body: dict[str, object]) -> None:
    text = json.dumps(body)
    try:
        decoded = contract.decode_message(text)
    except contract.ContractError:
        return
    assert contract.decode_message(contract.encode_message(decoded)) == decoded


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=50), max_size=10))
def test_valid_jobs_round_trip(data: dict[str, str]) -> None:
    original = job(data=data)
    assert contract.decode_message(contract.encode_message(original)) == original
