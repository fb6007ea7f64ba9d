"""Documents people must keep, end to end: a client submits jobs with ``finish`` options and files,
a real renderer (Chromium, Azurite) prints and finishes them, the client downloads the PDFs, and
veraPDF and the factur-x library judge them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import facturx
import pikepdf
import pypdf
import pytest
from reportfarm_bench import statements
from reportfarm_renderer import service

from reportfarm import contract, finishing
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from tests.harness import metrics
from tests.renderer.conftest import wait_for

from . import verapdf
from .conftest import TAGGED, example_data, renderer_settings
from .test_stages import structure

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]

FX = "{urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#}"


async def finished(client: ReportFarmClient, job_ids: list[str]) -> dict[str, bytes]:
    results = await client.wait(job_ids, timeout_s=120)
    pdfs = {}
    for job_id in job_ids:
        record = results[job_id]
        assert record is not None and record.state == "succeeded", record
        pdfs[job_id] = await client.download(record)
    return pdfs


def assert_compliant(pdfs: dict[str, bytes], flavour: str) -> None:
    failing = [str(v) for v in verapdf.validate(pdfs, flavour).values() if not v.compliant]
    assert not failing, "\n".join(failing)


def restarts(renderer: Any) -> float:
    return metrics.total(renderer.parts.metrics.registry, "reportfarm_browser_restarts")


@verapdf.needs_verapdf
async def test_every_example_report_as_pdfa_2b_is_valid_by_verapdf(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    reports = {
        "achievement": (example_data("achievement"), "zh-CN"),
        "outlook": (example_data("outlook"), "zh-CN"),
        "statement": (statements.statement(statements.lines_for(3)), "zh-CN"),
        "invoice": (example_data("invoice"), "fr"),
    }
    async with service.running(renderer_settings(storage, template_dir)):
        ids = {
            await client.submit(
                Submission(
                    template=template,
                    data=data,
                    finish=finishing.Finish(
                        pdfa="2b",
                        metadata=finishing.Metadata(
                            title=f"{template} report", author="reportfarm", language=language
                        ),
                    ),
                )
            ): template
            for template, (data, language) in reports.items()
        }
        pdfs = await finished(client, list(ids))
        records = await client.wait(list(ids), timeout_s=5)
    assert_compliant({ids[job_id]: pdf for job_id, pdf in pdfs.items()}, "2b")
    for job_id, pdf in pdfs.items():
        record = records[job_id]
        assert record is not None and {"finish_metadata", "finish_pdfa"} <= set(record.stages_ms)
        with pikepdf.open(io.BytesIO(pdf)) as document:
            assert document.open_metadata().pdfa_status == "2B"
            assert str(document.docinfo["/Title"]) == f"{ids[job_id]} report"


@verapdf.needs_verapdf
async def test_attached_files_come_back_byte_identical_from_a_valid_pdfa_3b(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient
) -> None:
    days = example_data("achievement")["days"]
    csv = "date,new_words,accuracy\n" + "".join(
        f"{day['date']},{day['new_words']},{day['accuracy']}\n" for day in days
    )
    files = {
        "days.csv": csv.encode(),
        "achievement.json": json.dumps(example_data("achievement"), ensure_ascii=False).encode(),
    }
    finish = finishing.Finish(
        attachments=(
            finishing.Attachment(
                blob="days.csv", mime="text/csv", relationship="Data", description="每日学习明细"
            ),
            finishing.Attachment(
                blob="achievement.json",
                name="source-data.json",
                mime="application/json",
                relationship="Source",
            ),
        )
    )
    async with service.running(renderer_settings(storage, template_dir)):
        job_id = await client.submit(
            Submission(
                template="achievement", data=example_data("achievement"), finish=finish, files=files
            )
        )
        pdf = (await finished(client, [job_id]))[job_id]
    assert_compliant({"achievement": pdf}, "3b")
    extracted = {
        name: data[0] for name, data in pypdf.PdfReader(io.BytesIO(pdf)).attachments.items()
    }
    assert extracted == {
        "days.csv": files["days.csv"],
        "source-data.json": files["achievement.json"],
    }
    with pikepdf.open(io.BytesIO(pdf)) as document:
        assert document.open_metadata().pdfa_status == "3B"
        described = {
            name: (spec.get_file().mime_type, str(spec.relationship), spec.description)
            for name, spec in document.attachments.items()
        }
        associated = {spec.objgen for spec in document.Root.AF}
        assert all(spec.obj.objgen in associated for spec in document.attachments.values())
    assert described == {
        "days.csv": ("text/csv", "/Data", "每日学习明细"),
        "source-data.json": ("application/json", "/Source", "source-data.json"),
    }


@verapdf.needs_verapdf
async def test_a_tagged_factur_x_invoice_is_valid_pdfa_3b_and_keeps_its_structure(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient, invoice_xml: bytes
) -> None:
    invoice = example_data("invoice")
    finish = finishing.Finish(
        metadata=finishing.Metadata(
            title=f"Facture {invoice['number']}",
            author=invoice["seller"]["name"],
            subject=f"Facture {invoice['number']} à {invoice['buyer']['name']}",
            keywords=("facture", "Factur-X"),
            language="fr",
        ),
        facturx=finishing.FacturX(xml_blob=finishing.FACTURX_XML_NAME, level="en16931"),
        attachments=(finishing.Attachment(blob="lines.csv", mime="text/csv", relationship="Data"),),
    )
    lines = "".join(f"{line['sku']};{line['amount']}\n" for line in invoice["lines"]).encode()
    async with service.running(renderer_settings(storage, template_dir)):
        invoice_id = await client.submit(
            Submission(
                template="invoice",
                data=invoice,
                pdf=TAGGED,
                finish=finish,
                files={finishing.FACTURX_XML_NAME: invoice_xml, "lines.csv": lines},
            )
        )
        printed_id = await client.submit(Submission(template="invoice", data=invoice, pdf=TAGGED))
        pdfs = await finished(client, [invoice_id, printed_id])
    pdf = pdfs[invoice_id]
    assert_compliant({"invoice": pdf}, "3b")

    name, xml = facturx.get_facturx_xml_from_pdf(pdf, check_xsd=True)
    assert (name, xml) == ("factur-x.xml", invoice_xml)
    assert facturx.xml_check_xsd(xml, flavor="factur-x", level="en16931")
    with pikepdf.open(io.BytesIO(pdf)) as document:
        metadata = document.open_metadata()
        assert metadata.pdfa_status == "3B"
        assert metadata[FX + "DocumentType"] == "INVOICE"
        assert metadata[FX + "ConformanceLevel"] == "EN 16931"
        assert metadata["dc:title"] == str(document.docinfo["/Title"]) == "Facture FA-2026-0142"
        assert metadata["pdf:Keywords"] == "facture, Factur-X"
        assert set(document.attachments) == {"factur-x.xml", "lines.csv"}
        assert document.Root.MarkInfo.Marked is True
    # The structure tree Chromium made from the HTML is the one that came out.
    assert structure(pdf) == structure(pdfs[printed_id])
    assert {"H1", "H2", "Table", "TH"} <= set(structure(pdf))


GRAND_TOTAL = re.compile(rb"<ram:GrandTotalAmount>[^<]*</ram:GrandTotalAmount>")
WRONG_TOTAL = b"<ram:GrandTotalAmount>999999.99</ram:GrandTotalAmount>"


async def test_a_job_that_cannot_be_finished_fails_with_the_stage_and_the_worker_goes_on(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient, invoice_xml: bytes
) -> None:
    invoice = example_data("invoice")
    broken = invoice_xml.replace(b"<ram:TypeCode>380</ram:TypeCode>", b"", 1)
    missing = contract.new_job_id()
    async with service.running(renderer_settings(storage, template_dir)) as renderer:
        bad_xml = await client.submit(
            Submission(
                template="invoice",
                data=invoice,
                finish=finishing.Finish(facturx=finishing.FacturX(xml_blob="factur-x.xml")),
                files={"factur-x.xml": broken},
            )
        )
        unbalanced = await client.submit(
            Submission(
                template="invoice",
                data=invoice,
                finish=finishing.Finish(facturx=finishing.FacturX(xml_blob="factur-x.xml")),
                files={"factur-x.xml": GRAND_TOTAL.sub(WRONG_TOTAL, invoice_xml)},
            )
        )
        no_file = await client.submit(
            Submission(
                template="invoice",
                data=invoice,
                job_id=missing,
                finish=finishing.Finish(
                    attachments=(
                        finishing.Attachment(blob=finishing.attachment_blob(missing, "gone.csv")),
                    )
                ),
            )
        )
        good = await client.submit(
            Submission(template="invoice", data=invoice, finish=finishing.Finish(pdfa="2b"))
        )
        results = await client.wait([bad_xml, unbalanced, no_file, good], timeout_s=120)
        assert await wait_for(lambda: _poisoned(client, 3), timeout=30)
        replaced = restarts(renderer)
    assert results[good] is not None and results[good].state == "succeeded", results[good]
    for job_id, stage, reason in [
        (bad_xml, "facturx", "is not a valid en16931 invoice"),
        (unbalanced, "facturx", "BR-CO-15: [BR-CO-15]-Invoice total amount with VAT (BT-112)"),
        (no_file, "load_files", "does not exist"),
    ]:
        record = results[job_id]
        assert record is not None and record.state == "failed", record
        assert f"finishing stage {stage!r} failed" in (record.error or ""), record.error
        assert reason in (record.error or ""), record.error
    poison = {
        item["job_id"]: item["reason"] for item in map(json.loads, await client.queue.peek_poison())
    }
    assert set(poison) == {bad_xml, unbalanced, no_file}
    assert "finishing stage 'facturx' failed" in poison[bad_xml]
    assert replaced == 0  # a document's fault never costs a browser


async def _poisoned(client: ReportFarmClient, count: int) -> bool:
    return await client.queue.poison_depth() >= count
