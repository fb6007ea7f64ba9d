"""The ``pdfa`` stage: PDF/A-2b, or PDF/A-3b when files are attached, by pikepdf's PDF/A
preparation (:func:`pikepdf.pdfa.prepare`, pikepdf being qpdf's Python binding).

What Chromium prints is most of the way there: fonts embedded (TrueType, or Type 3 drawn in the
page), no encryption, no JavaScript. What it lacks, and what ``prepare`` adds or repairs:

- an output intent with an ICC profile (the sRGB profile shipped inside pikepdf: nothing is
  fetched), so DeviceRGB, and the transparency of a watermark, have a colour space;
- the XMP packet declaring the part and conformance (``pdfaid:part`` 2 or 3, ``B``), in step
  with the document information (title, author, dates), from which missing XMP is filled;
- the Print flag on annotations (Chromium's links), and nothing PDF/A forbids (image
  interpolation, document JavaScript, hidden annotations);
- for PDF/A-3: the MIME type and ``/AFRelationship`` of every embedded file and its place in the
  catalogue's ``/AF`` (the ``attach`` and ``facturx`` stages set them already).

Saved with the flavour's settings (:func:`pikepdf.pdfa.resolve_save_kwargs`), the file gets its
trailer ``/ID``. The page content is never rewritten, so a tagged PDF keeps its structure tree
(Ghostscript's pdfwrite, the other well-kept route, drops the tags).

``prepare`` keeps only the XMP properties PDF/A predefines; the ones an extension schema of the
packet describes (Factur-X's ``fx:``) are put back, with their schema, afterwards.

Before it is saved, :mod:`.pdfacheck` checks what breaks PDF/A most often (a ``.notdef`` glyph,
a font not embedded, no output intent, encryption) and fails the job naming the rule.
The tests validate the result with veraPDF (``scripts/verapdf/install.sh``), never with pikepdf.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING

import pikepdf
import pikepdf.pdfa
from lxml import etree

from . import pdfacheck

if TYPE_CHECKING:
    from . import Inputs

logger = logging.getLogger(__name__)

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
PDFA_EXTENSION = "http://www.aiim.org/pdfa/ns/extension/"
"""``pdfaExtension:schemas``: how a PDF/A XMP packet describes properties PDF/A does not define."""
PDFA_SCHEMA = "http://www.aiim.org/pdfa/ns/schema#"

_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    level = inputs.finish.archival
    assert level is not None
    with pikepdf.open(io.BytesIO(pdf)) as document:
        before = _xmp(document)
        extended = extension_properties(before) if before is not None else []
        changes = pikepdf.pdfa.prepare(document, level)
        if extended:
            assert before is not None
            with document.open_metadata(set_pikepdf_as_editor=False) as xmp:
                xmp.copy_properties(before, extended, overwrite=True)
        for severity, sentence in changes.messages():
            logger.log(
                logging.WARNING if severity == "warning" else logging.DEBUG,
                "job %s, PDF/A-%s: %s",
                inputs.job_id,
                level,
                sentence,
            )
        pdfacheck.check(document)  # never called PDF/A when it plainly is not
        out = io.BytesIO()
        document.save(out, **pikepdf.pdfa.resolve_save_kwargs(level))
        return out.getvalue()


def _xmp(document: pikepdf.Pdf) -> bytes | None:
    packet = document.Root.get("/Metadata")
    return packet.read_bytes() if isinstance(packet, pikepdf.Stream) else None


def extension_properties(xmp: bytes) -> list[str]:
    """The qualified names of ``pdfaExtension:schemas`` and of the properties it describes, as
    the packet ``xmp`` has them (an unreadable packet has none)."""
    try:
        root = etree.fromstring(xmp, _XML)
    except etree.XMLSyntaxError:
        return []
    described = {PDFA_EXTENSION}
    described |= {
        element.text.strip()
        for element in root.iter(f"{{{PDFA_SCHEMA}}}namespaceURI")
        if element.text and element.text.strip()
    }
    names: list[str] = []
    for description in root.iterfind(f".//{{{RDF}}}RDF/{{{RDF}}}Description"):
        names += [child.tag for child in description if isinstance(child.tag, str)]
        names += [name for name in description.attrib if not name.startswith(f"{{{RDF}}}")]
    return [name for name in dict.fromkeys(names) if etree.QName(name).namespace in described]
