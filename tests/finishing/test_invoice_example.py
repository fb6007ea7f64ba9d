"""The example invoice: its Factur-X XML is the one made from its data, valid against the EN 16931
profile's XSD, and says what the printed invoice says (number, parties, totals)."""

from __future__ import annotations

from typing import Any

import facturx
from lxml import etree
from reportfarm_renderer import templates

from reportfarm import finishing

from . import invoices
from .conftest import EXAMPLES


def test_the_committed_xml_is_the_one_made_from_the_invoice_data(invoice: dict[str, Any]) -> None:
    assert invoices.XML.read_bytes() == invoices.factur_x_xml(invoice), (
        "examples/data/invoice.factur-x.xml is stale: run `python -m tests.finishing.invoices`"
    )


def test_the_xml_is_a_valid_en16931_invoice_by_the_factur_x_library(invoice_xml: bytes) -> None:
    assert facturx.xml_check_xsd(invoice_xml, flavor="factur-x", level="en16931")
    root = etree.fromstring(invoice_xml)
    assert facturx.get_flavor(root) == "factur-x"
    assert facturx.get_level(root) == "en16931"


def test_the_xml_and_the_printed_invoice_say_the_same(
    invoice: dict[str, Any], invoice_xml: bytes
) -> None:
    invoices.check_sums(invoice)
    root = etree.fromstring(invoice_xml)

    def text(path: str) -> str:
        values = root.xpath(path, namespaces=invoices.NS)
        assert len(values) == 1, path
        return str(values[0].text)

    assert text("//rsm:ExchangedDocument/ram:ID") == invoice["number"]
    assert text("//ram:SellerTradeParty/ram:Name") == invoice["seller"]["name"]
    assert text("//ram:BuyerTradeParty/ram:Name") == invoice["buyer"]["name"]
    assert text("//ram:GrandTotalAmount") == invoice["totals"]["gross"]
    assert text("//ram:DuePayableAmount") == invoice["totals"]["due"]
    html = templates.TemplateCatalog.load(EXAMPLES / "templates").render("invoice", invoice)
    for shown in ("FA-2026-0142", "Atelier Lumen SAS", "Éditions du Port SARL", "3 312,00 €"):
        assert shown in html
    assert '<html lang="fr">' in html and html.count('<th scope="col"') == 6


def test_the_invoice_can_be_sent_with_its_xml() -> None:
    job_id = "job-invoice"
    finish = finishing.Finish(
        facturx=finishing.FacturX(
            xml_blob=finishing.attachment_blob(job_id, finishing.FACTURX_XML_NAME)
        )
    )
    finish.validate(job_id)
    assert finish.archival == "3b"
