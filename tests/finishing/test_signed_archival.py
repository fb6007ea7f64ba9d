"""Signed and archival at once, end to end: example reports as PDF/A-2b with a visible signature,
and the example invoice as a signed Factur-X PDF/A-3b, through the queue and a real renderer,
judged by veraPDF (PDF/A), pyHanko (the signature) and the factur-x library (the invoice)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import facturx
import pytest
from reportfarm_renderer import service

from reportfarm import finishing
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings

from . import invoices, verapdf
from .conftest import TAGGED, example_data, renderer_settings
from .keys import Pki, validate
from .test_end_to_end import assert_compliant, finished

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, verapdf.needs_verapdf]


async def assert_signed(pdf: bytes, pki: Pki) -> None:
    status = await asyncio.to_thread(validate, pdf, pki)
    assert status.intact and status.valid and status.trusted, status.pretty_print_details()
    assert status.bottom_line, status.pretty_print_details()


async def test_signed_pdfa_reports_and_a_signed_factur_x_invoice_stay_valid(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    signing_dir: Path,
    pki: Pki,
) -> None:
    visible = finishing.Signature(visible=True, page=-1, reason="Issued", location="Lyon")
    xml = invoices.XML.read_bytes()
    settings = renderer_settings(storage, template_dir, signing_dir=signing_dir)
    async with service.running(settings):
        reports = {
            await client.submit(
                Submission(
                    template=template,
                    data=example_data(template),
                    pdf=TAGGED,
                    finish=finishing.Finish(
                        pdfa="2b",
                        metadata=finishing.Metadata(title=f"{template} report", language="zh-CN"),
                        sign=visible,
                    ),
                )
            ): template
            for template in ("achievement", "outlook")
        }
        invoice = await client.submit(
            Submission(
                template="invoice",
                data=invoices.load(),
                pdf=TAGGED,
                finish=finishing.Finish(
                    metadata=finishing.Metadata(title="Facture", language="fr"),
                    facturx=finishing.FacturX(xml_blob=finishing.FACTURX_XML_NAME),
                    sign=finishing.Signature(reason="Facture émise"),
                ),
                files={finishing.FACTURX_XML_NAME: xml},
            )
        )
        pdfs = await finished(client, [*reports, invoice])
    assert_compliant({reports[job_id]: pdfs[job_id] for job_id in reports}, "2b")
    assert_compliant({"invoice": pdfs[invoice]}, "3b")
    for pdf in pdfs.values():
        await assert_signed(pdf, pki)
    _, extracted = facturx.get_xml_from_pdf(pdfs[invoice], check_xsd=True)
    assert extracted == xml
