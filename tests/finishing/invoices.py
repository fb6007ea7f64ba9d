"""The example invoice's Factur-X XML (EN 16931 profile, UN/CEFACT CII), made from the same data
as its PDF (``examples/data/invoice.json``), so the two cannot drift apart.

``python -m tests.finishing.invoices`` writes ``examples/data/invoice.factur-x.xml``; a test checks
that the committed file is what this makes, and that its sums add up.
"""

from __future__ import annotations

import decimal
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lxml import etree
from lxml.builder import ElementMaker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DATA = EXAMPLES / "data" / "invoice.json"
XML = EXAMPLES / "data" / "invoice.factur-x.xml"

EN16931 = "urn:cen.eu:en16931:2017"
"""The guideline ID of Factur-X's EN 16931 profile (its XMP ConformanceLevel ``EN 16931``)."""

NS = {
    "rsm": "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100",
    "ram": "urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100",
    "qdt": "urn:un:unece:uncefact:data:standard:QualifiedDataType:100",
    "udt": "urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100",
}
RSM = ElementMaker(namespace=NS["rsm"], nsmap=NS)
RAM = ElementMaker(namespace=NS["ram"], nsmap=NS)
UDT = ElementMaker(namespace=NS["udt"], nsmap=NS)


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def money(text: str) -> decimal.Decimal:
    return decimal.Decimal(text).quantize(decimal.Decimal("0.01"))


def check_sums(invoice: Mapping[str, Any]) -> None:
    """The invoice's amounts add up (EN 16931's BR-CO rules on the sums), else AssertionError."""
    net = decimal.Decimal(0)
    by_rate: dict[str, decimal.Decimal] = {}
    for line in invoice["lines"]:
        amount = money(line["amount"])
        assert money(str(decimal.Decimal(line["quantity"]) * money(line["unit_price"]))) == amount
        net += amount
        by_rate[line["vat_rate"]] = by_rate.get(line["vat_rate"], decimal.Decimal(0)) + amount
    totals = invoice["totals"]
    assert money(totals["net"]) == net
    vat_total = decimal.Decimal(0)
    for vat in totals["vat"]:
        assert money(vat["basis"]) == by_rate[vat["rate"]]
        assert money(vat["amount"]) == money(
            str(money(vat["basis"]) * decimal.Decimal(vat["rate"]) / 100)
        )
        vat_total += money(vat["amount"])
    assert money(totals["vat_total"]) == vat_total
    assert money(totals["gross"]) == net + vat_total == money(totals["due"])


def _date(text: str) -> etree._Element:
    return UDT.DateTimeString(text.replace("-", ""), format="102")


def _party(party: Mapping[str, Any]) -> list[etree._Element]:
    return [
        RAM.Name(party["name"]),
        RAM.SpecifiedLegalOrganization(RAM.ID(party["siren"], schemeID="0002")),
        RAM.PostalTradeAddress(
            RAM.PostcodeCode(party["postcode"]),
            RAM.LineOne(party["street"]),
            RAM.CityName(party["city"]),
            RAM.CountryID(party["country"]),
        ),
        RAM.URIUniversalCommunication(RAM.URIID(party["email"], schemeID="EM")),
        RAM.SpecifiedTaxRegistration(RAM.ID(party["vat_id"], schemeID="VA")),
    ]


def _line(line: Mapping[str, Any]) -> etree._Element:
    return RAM.IncludedSupplyChainTradeLineItem(
        RAM.AssociatedDocumentLineDocument(RAM.LineID(line["id"])),
        RAM.SpecifiedTradeProduct(RAM.SellerAssignedID(line["sku"]), RAM.Name(line["name"])),
        RAM.SpecifiedLineTradeAgreement(
            RAM.NetPriceProductTradePrice(RAM.ChargeAmount(line["unit_price"]))
        ),
        RAM.SpecifiedLineTradeDelivery(RAM.BilledQuantity(line["quantity"], unitCode=line["unit"])),
        RAM.SpecifiedLineTradeSettlement(
            RAM.ApplicableTradeTax(
                RAM.TypeCode("VAT"),
                RAM.CategoryCode("S"),
                RAM.RateApplicablePercent(line["vat_rate"]),
            ),
            RAM.SpecifiedTradeSettlementLineMonetarySummation(RAM.LineTotalAmount(line["amount"])),
        ),
    )


def factur_x_xml(invoice: Mapping[str, Any]) -> bytes:
    """The CII XML of ``invoice`` (the shape of examples/data/invoice.json), EN 16931 profile."""
    check_sums(invoice)
    totals, payment = invoice["totals"], invoice["payment"]
    root = RSM.CrossIndustryInvoice(
        RSM.ExchangedDocumentContext(
            RAM.GuidelineSpecifiedDocumentContextParameter(RAM.ID(EN16931))
        ),
        RSM.ExchangedDocument(
            RAM.ID(invoice["number"]),
            RAM.TypeCode("380"),
            RAM.IssueDateTime(_date(invoice["issued"])),
            *[
                RAM.IncludedNote(RAM.Content(note["text"]), RAM.SubjectCode(note["code"]))
                for note in invoice["notes"]
            ],
        ),
        RSM.SupplyChainTradeTransaction(
            *[_line(line) for line in invoice["lines"]],
            RAM.ApplicableHeaderTradeAgreement(
                RAM.BuyerReference(invoice["buyer_reference"]),
                RAM.SellerTradeParty(*_party(invoice["seller"])),
                RAM.BuyerTradeParty(*_party(invoice["buyer"])),
                RAM.BuyerOrderReferencedDocument(RAM.IssuerAssignedID(invoice["order_reference"])),
            ),
            RAM.ApplicableHeaderTradeDelivery(
                RAM.ActualDeliverySupplyChainEvent(
                    RAM.OccurrenceDateTime(_date(invoice["delivered"]))
                )
            ),
            RAM.ApplicableHeaderTradeSettlement(
                RAM.PaymentReference(invoice["number"]),
                RAM.InvoiceCurrencyCode(invoice["currency"]),
                RAM.SpecifiedTradeSettlementPaymentMeans(
                    RAM.TypeCode(payment["means_code"]),
                    RAM.PayeePartyCreditorFinancialAccount(RAM.IBANID(payment["iban"])),
                    RAM.PayeeSpecifiedCreditorFinancialInstitution(RAM.BICID(payment["bic"])),
                ),
                *[
                    RAM.ApplicableTradeTax(
                        RAM.CalculatedAmount(vat["amount"]),
                        RAM.TypeCode("VAT"),
                        RAM.BasisAmount(vat["basis"]),
                        RAM.CategoryCode("S"),
                        RAM.RateApplicablePercent(vat["rate"]),
                    )
                    for vat in totals["vat"]
                ],
                RAM.SpecifiedTradePaymentTerms(
                    RAM.Description(payment["terms"]),
                    RAM.DueDateDateTime(_date(invoice["due"])),
                ),
                RAM.SpecifiedTradeSettlementHeaderMonetarySummation(
                    RAM.LineTotalAmount(totals["net"]),
                    RAM.TaxBasisTotalAmount(totals["net"]),
                    RAM.TaxTotalAmount(totals["vat_total"], currencyID=invoice["currency"]),
                    RAM.GrandTotalAmount(totals["gross"]),
                    RAM.DuePayableAmount(totals["due"]),
                ),
            ),
        ),
    )
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


if __name__ == "__main__":
    XML.write_bytes(factur_x_xml(load()))
    sys.stdout.write(f"{XML}\n")
