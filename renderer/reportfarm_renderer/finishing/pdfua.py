"""The ``pdfua`` stage: a tagged PDF (``pdf.tagged``) with ``finish.metadata`` becomes PDF/UA-1.

What Chromium's tags give: a structure tree from the HTML (headings, paragraphs, tables with TH,
lists, figures with the ``alt`` of images), marked content for the text it tags, ``/MarkInfo``.
What they cannot give, and what this stage adds:

- list items' bodies: Chromium tags a list item's label (``Lbl``) but puts its content in a
  ``NonStruct``; it becomes the ``LBody`` PDF/UA expects;
- the PDF/UA identification (``pdfuaid:part`` 1) in the XMP, with the PDF/A extension schema that
  describes it (so the ``pdfa`` stage, which keeps only described properties, keeps it; and a
  Factur-X schema already there is kept beside it);
- content that is neither tagged nor an artifact: Chromium draws backgrounds, borders, rules and
  the paths of inline SVG (the examples' charts) outside any marked content. Each such run of
  the page's content is marked ``/Artifact``: decoration a screen reader skips. A chart that
  means something is described by its HTML (``role="img"`` with ``aria-label``, which Chromium
  tags as a Figure with that alternative text); its paths are then the Figure's drawing.

The title shown (``DisplayDocTitle``) and ``/Lang`` are the ``metadata`` stage's. An untagged PDF
passes through unchanged. The tests judge the result with veraPDF's PDF/UA-1 profile.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import pikepdf
from lxml import etree
from pikepdf.models import metadata as xmp_names

if TYPE_CHECKING:
    from . import Inputs

RDF = f"{{{xmp_names.XMP_NS_RDF}}}"
EXT = f"{{{xmp_names.XMP_NS_PDFA_EXTENSION}}}"
SCHEMA = f"{{{xmp_names.XMP_NS_PDFA_SCHEMA}}}"
PROPERTY = f"{{{xmp_names.XMP_NS_PDFA_PROPERTY}}}"
UA = xmp_names.XMP_NS_PDFUA_ID
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    with pikepdf.open(io.BytesIO(pdf)) as document:
        if "/StructTreeRoot" not in document.Root:
            return pdf  # not tagged: not a PDF/UA candidate
        for page in document.pages:
            mark_artifacts(document, page.obj, page.obj.get("/Resources"))
        for table in _elements(document.Root.StructTreeRoot, "/Table"):
            fill_rows(document, table)
        for item in _elements(document.Root.StructTreeRoot, "/LI"):
            give_body(document, item)
        with document.open_metadata(set_pikepdf_as_editor=False) as xmp:
            xmp["pdfuaid:part"] = "1"
        document.Root.Metadata = document.make_stream(
            describe_pdfuaid(document.Root.Metadata.read_bytes()),
            Type=pikepdf.Name.Metadata,
            Subtype=pikepdf.Name.XML,
        )
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()


def mark_artifacts(document: pikepdf.Pdf, owner: pikepdf.Object, resources: object) -> None:
    """Every run of the content of ``owner`` (a page, or a form XObject that holds tagged
    content) outside marked content, wrapped as ``/Artifact``; a tagged form it draws is not
    wrapped, but gets the same treatment inside."""
    instructions = list(pikepdf.parse_content_stream(owner))
    out: list[pikepdf.ContentStreamInstruction | pikepdf.ContentStreamInlineImage] = []
    depth = 0
    pending: list[pikepdf.ContentStreamInstruction | pikepdf.ContentStreamInlineImage] = []

    def flush() -> None:
        if any(_paints(item) for item in pending):
            out.append(
                pikepdf.ContentStreamInstruction([pikepdf.Name.Artifact], pikepdf.Operator("BMC"))
            )
            out.extend(pending)
            out.append(pikepdf.ContentStreamInstruction([], pikepdf.Operator("EMC")))
        else:
            out.extend(pending)
        pending.clear()

    for item in instructions:
        operator = "" if isinstance(item, pikepdf.ContentStreamInlineImage) else str(item.operator)
        if operator in ("BDC", "BMC"):
            if depth == 0:
                flush()
            depth += 1
            out.append(item)
        elif operator == "EMC":
            depth = max(0, depth - 1)
            out.append(item)
        elif depth == 0 and (form := _tagged_form(item, resources)) is not None:
            flush()
            out.append(item)
            mark_artifacts(document, form, form.get("/Resources", resources))
        elif depth == 0:
            pending.append(item)
        else:
            out.append(item)
    flush()
    content = pikepdf.unparse_content_stream(out)
    if isinstance(owner, pikepdf.Stream):  # a form XObject: its own stream
        owner.write(content)
    else:
        owner.Contents = document.make_stream(content)


def _elements(node: pikepdf.Object, kind: str) -> list[pikepdf.Dictionary]:
    """The structure elements of type ``kind`` under ``node``."""
    found, pending = [], [node.get("/K")]
    while pending:
        item = pending.pop()
        if isinstance(item, pikepdf.Array):
            pending.extend(item)
        elif isinstance(item, pikepdf.Dictionary) and "/S" in item:
            if item.S == kind:
                found.append(item)
            pending.append(item.get("/K"))
    return found


def _kids(element: pikepdf.Dictionary) -> list[pikepdf.Dictionary]:
    kids = element.get("/K")
    items = list(kids) if isinstance(kids, pikepdf.Array) else [kids]
    return [kid for kid in items if isinstance(kid, pikepdf.Dictionary) and "/S" in kid]


def _span(cell: pikepdf.Dictionary, key: str) -> int:
    attributes = cell.get("/A")
    for attribute in attributes if isinstance(attributes, pikepdf.Array) else [attributes]:
        if isinstance(attribute, pikepdf.Dictionary) and key in attribute:
            return int(attribute[key])
    return 1


def fill_rows(document: pikepdf.Pdf, table: pikepdf.Dictionary) -> None:
    """Rows of ``table`` given empty cells up to its widest row: Chromium tags no TD for an
    empty ``<td>``, and PDF/UA wants every row as wide as the table (veraPDF 7.2-43). Tables
    with cells spanning rows are left as they are."""
    rows = [
        row
        for part in _kids(table)
        for row in (_kids(part) if part.S in ("/THead", "/TBody", "/TFoot") else [part])
        if row.S == "/TR"
    ]
    cells = {id(row): _kids(row) for row in rows}
    if any(_span(cell, "/RowSpan") > 1 for row in rows for cell in cells[id(row)]):
        return
    widths = [sum(_span(cell, "/ColSpan") for cell in cells[id(row)]) for row in rows]
    for row, width in zip(rows, widths, strict=True):
        missing = max(widths, default=0) - width
        if missing <= 0:
            continue
        kids = row.get("/K")
        kids = pikepdf.Array(kids if isinstance(kids, pikepdf.Array) else [kids] if kids else [])
        for _ in range(missing):
            cell = pikepdf.Dictionary(Type=pikepdf.Name.StructElem, S=pikepdf.Name.TD, P=row)
            kids.append(document.make_indirect(cell))
        row.K = kids


def give_body(document: pikepdf.Pdf, item: pikepdf.Dictionary) -> None:
    """A list item's content under an ``LBody`` beside its ``Lbl``: Chromium puts it in a
    ``NonStruct`` (retyped as the LBody, so the parent tree still points right) or leaves it."""
    kids = _kids(item)
    if any(kid.S == "/LBody" for kid in kids):
        return
    rest = [kid for kid in kids if kid.S != "/Lbl"]
    if len(rest) == 1 and rest[0].S == "/NonStruct":
        rest[0].S = pikepdf.Name.LBody
        return
    content = item.get("/K")
    direct = content if isinstance(content, pikepdf.Array) else [content]
    if not rest or len(kids) != len([kid for kid in direct if kid is not None]):
        return  # marked content straight under the item: left as Chromium made it
    body = document.make_indirect(
        pikepdf.Dictionary(Type=pikepdf.Name.StructElem, S=pikepdf.Name.LBody, P=item)
    )
    body.K = pikepdf.Array(rest)
    for kid in rest:
        kid.P = body
    item.K = pikepdf.Array([*(kid for kid in kids if kid.S == "/Lbl"), body])


def _tagged_form(
    item: pikepdf.ContentStreamInstruction | pikepdf.ContentStreamInlineImage, resources: object
) -> pikepdf.Stream | None:
    """The form XObject ``item`` draws (``Do``), if its content is tagged (marked with MCIDs)."""
    if isinstance(item, pikepdf.ContentStreamInlineImage) or str(item.operator) != "Do":
        return None
    xobjects = resources.get("/XObject") if isinstance(resources, pikepdf.Dictionary) else None
    form = xobjects.get(str(item.operands[0])) if isinstance(xobjects, pikepdf.Dictionary) else None
    if not isinstance(form, pikepdf.Stream) or form.get("/Subtype") != "/Form":
        return None
    return form if b"/MCID" in form.read_bytes() else None


PAINTING = frozenset(
    {"S", "s", "f", "F", "f*", "B", "B*", "b", "b*", "sh", "Do", "Tj", "TJ", "'", '"'}
)


def _paints(item: pikepdf.ContentStreamInstruction | pikepdf.ContentStreamInlineImage) -> bool:
    return isinstance(item, pikepdf.ContentStreamInlineImage) or str(item.operator) in PAINTING


def describe_pdfuaid(packet: bytes) -> bytes:
    """``packet`` with the PDF/A extension schema that describes ``pdfuaid:part``, added to the
    packet's ``pdfaExtension:schemas`` (created if it has none)."""
    root = etree.fromstring(packet, _XML)
    if any(node.text == UA for node in root.iter(f"{SCHEMA}namespaceURI")):
        return packet
    bag = root.find(f".//{EXT}schemas/{RDF}Bag")
    if bag is None:
        description = root.find(f".//{RDF}RDF/{RDF}Description")
        assert description is not None  # pikepdf wrote one
        bag = etree.SubElement(etree.SubElement(description, f"{EXT}schemas"), f"{RDF}Bag")
    item = etree.SubElement(bag, f"{RDF}li", {f"{RDF}parseType": "Resource"})
    for name, text in (("schema", "PDF/UA identification"), ("namespaceURI", UA)):
        etree.SubElement(item, f"{SCHEMA}{name}").text = text
    etree.SubElement(item, f"{SCHEMA}prefix").text = "pdfuaid"
    prop = etree.SubElement(
        etree.SubElement(etree.SubElement(item, f"{SCHEMA}property"), f"{RDF}Seq"),
        f"{RDF}li",
        {f"{RDF}parseType": "Resource"},
    )
    for name, text in (
        ("name", "part"),
        ("valueType", "Integer"),
        ("category", "internal"),
        ("description", "The part of ISO 14289 the document conforms to"),
    ):
        etree.SubElement(prop, f"{PROPERTY}{name}").text = text
    return etree.tostring(root.getroottree(), encoding="utf-8")
