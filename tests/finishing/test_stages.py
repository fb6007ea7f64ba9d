"""The archival stages (metadata, facturx, attach, pdfa) on PDFs a real Chromium printed, run as
the job runner runs them (:func:`finishing.plan` and :func:`finishing.run_stage`), judged by
veraPDF and by the factur-x library, never by our own reading of PDF/A."""

from __future__ import annotations

import collections
import datetime
import io
from collections.abc import Callable, Mapping

import facturx
import pikepdf
import pypdf
import pytest
from reportfarm_renderer import finishing as stages

from reportfarm import finishing

from . import mustang, rules, verapdf

pytestmark = [pytest.mark.chromium]

JOB = "job-archival-1"
MOMENT = datetime.datetime(2026, 12, 3, 9, 30, tzinfo=datetime.UTC)
HTML_TITLE = "Facture FA-2026-0142 · Atelier Lumen SAS"
XML_BLOB = finishing.attachment_blob(JOB, finishing.FACTURX_XML_NAME)
FX = "{urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#}"


def run(pdf: bytes, finish: finishing.Finish, files: Mapping[str, bytes] | None = None) -> bytes:
    """``pdf`` through the stages ``finish`` asks for, as the job runner runs them."""
    finish.validate(JOB)
    inputs = stages.Inputs(
        job_id=JOB,
        finish=finish,
        files=dict(files or {}),
        moment=MOMENT,
        business_rules=rules.xslt(),
    )
    for name, stage in stages.plan(finish):
        pdf = stages.run_stage(name, stage, pdf, inputs)
    return pdf


def assert_compliant(pdfs: Mapping[str, bytes], flavour: str) -> None:
    verdicts = verapdf.validate(pdfs, flavour)
    failing = [str(verdict) for verdict in verdicts.values() if not verdict.compliant]
    assert not failing, "\n".join(failing)


def xmp(pdf: bytes) -> dict[str, object]:
    with pikepdf.open(io.BytesIO(pdf)) as document:
        return dict(document.open_metadata())


def structure(pdf: bytes) -> collections.Counter[str]:
    """How many structure elements of each type (H1, Table, TH...) the structure tree holds."""
    counts: collections.Counter[str] = collections.Counter()
    with pikepdf.open(io.BytesIO(pdf)) as document:
        pending = [document.Root.StructTreeRoot.get("/K")]
        while pending:
            node = pending.pop()
            if isinstance(node, pikepdf.Array):
                pending.extend(node)
            elif isinstance(node, pikepdf.Dictionary) and "/S" in node:
                counts[str(node.S).lstrip("/")] += 1
                pending.append(node.get("/K"))
        return counts


def test_the_plan_runs_facturx_before_attach_and_pdfa_after_both() -> None:
    finish = finishing.Finish(
        facturx=finishing.FacturX(xml_blob=XML_BLOB),
        attachments=(finishing.Attachment(blob=finishing.attachment_blob(JOB, "a.csv")),),
    )
    assert [name for name, _ in stages.plan(finish)] == ["metadata", "facturx", "attach", "pdfa"]


@verapdf.needs_verapdf
def test_pdfa_2b_of_chromium_prints_is_valid_and_keeps_the_html_title(
    printed: Mapping[str, bytes],
) -> None:
    finished = {name: run(printed[name], finishing.Finish(pdfa="2b")) for name in printed}
    assert_compliant(finished, "2b")
    for pdf in finished.values():
        with pikepdf.open(io.BytesIO(pdf)) as document:
            metadata = document.open_metadata()
            assert metadata.pdfa_status == "2B"
            assert str(document.docinfo["/Title"]) == metadata["dc:title"] == HTML_TITLE
            (intent,) = document.Root.OutputIntents
            assert intent.S == "/GTS_PDFA1" and intent.DestOutputProfile.N == 3
            assert len(document.trailer.ID) == 2


@verapdf.needs_verapdf
def test_pdfa_keeps_the_tagged_structure_and_outline(printed: Mapping[str, bytes]) -> None:
    metadata = finishing.Metadata(title="Facture FA-2026-0142", language="fr")
    finished = run(printed["tagged"], finishing.Finish(pdfa="2b", metadata=metadata))
    assert_compliant({"tagged": finished}, "2b")
    before, after = structure(printed["tagged"]), structure(finished)
    assert after == before
    assert {"H1", "H2", "Table", "TH", "TD", "Caption"} <= set(after)
    with pikepdf.open(io.BytesIO(finished)) as document:
        assert document.Root.MarkInfo.Marked is True
        assert str(document.Root.Lang) == "fr"
        assert document.Root.ViewerPreferences.DisplayDocTitle is True
        with document.open_outline() as outline:
            assert [item.title for item in outline.root][:1] == ["Facture n° FA-2026-0142"]


@verapdf.needs_verapdf
def test_attached_files_are_associated_files_of_a_valid_pdfa_3b(
    printed: Mapping[str, bytes],
) -> None:
    files = {
        "lines.csv": b"sku;quantity;amount\nMAQ-RAPPORT;12;1020.00\n",
        "source.json": '{"number": "FA-2026-0142", "client": "Éditions du Port"}'.encode(),
        "scan.bin": bytes(range(256)) * 40,
    }
    attachments = (
        finishing.Attachment(
            blob=finishing.attachment_blob(JOB, "lines.csv"),
            mime="text/csv",
            description="The invoice lines",
            relationship="Data",
        ),
        finishing.Attachment(
            blob=finishing.attachment_blob(JOB, "source.json"),
            name="invoice-source.json",
            mime="application/json",
            relationship="Source",
        ),
        finishing.Attachment(blob=finishing.attachment_blob(JOB, "scan.bin")),
    )
    blobs = {finishing.attachment_blob(JOB, name): content for name, content in files.items()}
    finished = run(printed["plain"], finishing.Finish(attachments=attachments), blobs)
    assert_compliant({"attached": finished}, "3b")

    extracted = {
        name: data[0] for name, data in pypdf.PdfReader(io.BytesIO(finished)).attachments.items()
    }
    assert extracted == {
        "lines.csv": files["lines.csv"],
        "invoice-source.json": files["source.json"],
        "scan.bin": files["scan.bin"],
    }
    with pikepdf.open(io.BytesIO(finished)) as document:
        assert document.open_metadata().pdfa_status == "3B"
        associated = {spec.objgen for spec in document.Root.AF}
        seen = {}
        for name, spec in document.attachments.items():
            assert spec.obj.objgen in associated
            stream = spec.get_file()
            seen[name] = (stream.mime_type, str(spec.relationship), spec.description, stream.size)
            assert stream.mod_date == MOMENT
        assert seen == {
            "lines.csv": ("text/csv", "/Data", "The invoice lines", len(files["lines.csv"])),
            "invoice-source.json": (
                "application/json",
                "/Source",
                "invoice-source.json",
                len(files["source.json"]),
            ),
            "scan.bin": (
                "application/octet-stream",
                "/Supplement",
                "scan.bin",
                len(files["scan.bin"]),
            ),
        }


@pytest.fixture(scope="module")
def factur_x_invoice(printed: Mapping[str, bytes], invoice_xml: bytes) -> bytes:
    """The tagged invoice finished as a Factur-X e-invoice, with one more file attached."""
    metadata = finishing.Metadata(
        title="Facture FA-2026-0142", author="Atelier Lumen SAS", language="fr"
    )
    finish = finishing.Finish(
        metadata=metadata,
        facturx=finishing.FacturX(xml_blob=XML_BLOB),
        attachments=(finishing.Attachment(blob=finishing.attachment_blob(JOB, "lines.csv")),),
    )
    files = {XML_BLOB: invoice_xml, finishing.attachment_blob(JOB, "lines.csv"): b"a;b\n1;2\n"}
    return run(printed["tagged"], finish, files)


@verapdf.needs_verapdf
def test_a_factur_x_invoice_is_pdfa_3b_and_the_library_reads_its_xml_back(
    printed: Mapping[str, bytes], invoice_xml: bytes, factur_x_invoice: bytes
) -> None:
    finished = factur_x_invoice
    assert_compliant({"invoice": finished}, "3b")

    name, xml = facturx.get_facturx_xml_from_pdf(finished, check_xsd=True)
    assert (name, xml) == ("factur-x.xml", invoice_xml)
    assert facturx.xml_check_xsd(xml, flavor="factur-x", level="en16931")
    properties = xmp(finished)
    assert {
        key: properties[FX + key]
        for key in ("DocumentType", "DocumentFileName", "Version", "ConformanceLevel")
    } == {
        "DocumentType": "INVOICE",
        "DocumentFileName": "factur-x.xml",
        "Version": "1.0",
        "ConformanceLevel": "EN 16931",
    }
    with pikepdf.open(io.BytesIO(finished)) as document:
        xmp_doc = document.open_metadata()
        assert xmp_doc.pdfa_status == "3B"
        # The job's metadata won over the library's, in the XMP and the document information.
        assert xmp_doc["dc:title"] == str(document.docinfo["/Title"]) == "Facture FA-2026-0142"
        assert xmp_doc["dc:creator"] == ["Atelier Lumen SAS"]
        assert xmp_doc["dc:language"] == {"fr"}
        assert str(document.Root.Lang) == "fr"
        specs = {name: spec for name, spec in document.attachments.items()}
        assert set(specs) == {"factur-x.xml", "lines.csv"}
        assert str(specs["factur-x.xml"].relationship) == "/Data"
        assert specs["factur-x.xml"].get_file().mime_type == "text/xml"
        assert {spec.obj.objgen for spec in specs.values()} == {
            af.objgen for af in document.Root.AF
        }
    assert structure(finished) == structure(printed["tagged"])


@mustang.needs_mustang
def test_a_factur_x_invoice_is_valid_by_mustang(factur_x_invoice: bytes) -> None:
    """The whole e-invoice by a Factur-X validator: PDF/A-3, the fx: XMP, the XML's XSD and
    EN 16931 business rules, its sums; not even a warning."""
    verdict = mustang.validate(factur_x_invoice)
    assert verdict.valid and not verdict.problems, str(verdict)


def test_an_invoice_without_a_title_takes_the_html_title_not_the_library_s(
    printed: Mapping[str, bytes], invoice_xml: bytes
) -> None:
    finished = run(
        printed["plain"],
        finishing.Finish(facturx=finishing.FacturX(xml_blob=XML_BLOB, level="en16931")),
        {XML_BLOB: invoice_xml},
    )
    properties = xmp(finished)
    assert properties["{http://purl.org/dc/elements/1.1/}title"] == HTML_TITLE
    # What the page had not, the library gave: the seller as author.
    assert properties["{http://purl.org/dc/elements/1.1/}creator"] == ["Atelier Lumen SAS"]


def _invalid(xml: bytes) -> bytes:
    return xml.replace(b"<ram:TypeCode>380</ram:TypeCode>", b"<ram:Kind>380</ram:Kind>", 1)


CII = b'xmlns:rsm="urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"'


@pytest.mark.parametrize(
    ("make_xml", "level", "reason"),
    [
        pytest.param(lambda xml: xml[:200], None, "not well-formed XML", id="truncated"),
        pytest.param(
            lambda xml: (
                b'<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/hostname">]>\n'
                b"<rsm:CrossIndustryInvoice " + CII + b">&e;</rsm:CrossIndustryInvoice>"
            ),
            None,
            "has a DOCTYPE",
            id="entity",
        ),
        pytest.param(
            lambda xml: (
                b'<Invoice xmlns="urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"/>'
            ),
            None,
            "not a Factur-X invoice",
            id="ubl",
        ),
        pytest.param(lambda xml: xml, "basic", "declares the 'en16931' profile", id="level"),
        pytest.param(_invalid, None, "not a valid en16931 invoice", id="xsd"),
    ],
)
def test_an_invoice_xml_that_cannot_be_is_a_permanent_error_naming_the_stage(
    printed: Mapping[str, bytes],
    invoice_xml: bytes,
    make_xml: Callable[[bytes], bytes],
    level: finishing.FacturXLevel | None,
    reason: str,
) -> None:
    finish = finishing.Finish(facturx=finishing.FacturX(xml_blob=XML_BLOB, level=level))
    with pytest.raises(stages.FinishingFailed) as failed:
        run(printed["plain"], finish, {XML_BLOB: make_xml(invoice_xml)})
    assert failed.value.stage == "facturx"
    assert failed.value.kind == "finish"
    assert reason in str(failed.value)
    assert str(failed.value).startswith("finishing stage 'facturx' failed: ")


@verapdf.needs_verapdf
def test_verapdf_rejects_what_chromium_prints_before_the_pdfa_stage(
    printed: Mapping[str, bytes],
) -> None:
    """The validator tells conforming from not: Chromium's print is not PDF/A by itself."""
    (verdict,) = verapdf.validate({"plain": printed["plain"]}, "2b").values()
    assert not verdict.compliant
    rules = " ".join(verdict.failures)
    assert "6.2.4.3-2" in rules  # DeviceRGB with no output intent
    assert "6.6.2.1-1" in rules  # no XMP metadata


@mustang.needs_mustang
@verapdf.needs_verapdf
def test_mustang_rejects_an_invoice_whose_xmp_lost_its_factur_x_properties(
    printed: Mapping[str, bytes], invoice_xml: bytes
) -> None:
    """The Factur-X validator tells a Factur-X PDF from a PDF/A-3 that carries an XML: without its
    fx: properties (what pikepdf's PDF/A preparation alone leaves) the invoice is refused."""
    finish = finishing.Finish(facturx=finishing.FacturX(xml_blob=XML_BLOB))
    finished = run(printed["plain"], finish, {XML_BLOB: invoice_xml})
    with pikepdf.open(io.BytesIO(finished)) as document:
        with document.open_metadata(set_pikepdf_as_editor=False) as metadata:
            for key in [key for key in metadata if key.startswith(FX)]:
                del metadata[key]
        out = io.BytesIO()
        document.save(out)
    assert_compliant({"stripped": out.getvalue()}, "3b")  # still PDF/A-3b...
    verdict = mustang.validate(out.getvalue())
    assert not verdict.valid  # ...but not Factur-X
    assert "ConformanceLevel not found" in str(verdict)
