"""What breaks PDF/A most often, checked in the renderer on every PDF the farm calls PDF/A, after
the ``pdfa`` stage: a cheap guard, not a validator (the tests keep veraPDF as the judge).

- ISO 19005-2 6.1.3: no encryption (no ``/Encrypt`` in the trailer);
- 6.2.3: an output intent with its ICC profile (the colour of DeviceRGB content);
- 6.2.11.4.1: every font used for rendering embedded (its program in the descriptor);
- 6.2.11.8: no ``.notdef`` glyph shown: what Chromium draws for a character no installed font has
  (the document's own text, which the farm cannot check before the print the way it checks
  the watermark's and the stamp's). Checked for the composite fonts with an identity mapping
  that Chromium's Skia writes for every TrueType and OpenType face: a code is a glyph id, and 0
  is ``.notdef``.

A PDF that fails is a permanent error naming the rule and where (page, font); the job is not
stored as PDF/A. Costs a pass over the page content streams (pikepdf's parser, in C++).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pikepdf

from reportfarm.finishing import FinishError

TEXT_SHOWING = frozenset({"Tj", "TJ", "'", '"'})
READ = "Tf Tj TJ ' \" Do"
"""The operators the check reads: pikepdf's parser makes Python objects of these alone (every
other instruction of a page, most of them, stays in C++)."""
ZEROS = re.compile(rb"<[0-9A-Fa-f\s]*?0\s*0\s*0\s*[0>]")
"""Four zero digits in a hex string, or three at its end (an odd count ends with a 0): where a
two-byte code 0 could be. Chromium shows its glyphs
as hex strings (``<0029> Tj``); without these, and without a literal string, no text of the
content can show ``.notdef``, and only its forms (``Do``) are read."""


def check(document: pikepdf.Pdf) -> None:
    """:class:`FinishError` naming the first PDF/A rule ``document`` breaks, if it breaks one."""
    if "/Encrypt" in document.trailer:
        raise FinishError("PDF/A rule 6.1.3 (no encryption): the file is encrypted")
    intents = document.Root.get("/OutputIntents")
    if not isinstance(intents, pikepdf.Array) or not any(
        isinstance(intent, pikepdf.Dictionary) and "/DestOutputProfile" in intent
        for intent in intents
    ):
        raise FinishError("PDF/A rule 6.2.3 (output intent): no output intent with an ICC profile")
    seen: set[tuple[int, int]] = set()
    for number, page in enumerate(document.pages, start=1):
        _content(page.obj, page.obj.get("/Resources"), number, seen)
        for annotation in page.obj.get("/Annots", []):
            appearance = (
                annotation.get("/AP") if isinstance(annotation, pikepdf.Dictionary) else None
            )
            normal = appearance.get("/N") if isinstance(appearance, pikepdf.Dictionary) else None
            if isinstance(normal, pikepdf.Stream):
                _content(normal, normal.get("/Resources"), number, seen)


def _content(
    owner: pikepdf.Object, resources: object, page: int, seen: set[tuple[int, int]]
) -> None:
    """The text shown by ``owner``'s content (a page or a form XObject), and its forms'."""
    if owner.is_indirect:
        if owner.objgen in seen:
            return
        seen.add(owner.objgen)
    empty = pikepdf.Dictionary()
    fonts: pikepdf.Object = empty
    xobjects: pikepdf.Object = empty
    if isinstance(resources, pikepdf.Dictionary):
        fonts = resources.get("/Font", empty)
        xobjects = resources.get("/XObject", empty)
    for name in fonts.keys():
        _embedded(fonts[name], name, page)
    current: pikepdf.Object | None = None
    current_name = ""
    identity: dict[str, bool] = {}  # by font name: read once, not at every text operator
    operators = READ if _may_show_notdef(owner) else "Do"
    for instruction in pikepdf.parse_content_stream(owner, operators):
        if isinstance(instruction, pikepdf.ContentStreamInlineImage):
            continue
        operands, op = instruction.operands, str(instruction.operator)
        if op == "Tf":
            current_name = str(operands[0])
            current = fonts.get(current_name) if current_name in fonts else None
            if current is not None and current_name not in identity:
                identity[current_name] = _identity(current)
        elif op in TEXT_SHOWING and current is not None and identity[current_name]:
            _shown(operands[0] if op == "TJ" else operands[-1:], current, current_name, page)
        elif op == "Do" and str(operands[0]) in xobjects:
            form = xobjects[str(operands[0])]
            if isinstance(form, pikepdf.Stream) and form.get("/Subtype") == "/Form":
                _content(form, form.get("/Resources", resources), page, seen)


def _may_show_notdef(owner: pikepdf.Object) -> bool:
    """Whether ``owner``'s content (a page's streams, or a form's) holds a literal string or a
    hex string with four zero digits: a cheap pass over its bytes that rules most pages out."""
    contents = owner.get("/Contents") if isinstance(owner, pikepdf.Dictionary) else owner
    if isinstance(owner, pikepdf.Stream):
        contents = owner
    streams = contents if isinstance(contents, pikepdf.Array) else [contents]
    for stream in streams:
        if not isinstance(stream, pikepdf.Stream):
            continue
        data = stream.read_bytes()
        if b"(" in data or ZEROS.search(data):
            return True
    return False


def _shown(strings: Iterable[object], font: pikepdf.Object, name: str, page: int) -> None:
    """Fails when a string shown in ``font`` (an identity-mapped one) holds ``.notdef``."""
    if any(isinstance(item, pikepdf.String) and _has_notdef(bytes(item)) for item in strings):
        raise FinishError(
            f"PDF/A rule 6.2.11.8 (no .notdef glyph): page {page} shows a character "
            f"no installed font draws (font {name} "
            f"{str(font.get('/BaseFont', '?'))[1:]}): a character of the "
            "document's text that no font of the farm has"
        )


def _embedded(font: pikepdf.Object, name: str, page: int) -> None:
    if not isinstance(font, pikepdf.Dictionary) or font.get("/Subtype") == "/Type3":
        return  # a Type 3 font is drawn by content streams: nothing to embed
    for descendant in font.get("/DescendantFonts", [font]):
        descriptor = descendant.get("/FontDescriptor")
        if not isinstance(descriptor, pikepdf.Dictionary) or not any(
            key in descriptor for key in ("/FontFile", "/FontFile2", "/FontFile3")
        ):
            raise FinishError(
                f"PDF/A rule 6.2.11.4.1 (fonts embedded): font {name} "
                f"{str(font.get('/BaseFont', '?'))[1:]} on page {page} is not embedded"
            )


def _identity(font: pikepdf.Object) -> bool:
    """A composite font whose codes are glyph ids (Identity-H, identity CID-to-glyph map)."""
    if font.get("/Subtype") != "/Type0" or font.get("/Encoding") != "/Identity-H":
        return False
    descendants: pikepdf.Object = font.get("/DescendantFonts", pikepdf.Array())
    if len(descendants) != 1:
        return False
    mapping = descendants[0].get("/CIDToGIDMap", pikepdf.Name.Identity)
    return bool(mapping == pikepdf.Name.Identity)


def _has_notdef(codes: bytes) -> bool:
    """Whether a two-byte code of ``codes`` is 0 (``.notdef``), at an even offset."""
    at = codes.find(b"\0\0")
    while at != -1:
        if at % 2 == 0:
            return True
        at = codes.find(b"\0\0", at + 1)
    return False
