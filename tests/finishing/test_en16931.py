"""EN 16931's business rules in production: the CEN schematron for CII (compiled to XSLT, run by
saxonche) on every Factur-X invoice the farm embeds. The example invoice and a credit note pass;
an invoice whose sums do not add up is refused with the rule's id and text (BR-CO-15, as Mustang
says too); a renderer without the rules refuses invoices instead of passing them unchecked."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from reportfarm_renderer.finishing import en16931

from reportfarm.finishing import FinishError

from . import invoices, rules

XSLT = rules.xslt()
pytestmark = pytest.mark.skipif(
    XSLT is None, reason="EN 16931's XSLT is not installed: run scripts/en16931/install.sh"
)
GRAND_TOTAL = re.compile(rb"<ram:GrandTotalAmount>[^<]*</ram:GrandTotalAmount>")


def with_grand_total(xml: bytes, amount: str) -> bytes:
    return GRAND_TOTAL.sub(f"<ram:GrandTotalAmount>{amount}</ram:GrandTotalAmount>".encode(), xml)


def test_the_example_invoice_and_a_credit_note_keep_every_rule() -> None:
    assert XSLT is not None
    xml = invoices.XML.read_bytes()
    assert [failure for failure in en16931.failures(xml, XSLT) if failure.flag == "fatal"] == []
    credit_note = xml.replace(
        b"<ram:TypeCode>380</ram:TypeCode>", b"<ram:TypeCode>381</ram:TypeCode>", 1
    )
    assert b"381" in credit_note
    en16931.check(credit_note, "en16931", XSLT)


def test_a_grand_total_that_does_not_add_up_is_refused_with_br_co_15() -> None:
    xml = with_grand_total(invoices.XML.read_bytes(), "999999.99")
    with pytest.raises(FinishError) as refused:
        en16931.check(xml, "en16931", XSLT)
    message = str(refused.value)
    assert "BR-CO-15: [BR-CO-15]-Invoice total amount with VAT (BT-112)" in message, message
    assert "of EN 16931's business rules" in message


def test_any_wrong_grand_total_is_refused_and_the_right_one_is_not() -> None:
    assert XSLT is not None
    xml = invoices.XML.read_bytes()
    right = GRAND_TOTAL.search(xml)
    assert right is not None
    generator = random.Random(16931)
    amounts = {f"{generator.uniform(0, 10**7):.2f}" for _ in range(20)} | {"0.00", "3312.01"}
    for amount in sorted(amounts - {"3312.00"}):
        broken = {failure.rule for failure in en16931.failures(with_grand_total(xml, amount), XSLT)}
        assert "BR-CO-15" in broken, amount
    assert not [f for f in en16931.failures(xml, XSLT) if f.flag == "fatal"]


def test_profiles_that_are_not_en16931_invoices_are_not_held_to_its_rules() -> None:
    xml = with_grand_total(invoices.XML.read_bytes(), "999999.99")
    for level in ("minimum", "basicwl"):
        en16931.check(xml, level, XSLT)  # no lines, no sums: the rules do not apply


def test_a_renderer_without_the_rules_refuses_invoices_instead_of_passing_them() -> None:
    with pytest.raises(FinishError, match="REPORTFARM_EN16931_XSLT"):
        en16931.check(invoices.XML.read_bytes(), "en16931", None)


def test_the_rules_warmed_ahead_are_ready_for_the_first_invoice_or_say_why_not(
    tmp_path: Path,
) -> None:
    """A renderer that signs warms Saxon's process and its stylesheet at start: the future says
    it compiled, and the next invoice is checked in the same process; a stylesheet that cannot
    compile says so (the first invoice's check says it again, failing that job)."""
    assert XSLT is not None
    assert en16931.warm(XSLT).result(timeout=120) == (True, "")
    assert not [f for f in en16931.failures(invoices.XML.read_bytes(), XSLT) if f.flag == "fatal"]
    broken = tmp_path / "broken.xsl"
    broken.write_text("<not-a-stylesheet/>")
    ok, why = en16931.warm(broken).result(timeout=120)
    assert not ok and "cannot compile EN 16931's rules" in why
    with pytest.raises(FinishError, match="cannot compile EN 16931's rules"):
        en16931.check(invoices.XML.read_bytes(), "en16931", broken)
