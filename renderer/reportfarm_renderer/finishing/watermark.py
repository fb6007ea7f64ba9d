"""The watermark: text across every page (DRAFT, COPY, PAID), added to the HTML before the print.

A ``position: fixed`` element is printed by Chromium on every page, so the text is real text in
an embedded font (as PDF/A requires; the document's own), drawn over the content, and costs
nothing after the print.
It is ``aria-hidden``: a screen reader does not read DRAFT on every page of a tagged PDF."""

from __future__ import annotations

import html
import re

from reportfarm.finishing import Watermark

_BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)


def markup(mark: Watermark) -> str:
    # The text fits the page: at most font_size_pt, and small enough that its length (a glyph is
    # ~0.62 em wide) spans no more than 90 % of the page width (vw, in print: the page). It is set
    # in the document's own font: a face of its own (bold sans-serif) made the print 1.6x slower
    # (reportfarm bench finish), all of it embedding one more font; in the document's font it
    # costs nothing.
    fit = 90 / (0.62 * max(1, len(mark.text)))
    style = (
        "position:fixed;left:50%;top:50%;z-index:2147483647;pointer-events:none;margin:0;"
        "white-space:nowrap;line-height:1;"
        f"font-size:min({mark.font_size_pt:g}pt,{fit:.2f}vw);color:{mark.color};opacity:{mark.opacity:g};"
        f"transform:translate(-50%,-50%) rotate({mark.angle:g}deg);"
        "-webkit-print-color-adjust:exact;print-color-adjust:exact"
    )
    text = html.escape(mark.text)
    return f'<div aria-hidden="true" data-reportfarm-watermark style="{style}">{text}</div>'


def apply(document: str, mark: Watermark) -> str:
    """``document`` with the watermark as the last element of its body."""
    element = markup(mark)
    ends = list(_BODY_END.finditer(document))
    if not ends:
        return document + element
    cut = ends[-1].start()
    return document[:cut] + element + document[cut:]
