"""Printing through CDP: ``Page.printToPDF`` with ``transferMode: ReturnAsStream``, read in chunks.

Playwright's ``page.pdf()`` prints to a stream too, but its driver reads the whole stream, joins
it and sends it to Python as one base64 string: three copies of the PDF at once, sized by the
document. Here the stream is read chunk by chunk (``IO.read`` of :data:`CHUNK_BYTES`), so what
this process holds is one chunk, whatever the page count:

- a PDF that ends within its first chunk (almost every report) is returned whole, and the
  caller stores it in one request after the browser is free again;
- a longer one goes, chunk after chunk, to the caller's :class:`~reportfarm_renderer.pool.Sink`
  (the blob's blocks) while the browser waits: the price of bounded memory is a browser held for
  the upload, paid only by documents too big to hold.

:func:`print_params` maps :class:`~reportfarm.contract.PdfOptions` to the CDP parameters exactly
as Playwright 1.65 does in ``crPdf.ts`` (inches from px/in/cm/mm at 96 px per inch, its paper
table; tagged PDF and the outline only when the job asks), so both paths print the same
document (a test compares them).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from playwright.async_api import CDPSession
from playwright.async_api import Error as PlaywrightError

from reportfarm import contract
from reportfarm_renderer import pool

CHUNK_BYTES = 2**20
"""Bytes asked for per ``IO.read``: a PDF up to this size is returned whole (one upload)."""

_PAPER_INCHES = {
    "letter": (8.5, 11.0),
    "legal": (8.5, 14.0),
    "tabloid": (11.0, 17.0),
    "ledger": (17.0, 11.0),
    "a0": (33.1, 46.8),
    "a1": (23.4, 33.1),
    "a2": (16.54, 23.4),
    "a3": (11.7, 16.54),
    "a4": (8.27, 11.7),
    "a5": (5.83, 8.27),
    "a6": (4.13, 5.83),
}
"""Playwright's paper formats, in inches (its table, not ISO's exact sizes)."""
_PIXELS = {"px": 1.0, "in": 96.0, "cm": 37.8, "mm": 3.78}


SCREEN_HIDDEN = "<style>@media screen{html{display:none!important}}</style>"
"""The style that hides a warm page's document from the screen (see :func:`hidden_from_screen`)."""
_HTML_SPACE = " \t\n\f\r"


def hidden_from_screen(html: str) -> str:
    """``html`` with :data:`SCREEN_HIDDEN` inserted right after its doctype, so that Chromium
    neither lays the document out nor paints it for a screen that nobody sees; the print lays it
    out for its pages anyway, in print media, where the style does not apply. Measured on the
    example reports, about a fifth of the browser's CPU a PDF (see ``docs/benchmarks/sync.md``),
    with the same pages pixel for pixel. What the screen's layout would have loaded (web fonts,
    background images) the print loads, and waits for.

    After the doctype, so the document's mode (standards or quirks) and everything it wrote stay
    as they were: the HTML parser puts the style in the head it opens, and the document's own
    ``<html>`` and ``<head>`` tags still apply. A document that does not begin with a doctype
    (after whitespace) is returned as it is: what comes before the first tag decides its mode,
    and only a doctype is known not to change by what follows it. For a page without JavaScript
    only: a script may measure the layout."""
    start = len(html) - len(html.lstrip(_HTML_SPACE))
    if html[start : start + 9].lower() != "<!doctype":
        return html
    end = html.find(">", start)  # the tokenizer ends a doctype at its first ">", quoted or not
    if end < 0:
        return html
    return f"{html[: end + 1]}{SCREEN_HIDDEN}{html[end + 1 :]}"


def inches(length: str | None) -> float | None:
    """A contract length (``10mm``, ``1in``, ``96``: px without a unit) in inches."""
    if length is None:
        return None
    unit = length[-2:].lower()
    if unit in _PIXELS:
        number = length[:-2]
    else:
        unit, number = "px", length
    return float(number) * _PIXELS[unit] / 96


def print_params(options: contract.PdfOptions) -> dict[str, Any]:
    """``Page.printToPDF``'s parameters for ``options``, as ``page.pdf(**playwright_kwargs())``
    would send them."""
    kwargs = options.playwright_kwargs()
    width, height = 8.5, 11.0
    if kwargs.get("format"):
        width, height = _PAPER_INCHES[kwargs["format"].lower()]
    else:
        width = inches(kwargs.get("width")) or width
        height = inches(kwargs.get("height")) or height
    margin = kwargs["margin"]
    return {
        "transferMode": "ReturnAsStream",
        "landscape": kwargs["landscape"],
        "displayHeaderFooter": kwargs["display_header_footer"],
        "headerTemplate": kwargs.get("header_template", ""),
        "footerTemplate": kwargs.get("footer_template", ""),
        "printBackground": kwargs["print_background"],
        "scale": kwargs["scale"],
        "paperWidth": width,
        "paperHeight": height,
        "marginTop": inches(margin["top"]) or 0,
        "marginBottom": inches(margin["bottom"]) or 0,
        "marginLeft": inches(margin["left"]) or 0,
        "marginRight": inches(margin["right"]) or 0,
        "pageRanges": "",
        "preferCSSPageSize": kwargs["prefer_css_page_size"],
        "generateTaggedPDF": kwargs["tagged"],
        "generateDocumentOutline": kwargs["outline"],
    }


async def print_pdf(
    cdp: CDPSession,
    options: contract.PdfOptions,
    *,
    sink: pool.Sink | None,
    chunk_bytes: int = CHUNK_BYTES,
) -> bytes | None:
    """Print the session's page. Returns the PDF whole if it ended in its first chunk (or no
    ``sink`` was given: then every chunk is joined), else None once every chunk went to ``sink``.

    A Playwright error is the caller's to classify (see ``browser.py``); an error raised by the
    sink comes out as :class:`~reportfarm_renderer.pool.OutputFailed`. The stream is always
    closed: Chromium holds the whole PDF until it is."""
    printed = await cdp.send("Page.printToPDF", print_params(options))
    handle = printed["stream"]
    try:
        chunks = _chunks(cdp, handle, chunk_bytes)
        first = await anext(chunks, b"")
        second = await anext(chunks, None)  # the stream may say "eof" only on an empty read
        if second is None:
            return first
        if sink is None:
            return b"".join([first, second, *[chunk async for chunk in chunks]])
        await _write(sink, first)
        await _write(sink, second)
        async for chunk in chunks:
            await _write(sink, chunk)
        return None
    finally:
        with contextlib.suppress(PlaywrightError):
            await cdp.send("IO.close", {"handle": handle})


async def _chunks(cdp: CDPSession, handle: str, size: int) -> AsyncIterator[bytes]:
    """The stream's non-empty chunks, up to ``size`` bytes each, until its end."""
    eof = False
    while not eof:
        read = await cdp.send("IO.read", {"handle": handle, "size": size})
        data, eof = read.get("data", ""), bool(read.get("eof"))
        if data:
            yield base64.b64decode(data) if read.get("base64Encoded") else data.encode()


async def _write(sink: pool.Sink, chunk: bytes) -> None:
    try:
        await sink.write(chunk)
    except Exception as error:
        raise pool.OutputFailed(error) from error
