"""The ``finish`` options of the job contract: what a job may ask for, refused with a reason
before anything is printed, and carried over the wire unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reportfarm import contract, finishing

JOB = "job-1"


def job(finish: object, **fields: Any) -> dict[str, Any]:
    return {"job_id": JOB, "template": "plain", "data": {}, "finish": finish, **fields}


def decode(body: dict[str, Any]) -> contract.Job:
    return contract.Job.from_dict(body)


def test_every_option_round_trips_through_the_wire_format() -> None:
    body = job(
        {
            "metadata": {
                "title": "Rechnung 2026-0042",
                "author": "Acme GmbH",
                "subject": "Invoice",
                "keywords": ["invoice", "2026"],
                "language": "de-DE",
                "created": "2026-12-03T10:00:00+01:00",
            },
            "pdfa": "3b",
            "attachments": [
                {"blob": f"attachments/{JOB}/lines.csv", "mime": "text/csv", "relationship": "Data"}
            ],
            "facturx": {"xml_blob": f"attachments/{JOB}/factur-x.xml", "level": "en16931"},
            "sign": {"visible": True, "page": 0, "box": [10, 10, 210, 70], "reason": "Issued"},
            "watermark": {"text": "DRAFT"},
        },
        pdf={"tagged": True, "outline": True},
    )
    decoded = decode(body)
    assert decoded.pdf.tagged and decoded.pdf.outline
    assert decoded.finish is not None
    assert decoded.finish.archival == "3b"
    assert decoded.finish.sign is not None and decoded.finish.sign.box == (10, 10, 210, 70)
    again = contract.decode_message(contract.encode_message(decoded))
    assert again == decoded


def test_no_finish_is_not_sent_and_asks_for_nothing() -> None:
    plain = decode(job(None))
    assert "finish" not in plain.to_dict()
    assert decode(job({})).finish is None  # an empty finish is no finish
    assert finishing.Finish().empty and not finishing.Finish().after_print


def test_a_watermark_alone_needs_no_stage_after_the_print() -> None:
    marked = decode(job({"watermark": {"text": "COPY"}}))
    assert marked.finish is not None and not marked.finish.after_print


def test_files_make_the_document_pdfa_3b() -> None:
    attached = decode(job({"attachments": [{"blob": f"attachments/{JOB}/a.txt"}]}))
    assert attached.finish is not None and attached.finish.archival == "3b"


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("yes", "'finish' must be a JSON object"),
        ({"colour": True}, "unknown finish option(s): colour"),
        ({"pdfa": "1b"}, "finish.pdfa '1b' is not one of 2b, 3b"),
        ({"metadata": {"title": ""}}, "finish.metadata.title must be a non-empty string"),
        ({"metadata": {"title": "a\x00b"}}, "control character"),
        ({"metadata": {"language": "english please"}}, "is not BCP 47"),
        ({"metadata": {"created": "2026-12-03T10:00:00"}}, "with a time zone"),
        ({"metadata": {"created": "yesterday"}}, "not ISO 8601"),
        ({"metadata": {"keywords": "a, b"}}, "keywords must be a list"),
        ({"attachments": [{"blob": "attachments/other-job/x.csv"}]}, "not one of this job's"),
        ({"attachments": [{"blob": f"attachments/{JOB}/../x"}]}, "not one of this job's"),
        ({"attachments": [{"blob": "payloads/job-1.json"}]}, "not one of this job's"),
        (
            {"attachments": [{"blob": f"attachments/{JOB}/a", "mime": "text"}]},
            "is not a media type",
        ),
        (
            {"attachments": [{"blob": f"attachments/{JOB}/a", "relationship": "Owner"}]},
            "relationship must be one of",
        ),
        (
            {"attachments": [{"blob": f"attachments/{JOB}/a"}, {"blob": f"attachments/{JOB}/a"}]},
            "appears twice",
        ),
        (
            {"attachments": [{"blob": f"attachments/{JOB}/a"}] * 17},
            "more than 16 files",
        ),
        (
            {"pdfa": "2b", "attachments": [{"blob": f"attachments/{JOB}/a"}]},
            "attached files need PDF/A-3",
        ),
        ({"facturx": {"xml_blob": "attachments/x/factur-x.xml"}}, "not one of this job's files"),
        (
            {"facturx": {"xml_blob": f"attachments/{JOB}/f.xml", "level": "gold"}},
            "level must be one of",
        ),
        ({"sign": {"page": -2}}, "finish.sign.page"),
        ({"sign": {"box": [0, 0, 5, 5]}}, "at least 20 x 10 points"),
        ({"sign": {"box": [0, 0, 100]}}, "[x1, y1, x2, y2]"),
        ({"sign": {"visible": "yes"}}, "finish.sign.visible must be true or false"),
        ({"sign": {"key": "-----BEGIN"}}, "unknown finish.sign option(s): key"),
        ({"watermark": {"text": "x" * 61}}, "longer than 60"),
        ({"watermark": {"text": "DRAFT", "opacity": 0}}, "opacity must be a number"),
        ({"watermark": {"text": "DRAFT", "color": "red"}}, "#rrggbb"),
        ({"permissions": {"print": "no"}}, "finish.permissions.print must be true or false"),
        ({"permissions": {"print": False}, "pdfa": "2b"}, "PDF/A forbids encryption"),
        (
            {"permissions": {"print": False}, "attachments": [{"blob": f"attachments/{JOB}/a"}]},
            "attached files make the PDF PDF/A-3, and PDF/A forbids encryption",
        ),
        ({"metadata": {"title": "a\ud800b"}}, "U+D800: a lone surrogate"),
        ({"sign": {"reason": "\udfff"}}, "finish.sign.reason holds U+DFFF: a lone surrogate"),
        ({"metadata": {"title": "Bericht\ufffe"}}, "U+FFFE: a noncharacter"),
        ({"metadata": {"subject": "\uffff"}}, "U+FFFF: a noncharacter"),
        ({"metadata": {"keywords": ["a\ufdd0"]}}, "U+FDD0: a noncharacter"),
        ({"metadata": {"author": "\U0010fffe"}}, "U+10FFFE: a noncharacter"),
        ({"watermark": {"text": "x\ue000"}}, "U+E000: a private-use character"),
        ({"watermark": {"text": "x\u0378"}}, "U+0378: unassigned"),
        (
            {"watermark": {"text": "ENTWURF 🚫📄"}},
            "finish.watermark.text holds U+1F6AB NO ENTRY SIGN: an emoji",
        ),
        ({"sign": {"location": "Berlin \u2764\ufe0f"}}, "U+FE0F VARIATION SELECTOR-16"),
    ]
    + [
        (
            {"attachments": [{"blob": f"attachments/{JOB}/{name}"}]},
            "an invoice XML enters only through finish.facturx",
        )
        for name in ("factur-x.xml", "zugferd-invoice.xml", "xrechnung.xml", "Factur-X.xml")
    ],
)
def test_what_cannot_be_finished_is_refused_with_a_reason(finish: object, reason: str) -> None:
    with pytest.raises(contract.ContractError) as refused:
        decode(job(finish))
    assert reason in str(refused.value)


def test_a_media_type_may_carry_parameters() -> None:
    blob = f"attachments/{JOB}/lines.csv"
    body = {"attachments": [{"blob": blob, "mime": "text/csv; charset=utf-8"}]}
    decoded = decode(job(body))
    assert decoded.finish is not None
    assert decoded.finish.attachments[0].mime == "text/csv; charset=utf-8"


@given(st.text(min_size=1, max_size=40))
def test_any_text_is_accepted_or_refused_with_the_field_named(text: str) -> None:
    try:
        decode(job({"metadata": {"title": text}}))
    except contract.ContractError as refused:
        assert "finish.metadata.title" in str(refused)
    else:  # what is accepted can be written: UTF-8, no noncharacter, no surrogate
        text.encode("utf-8")
        assert not any(finishing.unwritable(char) for char in text)


def test_the_signing_key_can_never_come_with_a_job() -> None:
    fields = {field for field in finishing.Signature.__dataclass_fields__}
    assert not fields & {"key", "certificate", "password", "pkcs12"}


@given(st.dictionaries(st.text(max_size=12), st.none() | st.booleans() | st.text(max_size=8)))
def test_arbitrary_finish_objects_are_accepted_or_refused_cleanly(finish: dict[str, Any]) -> None:
    try:
        decode(job(finish))
    except contract.ContractError:
        pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_PARTS = st.sampled_from(
    ["metadata", "pdfa", "attachments", "facturx", "sign", "watermark", "permissions"]
)


@given(st.dictionaries(_PARTS, _JSON | st.dictionaries(st.text(max_size=10), _JSON), max_size=4))
def test_arbitrary_option_values_are_accepted_or_refused_cleanly(finish: dict[str, Any]) -> None:
    try:
        decoded = decode(job(finish))
    except contract.ContractError:
        return
    assert decoded == contract.decode_message(contract.encode_message(decoded))
