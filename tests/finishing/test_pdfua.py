"""PDF/UA-1 for tagged reports: every example (and the five-script letter) printed tagged by a real
Chromium, finished with metadata (title, language) and PDF/A-2b, passes veraPDF's PDF/UA-1
profile and stays PDF/A-2b; what the ``pdfua`` stage adds is there (identification in the XMP,
untagged drawing as artifacts, rows as wide as their table); an untagged PDF is left as it was."""

from __future__ import annotations

import io
from collections.abc import Mapping

import pikepdf
import pytest
from reportfarm_bench import statements
from reportfarm_renderer import finishing as stages
from reportfarm_renderer import templates
from reportfarm_renderer.finishing import pdfua

from reportfarm import contract, finishing

from . import invoices, verapdf
from .conftest import EXAMPLES, example_data
from .test_scripts import LETTER, print_all
from .test_stages import structure

pytestmark = [pytest.mark.chromium]

LANGUAGES = {"invoice": "fr-FR", "outlook": "zh-CN", "achievement": "zh-CN", "statement": "zh-CN"}
TAGGED = contract.PdfOptions(tagged=True, outline=True)


def documents() -> dict[str, str]:
    catalog = templates.TemplateCatalog.load(EXAMPLES / "templates")
    html = {
        "invoice": catalog.render("invoice", invoices.load()),
        "statement": catalog.render("statement", statements.statement(statements.lines_for(3))),
        "letter": LETTER,
    }
    for name in ("achievement", "outlook"):
        html[name] = catalog.render(name, example_data(name))
    return html


def finish(pdf: bytes, name: str, *, pdfa: bool = True) -> bytes:
    wanted = finishing.Finish(
        metadata=finishing.Metadata(title=f"Report {name}", language=LANGUAGES.get(name, "en")),
        pdfa="2b" if pdfa else None,
    )
    inputs = stages.Inputs(job_id="job-ua", finish=wanted)
    for stage_name, stage in stages.plan(wanted):
        pdf = stages.run_stage(stage_name, stage, pdf, inputs)
    return pdf


@pytest.fixture(scope="module")
def printed() -> dict[str, bytes]:
    return print_all(documents(), TAGGED)


@pytest.fixture(scope="module")
def finished(printed: Mapping[str, bytes]) -> dict[str, bytes]:
    return {name: finish(pdf, name) for name, pdf in printed.items()}


@verapdf.needs_verapdf
def test_every_tagged_example_passes_verapdf_pdf_ua_1(finished: Mapping[str, bytes]) -> None:
    verdicts = verapdf.validate(finished, "ua1")
    failing = [str(verdict) for verdict in verdicts.values() if not verdict.compliant]
    assert not failing, "\n".join(failing)
    assert set(verdicts) == {"invoice", "statement", "letter", "achievement", "outlook"}


@verapdf.needs_verapdf
def test_they_stay_pdfa_2b(finished: Mapping[str, bytes]) -> None:
    verdicts = verapdf.validate(finished, "2b")
    failing = [str(verdict) for verdict in verdicts.values() if not verdict.compliant]
    assert not failing, "\n".join(failing)


@verapdf.needs_verapdf
def test_without_the_pdfua_stage_verapdf_fails_them_on_what_it_adds(
    printed: Mapping[str, bytes],
) -> None:
    """The judge tells the two apart: Chromium's tags alone fail PDF/UA-1 on the identification
    and on untagged drawing (the rules the stage is for)."""
    plain = {}
    for name in ("invoice", "outlook"):
        wanted = finishing.Finish(pdfa="2b")
        inputs = stages.Inputs(job_id="job-ua", finish=wanted)
        pdf = printed[name]
        for stage_name, stage in stages.plan(wanted):
            pdf = stages.run_stage(stage_name, stage, pdf, inputs)
        plain[name] = pdf
    for verdict in verapdf.validate(plain, "ua1").values():
        rules = " ".join(verdict.failures)
        assert "5-1" in rules and "7.1-3" in rules, str(verdict)


def test_the_identification_artifacts_title_and_language_are_there(
    finished: Mapping[str, bytes],
) -> None:
    for name, pdf in finished.items():
        with pikepdf.open(io.BytesIO(pdf)) as document:
            meta = document.open_metadata()
            assert meta["pdfuaid:part"] == "1", name
            assert meta["pdfaid:part"] == "2", name
            assert document.Root.ViewerPreferences.DisplayDocTitle is True
            assert str(document.Root.Lang) == LANGUAGES.get(name, "en")
            operators = [
                (str(item.operator), item.operands)
                for item in pikepdf.parse_content_stream(document.pages[0])
                if not isinstance(item, pikepdf.ContentStreamInlineImage)
            ]
            if name != "letter":  # the examples draw backgrounds and rules; the letter has none
                assert ("BMC", [pikepdf.Name.Artifact]) in operators, name


def test_list_items_have_a_label_and_a_body(finished: Mapping[str, bytes]) -> None:
    counts = structure(finished["letter"])
    assert counts["LI"] == counts["Lbl"] == counts["LBody"] == 6
    assert counts["L"] == 1


def test_an_untagged_pdf_is_left_as_it_was() -> None:
    [pdf] = print_all({"plain": LETTER}, contract.PdfOptions()).values()
    inputs = stages.Inputs(job_id="job-ua", finish=finishing.Finish(metadata=finishing.Metadata()))
    assert pdfua.apply(pdf, inputs) is pdf


def test_a_row_without_its_empty_cells_is_filled_to_the_tables_width() -> None:
    document = pikepdf.new()

    def element(kind: str, *kids: pikepdf.Dictionary) -> pikepdf.Dictionary:
        made = document.make_indirect(
            pikepdf.Dictionary(Type=pikepdf.Name.StructElem, S=pikepdf.Name(kind))
        )
        made.K = pikepdf.Array(list(kids))
        return made

    header = element("/TR", *(element("/TH") for _ in range(3)))
    short = element("/TR", element("/TD"))
    table = element("/Table", header, short)
    pdfua.fill_rows(document, table)
    assert [str(cell.S) for cell in short.K] == ["/TD", "/TD", "/TD"]
    assert len(header.K) == 3
