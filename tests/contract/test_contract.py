"""The job contract: round trips, validation with clear errors, hostile input never crashes."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reportfarm import contract, margins


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
            "outside this job's names",
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


# -- a job reads only its own payload and writes only its own outputs ------------------------------

VICTIM = "victim"


@pytest.mark.parametrize(
    "output_blob",
    [
        pytest.param(contract.result_blob(VICTIM), id="victim-result"),
        pytest.param(contract.default_output_blob(VICTIM), id="victim-pdf"),
        pytest.param(contract.named_output_blob(VICTIM, "a.pdf"), id="victim-named-pdf"),
        pytest.param(contract.payload_blob(VICTIM), id="victim-payload"),
        pytest.param(contract.batch_manifest_blob("b"), id="batch-manifest"),
        pytest.param(contract.job_note_blob(VICTIM), id="gateway-note"),
        pytest.param(contract.poison_original_blob("m"), id="poison-original"),
        pytest.param("webhooks/victim/1.json", id="webhook-log"),
        pytest.param("pdf/attacker/../victim.pdf", id="dot-dot"),
        pytest.param("pdf/attacker/", id="empty-name"),
        pytest.param("pdf/attacker/a/b.pdf", id="sub-folder"),
        pytest.param("pdf/attacker/.hidden", id="dot-name"),
        pytest.param("pdf/attacker.pdf/x", id="default-as-folder"),
        pytest.param("report.pdf", id="anywhere"),
    ],
)
def test_an_output_outside_the_jobs_own_names_is_refused(output_blob: str) -> None:
    job = contract.Job(
        job_id=contract.JobId("attacker"), template="t", data={}, output_blob=output_blob
    )
    with pytest.raises(contract.ContractError, match="a job writes only its own outputs"):
        contract.encode_message(job)
    raw = json.dumps(
        {"job_id": "attacker", "template": "t", "data": {}, "output_blob": output_blob}
    )
    with pytest.raises(contract.ContractError, match="a job writes only its own outputs"):
        contract.decode_message(raw)


@pytest.mark.parametrize(
    "data_blob",
    [
        contract.payload_blob(VICTIM),
        contract.result_blob("attacker"),
        "payloads/attacker.json.bak",
        "payloads/../payloads/attacker.json",
    ],
)
def test_a_payload_other_than_the_jobs_own_is_refused(data_blob: str) -> None:
    raw = json.dumps({"job_id": "attacker", "template": "t", "data_blob": data_blob})
    with pytest.raises(contract.ContractError, match="a job reads only its own payload"):
        contract.decode_message(raw)


def test_a_job_names_its_own_outputs_and_payload() -> None:
    for output in (None, "pdf/attacker.pdf", "pdf/attacker/q3.report.pdf"):
        job = contract.Job(
            job_id=contract.JobId("attacker"),
            template="t",
            data_blob=contract.payload_blob("attacker"),
            output_blob=output,
        )
        assert contract.decode_message(contract.encode_message(job)) == job
    assert contract.named_output_blob("attacker", "q3.pdf") == "pdf/attacker/q3.pdf"


# -- header and footer templates use inline resources only ------------------------------------------


@pytest.mark.parametrize(
    ("template", "found"),
    [
        pytest.param('<span class="pageNumber"></span>', [], id="page-number"),
        pytest.param('<img src="data:image/png;base64,AA">', [], id="data-image"),
        pytest.param("<style>@import 'data:text/css,p{}';</style>", [], id="data-import"),
        pytest.param('<a href="#top">top</a>', [], id="fragment"),
        pytest.param("<style>/* url(http://x/a) */ p {}</style>", [], id="css-comment"),
        pytest.param(
            '<link rel="stylesheet" href="http://x/a.css">', ["http://x/a.css"], id="link"
        ),
        pytest.param('<img src="//x/a.png">', ["//x/a.png"], id="scheme-relative"),
        pytest.param('<img srcset="a.png 1x, data:x 2x">', ["a.png 1x"], id="srcset"),
        pytest.param('<p style="background: u\\72l(http://x/b)">', ["http://x/b"], id="escape"),
        pytest.param("<style>@import 'http://x/c.css';</style>", ["http://x/c.css"], id="import"),
        pytest.param('<svg><image xlink:href="http://x/d"/></svg>', ["http://x/d"], id="svg"),
        pytest.param('<iframe srcdoc="&lt;img src=http://x/e&gt;">', ["http://x/e"], id="srcdoc"),
        pytest.param("<base href=http://x/>", ["<base>", "http://x/"], id="base"),
        pytest.param(
            '<meta http-equiv="refresh" content="0;url=http://x/">',
            ["<meta http-equiv=refresh>"],
            id="refresh",
        ),
    ],
)
def test_margin_templates_may_only_reference_inline_resources(
    template: str, found: list[str]
) -> None:
    assert margins.external_references(template) == found
    options = contract.PdfOptions(display_header_footer=True, footer_template=template)
    if found:
        with pytest.raises(contract.ContractError, match="may only use inline data: resources"):
            options.validate()
    else:
        options.validate()
