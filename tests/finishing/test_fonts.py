"""The faces the farm draws its own text in (stamp, watermark): every script of common business
documents covered, runs cut by face and direction, and what no face draws refused with the field
and the character named (before the print: the renderer calls this before Chromium prints)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reportfarm_renderer.finishing import fonts

from reportfarm.finishing import Finish, FinishError, Signature, Watermark

SAMPLES = {
    "latin-extended": "Łukasz Wójcik İşçi ř ő ą Ærø ß",
    "greek": "Ελληνικά",
    "cyrillic": "Кириллица",
    "arabic": "العربية",
    "hebrew": "עברית",
    "thai": "ภาษาไทย",
    "devanagari": "हिन्दी",
    "cjk": "中文 日本語 한국어",
    "symbols": "€ £ ¥ № ™ ✓ ☎",
}


@pytest.mark.parametrize("script", sorted(SAMPLES))
def test_every_script_of_common_business_documents_has_a_face(script: str) -> None:
    assert fonts.undrawable(SAMPLES[script]) is None


def test_the_faces_are_debians_noto_latin_first() -> None:
    faces = fonts.faces()
    assert faces[0].spec.file == "NotoSans-Regular.ttf"
    assert {face.spec.file for face in faces} == {spec.file for spec in fonts.FACES}


@pytest.mark.parametrize(
    ("char", "where"),
    [("\U00010900", "finish.watermark.text"), ("\U0001d11e", "finish.sign.reason")],
)
def test_a_character_no_face_draws_is_refused_naming_the_field_and_the_character(
    char: str, where: str
) -> None:
    finish = Finish(
        watermark=Watermark(text=f"DRAFT {char}" if "watermark" in where else "DRAFT"),
        sign=Signature(visible=True, reason=f"ok {char}" if "reason" in where else "ok"),
    )
    with pytest.raises(FinishError, match=rf"{where} holds U\+{ord(char):04X} "):
        fonts.refuse_undrawable(finish)


def test_an_invisible_signature_draws_nothing_so_its_reason_is_not_checked() -> None:
    fonts.refuse_undrawable(Finish(sign=Signature(visible=False, reason="\U00010900")))


def test_a_signers_name_no_face_draws_is_spelled_out_not_refused() -> None:
    assert fonts.drawable("Anna \U00010900 Ltd") == "Anna U+10900 Ltd"


def test_a_right_to_left_phrase_is_one_reversed_stretch_its_numbers_left_to_right() -> None:
    runs = fonts.runs("Reason: שלום 123 עולם — ok")
    texts = [(run.text, run.rtl) for run in runs]
    # shown left to right: the label, then the Hebrew phrase from its end, then the rest
    assert texts[0] == ("Reason: ", False)
    assert [text for text, _ in texts[1:-1]] == ["עולם", " ", "123", "שלום "][: len(texts) - 2]
    assert ("123", False) in texts and texts[-1][0].endswith("ok")
    assert {run.face.spec.file for run in runs if run.rtl} == {
        "NotoSansHebrew-Regular.ttf",
        "NotoSans-Regular.ttf",
    }


def test_a_number_after_right_to_left_text_goes_with_it() -> None:
    runs = fonts.runs("Location: ירושלים 2026 · Berlin")
    order = [run.text.strip() for run in runs]
    assert order[:3] == ["Location:", "2026", "ירושלים"]


@given(st.text(alphabet=st.sampled_from("".join(SAMPLES.values()) + " 0123456789,.-"), max_size=40))
def test_runs_keep_every_character_once_each_in_a_face_that_has_it(text: str) -> None:
    runs = fonts.runs(text)
    assert sorted("".join(run.text for run in runs)) == sorted(text)
    for run in runs:
        for char in run.text:
            assert fonts.silent(char) or ord(char) in run.face.cmap
