"""The matrix the archival promise rests on: the examples and a letter in Latin-extended, Greek,
Cyrillic, Arabic and Hebrew, each printed by a real Chromium with a watermark and taken through
PDF/A-2b and a visible signature whose reason is in each script. veraPDF judges every PDF called
PDF/A, pyHanko validates every signature; and a document whose own text has a character no font
draws is refused by the pdfa stage (rule 6.2.11.8), where veraPDF agrees it is not PDF/A."""

from __future__ import annotations

import asyncio
import datetime
import io
from collections.abc import Mapping
from pathlib import Path

import pikepdf
import pikepdf.pdfa
import pytest
from reportfarm_renderer import browser, templates
from reportfarm_renderer import finishing as stages
from reportfarm_renderer.finishing import fonts, pdfacheck, signing, watermark

from reportfarm import contract, finishing

from . import invoices, verapdf
from .conftest import EXAMPLES, example_data
from .keys import Pki, validate

pytestmark = [pytest.mark.chromium]

JOB = "job-scripts-1"
MOMENT = datetime.datetime(2026, 12, 3, 9, 30, tzinfo=datetime.UTC)
TEXTS = {
    "latin-extended": "Zatwierdzone — Łódź, İstanbul, Şişli, Řevnice, Győr, Ærøskøbing",
    "greek": "Εγκρίθηκε — Θεσσαλονίκη",
    "cyrillic": "Утверждено — Санкт-Петербург",
    "arabic": "تمت الموافقة — القاهرة 2026",
    "hebrew": "אושר — ירושלים 2026",
}
LETTER = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Letter in five scripts</title><style>body{font-family:sans-serif}</style></head><body>
<h1>Statement — Łukasz Wójcik, İzmir, Cluj-Napoca (ș, ț), Brno (ř, ů), Győr (ő, ű)</h1>
<p lang="el">Αγαπητέ πελάτη, το υπόλοιπο του λογαριασμού σας είναι 1.234,56 €.</p>
<p lang="ru">Уважаемый клиент, остаток на вашем счёте составляет 1 234,56 €.</p>
<p lang="ar" dir="rtl">عزيزي العميل، رصيد حسابك هو 1234.56 يورو.</p>
<p lang="he" dir="rtl">לקוח יקר, היתרה בחשבונך היא 1,234.56 אירו.</p>
<ul><li>Zürich</li><li>Kraków</li><li>Αθήνα</li><li>Київ</li><li>عمّان</li><li>חיפה</li></ul>
</body></html>"""


def documents() -> dict[str, str]:
    catalog = templates.TemplateCatalog.load(EXAMPLES / "templates")
    html = {"invoice": catalog.render("invoice", invoices.load())}
    for name in ("achievement", "outlook"):
        html[name] = catalog.render(name, example_data(name))
    html["letter"] = LETTER
    return html


def print_all(pages: Mapping[str, str], options: contract.PdfOptions) -> dict[str, bytes]:
    async def run() -> dict[str, bytes]:
        async with browser.ChromiumLauncher() as launcher:
            worker = await launcher.new_worker()
            try:
                return {
                    name: await worker.render(html, options, javascript=False)
                    for name, html in pages.items()
                }
            finally:
                await worker.close()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def matrix(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Each document x each script: watermarked, PDF/A-2b, signed visibly (reason and location)."""
    signer = signing.Signer.load(pki.write(tmp_path_factory.mktemp("secret")))
    assert signer is not None
    pages = {}
    for document, html in documents().items():
        for script, text in TEXTS.items():
            mark = finishing.Watermark(text=text.split(" — ")[0][:60])
            pages[f"{document}/{script}"] = watermark.apply(html, mark)
    printed = print_all(pages, contract.PdfOptions())
    finished = {}
    for name, pdf in printed.items():
        text = TEXTS[name.split("/")[1]]
        finish = finishing.Finish(
            pdfa="2b",
            sign=finishing.Signature(visible=True, reason=text, location=text.split(" — ")[-1]),
            watermark=finishing.Watermark(text=text.split(" — ")[0][:60]),
        )
        finish.validate(JOB)
        fonts.refuse_undrawable(finish)  # as the job runner does before the print
        inputs = stages.Inputs(job_id=JOB, finish=finish, signer=signer, moment=MOMENT)
        for stage_name, stage in stages.plan(finish):
            pdf = stages.run_stage(stage_name, stage, pdf, inputs)
        finished[name] = pdf
    return finished


@verapdf.needs_verapdf
def test_every_document_in_every_script_is_pdfa_2b_by_verapdf(matrix: Mapping[str, bytes]) -> None:
    verdicts = verapdf.validate(matrix, "2b")
    failing = [str(verdict) for verdict in verdicts.values() if not verdict.compliant]
    assert not failing, "\n".join(failing)
    assert len(verdicts) == 4 * len(TEXTS)


def test_every_visible_signature_in_every_script_validates(
    matrix: Mapping[str, bytes], pki: Pki
) -> None:
    for name, pdf in matrix.items():
        status = validate(pdf, pki)
        assert status.intact and status.valid and status.trusted, name
        assert status.bottom_line, (name, status.pretty_print_details())


def test_the_stamp_says_the_reason_in_its_script(matrix: Mapping[str, bytes]) -> None:
    for name, pdf in matrix.items():
        with pikepdf.open(io.BytesIO(pdf)) as document:
            [widget] = document.Root.AcroForm.Fields
            spans = [
                str(operands[1].get("/ActualText", ""))
                for operands, operator in pikepdf.parse_content_stream(widget.AP.N)
                if str(operator) == "BDC" and isinstance(operands[1], pikepdf.Dictionary)
            ]
        words = TEXTS[name.split("/")[1]].split()
        assert all(any(word in span for span in spans) for word in words if word != "—"), name


UNDRAWABLE = "<html><head><title>t</title></head><body><p>Signed off 🚫📄</p></body></html>"


@pytest.fixture(scope="module")
def undrawable() -> bytes:
    """A document whose own text has emoji, which no font of the farm draws (.notdef boxes)."""
    return print_all({"emoji": UNDRAWABLE}, contract.PdfOptions())["emoji"]


def test_a_document_with_glyphs_no_font_has_is_refused_as_pdfa_naming_the_rule(
    undrawable: bytes,
) -> None:
    finish = finishing.Finish(pdfa="2b")
    inputs = stages.Inputs(job_id=JOB, finish=finish, moment=MOMENT)
    pdf = undrawable
    with pytest.raises(stages.FinishingFailed, match=r"PDF/A rule 6\.2\.11\.8 .*page 1") as failed:
        for name, stage in stages.plan(finish):
            pdf = stages.run_stage(name, stage, pdf, inputs)
    assert failed.value.stage == "pdfa"


@verapdf.needs_verapdf
def test_verapdf_agrees_the_refused_document_is_not_pdfa(undrawable: bytes) -> None:
    """The same document made PDF/A without the check: veraPDF fails it on the same rule."""
    with pikepdf.open(io.BytesIO(undrawable)) as document:
        pikepdf.pdfa.prepare(document, "2b")
        out = io.BytesIO()
        document.save(out, **pikepdf.pdfa.resolve_save_kwargs("2b"))
    [verdict] = verapdf.validate({"emoji": out.getvalue()}, "2b").values()
    assert not verdict.compliant
    assert "6.2.11.8" in " ".join(verdict.failures)


def test_the_check_names_encryption_a_missing_output_intent_and_a_font_not_embedded(
    tmp_path: Path,
) -> None:
    document = pikepdf.new()
    document.add_blank_page()
    with pytest.raises(finishing.FinishError, match=r"rule 6\.2\.3 \(output intent\)"):
        pdfacheck.check(document)
    document.Root.OutputIntents = pikepdf.Array(
        [pikepdf.Dictionary(DestOutputProfile=document.make_stream(b"icc"))]
    )
    page = document.pages[0]
    page.obj.Resources = pikepdf.Dictionary(
        Font=pikepdf.Dictionary(
            F1=pikepdf.Dictionary(
                Type=pikepdf.Name.Font,
                Subtype=pikepdf.Name.Type1,
                BaseFont=pikepdf.Name.Helvetica,
                FontDescriptor=pikepdf.Dictionary(FontName=pikepdf.Name.Helvetica),
            )
        )
    )
    page.obj.Contents = document.make_stream(b"BT /F1 12 Tf (Hello) Tj ET")
    with pytest.raises(finishing.FinishError, match=r"rule 6\.2\.11\.4\.1 .*Helvetica on page 1"):
        pdfacheck.check(document)
    encrypted = tmp_path / "locked.pdf"
    document.save(encrypted, encryption=pikepdf.Encryption(owner="o", user=""))
    with (
        pikepdf.open(encrypted) as locked,
        pytest.raises(finishing.FinishError, match=r"rule 6\.1\.3 \(no encryption\)"),
    ):
        pdfacheck.check(locked)


def _identity_font_document(content: bytes, *, in_form: bool) -> pikepdf.Pdf:
    """A page that shows ``content`` in an embedded Identity-H font, on the page or in a form."""
    document = pikepdf.new()
    document.add_blank_page()
    document.Root.OutputIntents = pikepdf.Array(
        [pikepdf.Dictionary(DestOutputProfile=document.make_stream(b"icc"))]
    )
    descendant = pikepdf.Dictionary(
        Type=pikepdf.Name.Font,
        Subtype=pikepdf.Name.CIDFontType2,
        BaseFont=pikepdf.Name("/AAAAAA+Face"),
        CIDToGIDMap=pikepdf.Name.Identity,
        FontDescriptor=pikepdf.Dictionary(FontFile2=document.make_stream(b"glyf")),
    )
    fonts = pikepdf.Dictionary(
        F1=pikepdf.Dictionary(
            Type=pikepdf.Name.Font,
            Subtype=pikepdf.Name.Type0,
            BaseFont=pikepdf.Name("/AAAAAA+Face"),
            Encoding=pikepdf.Name("/Identity-H"),
            DescendantFonts=pikepdf.Array([descendant]),
        )
    )
    page = document.pages[0]
    if in_form:
        form = document.make_stream(content)
        form.Type, form.Subtype = pikepdf.Name.XObject, pikepdf.Name.Form
        form.BBox = pikepdf.Array([0, 0, 100, 100])
        form.Resources = pikepdf.Dictionary(Font=fonts)
        page.obj.Resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(X1=form))
        page.obj.Contents = document.make_stream(b"q /X1 Do Q")
    else:
        page.obj.Resources = pikepdf.Dictionary(Font=fonts)
        page.obj.Contents = document.make_stream(content)
    return document


@pytest.mark.parametrize("in_form", [False, True], ids=["page", "form"])
@pytest.mark.parametrize(
    ("shown", "notdef"),
    [
        (b"<0029> Tj 5 0 Td <0044> Tj", False),
        (b"<00100003> Tj", False),  # zero digits, but no code 0: parsed, and passes
        (b"[<0029> -20 <0003>] TJ", False),
        (b"(\\000\\051) Tj", False),
        (b"<0000> Tj", True),
        (b"<00 0 0> Tj", True),  # whitespace inside a hex string
        (b"<000> Tj", True),  # an odd digit count ends with a 0
        (b"[<0029> -20 <00030000>] TJ", True),
        (b"(\\000\\000) Tj", True),
        (b"[(\\000\\051\\000\\000)] TJ", True),
        (b"0 0 Td (\\000\\000) '", True),
    ],
)
def test_the_check_finds_a_notdef_however_the_content_writes_it(
    shown: bytes, notdef: bool, in_form: bool
) -> None:
    """The cheap pass over the content's bytes only skips text that cannot show code 0."""
    document = _identity_font_document(b"BT /F1 12 Tf " + shown + b" ET", in_form=in_form)
    if notdef:
        with pytest.raises(finishing.FinishError, match=r"rule 6\.2\.11\.8 .*page 1"):
            pdfacheck.check(document)
    else:
        pdfacheck.check(document)
