"""The ``facturx`` stage: an e-invoice, the job's Factur-X XML (UN/CEFACT CII) embedded as
``factur-x.xml`` by the ``factur-x`` library, with its XMP (``fx:`` DocumentType INVOICE, the
file name, version 1.0, the profile as ConformanceLevel) and the PDF/A-3 identification.

The XML is checked first, and a job whose XML cannot be an invoice is a permanent error naming
what is wrong: not well-formed; a DOCTYPE (an invoice needs none, and entities are how an XML
reads files it should not); not a Factur-X invoice; a profile (``finish.facturx.level``) other
than the one its guideline ID declares; not valid against that profile's XSD (the library's
check); or breaking EN 16931's business rules (:mod:`.en16931`, with the rule's id and text).
The XML is embedded byte for byte as the job sent it.

The library rewrites what it touches: the XMP packet and document information (its own title,
dates and producer), the catalogue's ``/AF`` and ``/Names``. So this stage runs on the PDF as
``metadata`` left it, before ``attach`` (which adds to ``/AF``), and puts the metadata back:
every XMP property the document had before (title, author, language, dates...) wins over the
library's; what it had not keeps the library's (an invoice without a title is titled
"<seller>: Invoice <number>").
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING

import facturx as facturx_library
import pikepdf
from lxml import etree

from reportfarm.finishing import FACTURX_LEVELS, FinishError

from . import en16931

if TYPE_CHECKING:
    from . import Inputs

PDFA_ID = "{http://www.aiim.org/pdfa/ns/id/}"
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)

# The library says at INFO what it did for every invoice; the renderer logs the job's stages.
logging.getLogger("factur-x").setLevel(logging.WARNING)


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    wanted = inputs.finish.facturx
    assert wanted is not None
    xml = inputs.files.get(wanted.xml_blob)
    if xml is None:
        raise FinishError(f"the job's file {wanted.xml_blob!r} was not loaded")
    level = check(xml, wanted.level, inputs.business_rules, rules=not inputs.rules_checked)
    with pikepdf.open(io.BytesIO(pdf)) as printed:
        for name in ("/AF", "/Names"):
            if name in printed.Root:
                raise FinishError(
                    f"the PDF already has {name}, which the factur-x library would replace: "
                    "facturx runs before attach"
                )
        try:
            invoice = facturx_library.generate_from_binary(
                pdf,
                xml,
                flavor="factur-x",
                level=level,
                check_xsd=False,  # checked above
                xmp_compression=False,
            )
        except Exception as error:  # the library raises bare Exceptions for an invalid XML
            raise FinishError(
                f"the Factur-X XML is not a valid {level} invoice: {error}"[:800]
            ) from None
        with pikepdf.open(io.BytesIO(invoice)) as document:
            _keep_metadata(printed, document)
            out = io.BytesIO()
            document.save(out)
            return out.getvalue()


def check(xml: bytes, asked: str | None, xslt: object, *, rules: bool = True) -> str:
    """The invoice's profile, once its XML passed the XSD and (``rules``) EN 16931's rules."""
    level = invoice_level(xml, asked)
    try:
        facturx_library.xml_check_xsd(xml, flavor="factur-x", level=level)
    except Exception as error:  # the library raises bare Exceptions for an invalid XML
        raise FinishError(
            f"the Factur-X XML is not a valid {level} invoice: {error}"[:800]
        ) from None
    if rules:  # the XSD first: the rules need its shape
        en16931.check(xml, level, xslt)  # type: ignore[arg-type]
    return level


def check_rules(pdf: bytes, inputs: Inputs) -> bytes:
    """The checks of :func:`apply` alone (``pdf`` untouched): a stage the renderer's process
    runs before it hands the job to a finishing process."""
    wanted = inputs.finish.facturx
    assert wanted is not None
    xml = inputs.files.get(wanted.xml_blob)
    if xml is None:
        raise FinishError(f"the job's file {wanted.xml_blob!r} was not loaded")
    check(xml, wanted.level, inputs.business_rules)
    return pdf


def invoice_level(xml: bytes, asked: str | None) -> str:
    """The Factur-X profile of ``xml`` (its guideline ID), which ``asked`` must be if given."""
    try:
        root = etree.fromstring(xml, _XML)
    except etree.XMLSyntaxError as error:
        raise FinishError(f"the Factur-X XML is not well-formed XML: {error}") from None
    if root.getroottree().docinfo.doctype:
        raise FinishError("the Factur-X XML has a DOCTYPE: an invoice needs none, refused")
    if not isinstance(root.tag, str) or etree.QName(root).localname != "CrossIndustryInvoice":
        raise FinishError(
            f"the Factur-X XML is not a Factur-X invoice: its root is {root.tag!r}, "
            "not rsm:CrossIndustryInvoice (UN/CEFACT CII)"
        )
    try:
        level = str(facturx_library.get_level(root, "factur-x"))
    except Exception as error:
        raise FinishError(f"the Factur-X XML declares no known profile: {error}") from None
    if level not in FACTURX_LEVELS:
        raise FinishError(
            f"the Factur-X XML's profile {level!r} is not one of {', '.join(FACTURX_LEVELS)}"
        )
    if asked is not None and asked != level:
        raise FinishError(
            f"finish.facturx.level is {asked!r} but the XML declares the {level!r} profile"
        )
    return level


def _keep_metadata(printed: pikepdf.Pdf, document: pikepdf.Pdf) -> None:
    """The printed PDF's XMP properties over the library's (its PDF/A and fx: ones excepted)."""
    before = printed.open_metadata()
    keys = [key for key in before if not key.startswith(PDFA_ID)]
    if not keys:
        return
    with document.open_metadata(set_pikepdf_as_editor=False) as xmp:
        xmp.copy_properties(before, keys, overwrite=True)
