"""A warm page's document hidden from the screen (``printing.hidden_from_screen``).

Chromium lays a document out and paints it for the page's screen when it loads, and again for the
print; nobody sees the screen. A ``@media screen`` style after the doctype hides it there, so only
the print's layout runs. What must hold: the document is parsed as it was written (its mode, its
``<html>`` and ``<head>``), it prints the same, pixel for pixel, and what only a layout loads (a
web font) is still loaded and waited for by the print.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pikepdf
import pypdf
import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.async_api import Page, async_playwright
from reportfarm_renderer import browser, local, network, printing, templates

from reportfarm import contract, netpolicy

chromium = pytest.mark.chromium
in_loop = pytest.mark.asyncio(loop_scope="module")

LAB_ADDRESS = "127.0.0.2"
"""A loopback address the test's guard treats as an allowed public host."""
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf")
_SPACE = " \t\n\f\r"


# -- the insertion, on text --------------------------------------------------------------------


@given(
    space=st.text(alphabet=_SPACE, max_size=4),
    keyword=st.sampled_from(["<!DOCTYPE", "<!doctype", "<!DocType"]),
    inside=st.text(alphabet=st.characters(exclude_characters=">"), max_size=40),
    rest=st.text(max_size=80),
)
def test_the_style_goes_right_after_the_doctype(
    space: str, keyword: str, inside: str, rest: str
) -> None:
    """Whatever the doctype holds and whatever follows it (a ``>`` in the rest included)."""
    html = f"{space}{keyword}{inside}>{rest}"
    doctype = f"{space}{keyword}{inside}>"
    assert printing.hidden_from_screen(html) == f"{doctype}{printing.SCREEN_HIDDEN}{rest}"


@given(st.text(max_size=120))
def test_a_document_without_a_leading_doctype_is_left_as_it_is(html: str) -> None:
    if html.lstrip(_SPACE)[:9].lower() == "<!doctype":
        html = f"<p>{html}"
    assert printing.hidden_from_screen(html) == html


def test_an_unclosed_doctype_is_left_as_it_is() -> None:
    assert printing.hidden_from_screen("<!DOCTYPE html") == "<!DOCTYPE html"


# -- the insertion, in Chromium's parser -------------------------------------------------------

DOCTYPES = [
    "<!DOCTYPE html>",
    "<!doctype HTML>",
    "<!DOCTYPE html SYSTEM 'about:legacy-compat'>",
    '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">',  # quirks
    '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" '
    '"http://www.w3.org/TR/html4/loose.dtd">',  # limited quirks
    '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">',  # quirks
    "<!DOCTYPE>",  # no name: quirks
    "<!DOCTYPEhtml>",
    '<!DOCTYPE html PUBLIC "a>b">',  # ends at the quoted ">": quirks
    "",  # none: quirks, nothing inserted
    "<!-- a comment first --><!DOCTYPE html>",  # nothing inserted
]
HTML_TAGS = ["", "<html>", '<html lang="ar" dir="rtl" class="report">', "<HTML LANG=zh>"]
HEADS = [
    "",
    "<head>",
    '<head><meta charset="utf-8"><title>t</title><style>p { color: red }</style></head>',
    "<title>no head tag</title>",
]

SNAPSHOT = """() => {
    const own = (e) => e.tagName === 'STYLE' && e.textContent.includes('display:none!important');
    const d = document;
    return {
        mode: d.compatMode,
        doctype: d.doctype && [d.doctype.name, d.doctype.publicId, d.doctype.systemId],
        html: [...d.documentElement.attributes].map(a => [a.name, a.value]),
        head: [...d.head.children].filter(e => !own(e)).map(e => e.outerHTML),
        body: d.body.innerHTML,
        hidden: getComputedStyle(d.documentElement).display === 'none',
    };
}"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scripted_page() -> AsyncIterator[Page]:
    """A page with JavaScript on, to read back what the parser built."""
    executable = browser.system_chromium()
    if executable is None:
        pytest.skip("no Chromium on this machine")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=executable, args=list(browser.BASE_ARGS)
        )
        try:
            yield await launched.new_page()
        finally:
            await launched.close()


async def parsed(page: Page, html: str) -> dict[str, object]:
    await page.set_content(html)
    return await page.evaluate(SNAPSHOT)


@chromium
@in_loop
async def test_the_parser_builds_the_same_document_with_the_style(scripted_page: Page) -> None:
    """Generated documents (doctypes of every mode, none, a comment first; ``<html>`` with and
    without attributes; heads written, implied and missing): the same mode, doctype, ``<html>``
    attributes, head and body with the style as without it, and the document hidden on screen
    exactly when it begins with a doctype."""
    documents = st.builds(
        lambda space, doctype, html, head, body: f"{space}{doctype}{html}{head}{body}",
        st.text(alphabet=_SPACE, max_size=2),
        st.sampled_from(DOCTYPES),
        st.sampled_from(HTML_TAGS),
        st.sampled_from(HEADS),
        st.sampled_from(["<p>text</p>", "<body class=b><table><tr><td>1</table>", "plain"]),
    )
    seen: list[str] = []

    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(documents)
    def check(html: str) -> None:
        seen.append(html)

    check()
    modes = set()
    for html in dict.fromkeys(seen):
        plain = await parsed(scripted_page, html)
        hidden = await parsed(scripted_page, printing.hidden_from_screen(html))
        starts_with_doctype = html.lstrip(_SPACE)[:9].lower() == "<!doctype"
        assert hidden.pop("hidden") is starts_with_doctype, html
        assert plain.pop("hidden") is False, html
        assert hidden == plain, html
        modes.add(plain["mode"])
    assert modes == {"CSS1Compat", "BackCompat"}  # both modes were generated


# -- printing ----------------------------------------------------------------------------------


async def worker_for(
    launcher: browser.ChromiumLauncher,
) -> browser.ChromiumWorker:
    return await launcher.new_worker(pages=1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def launchers() -> AsyncIterator[dict[bool, browser.ChromiumLauncher]]:
    """Launchers with the screen hidden (True, the default) and shown."""
    if browser.system_chromium() is None:
        pytest.skip("no Chromium on this machine")
    started: dict[bool, browser.ChromiumLauncher] = {}
    try:
        for hide in (True, False):
            started[hide] = browser.ChromiumLauncher(
                executable_path=browser.system_chromium(), hide_screen=hide
            )
            await started[hide].start()
        yield started
    finally:
        for launcher in started.values():
            await launcher.close()


SCRIPTS = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><style>
body { font-family: sans-serif } td { border: 1px solid #999; padding: 2px 6px }</style></head>
<body><h1>Statement in many scripts</h1><table>
<tr><td lang="el">Αγαπητέ πελάτη, υπόλοιπο 1.234,56 €</td><td lang="ru">Остаток 1 234,56 €</td></tr>
<tr><td lang="ar" dir="rtl">رصيد حسابك هو 1234.56 يورو</td><td lang="he" dir="rtl">היתרה היא 1,234.56</td></tr>
<tr><td lang="hi">आपका शेष ₹1,234.56 है</td><td lang="bn">আপনার ব্যালেন্স ১,২৩৪.৫৬</td></tr>
<tr><td lang="th">ยอดคงเหลือของคุณคือ 1,234.56 บาท</td><td lang="ta">உங்கள் இருப்பு 1,234.56</td></tr>
<tr><td lang="zh">您的余额为 1,234.56 元</td><td lang="ka">თქვენი ბალანსი 1,234.56</td></tr>
</table></body></html>"""
"""A statement in scripts beyond Latin and CJK (the fonts come from Chromium's fallback)."""


def raster(pdf: bytes, folder: Path, name: str) -> list[bytes]:
    """Every page as a 50 dpi PNG (poppler's pdftoppm)."""
    source = folder / f"{name}.pdf"
    source.write_bytes(pdf)
    subprocess.run(["pdftoppm", "-r", "50", "-png", source, folder / name], check=True)
    return [path.read_bytes() for path in sorted(folder.glob(f"{name}-*.png"))]


def pdf_text(pdf: bytes) -> str:
    return "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)


@chromium
@in_loop
async def test_the_example_reports_print_the_same_pixel_for_pixel(
    launchers: dict[bool, browser.ChromiumLauncher], tmp_path: Path
) -> None:
    """Every example report and a statement in many scripts, through a warm page with the screen
    hidden and shown: the same pages, pixel for pixel at 50 dpi, and the same text. The warm page that hid its screen shows nothing
    there (its screenshot is a blank page's); the other shows the report."""
    if shutil.which("pdftoppm") is None:
        pytest.skip("no pdftoppm (poppler-utils) on this machine")
    catalog = templates.TemplateCatalog.load(local.EXAMPLES / "templates")
    documents = [
        (item.template, catalog.render(item.template, item.data), item.pdf)
        for item in local.example_submissions(None)
    ]
    documents.append(("scripts", SCRIPTS, None))
    workers = {hide: await worker_for(launcher) for hide, launcher in launchers.items()}
    try:
        for n, (name, html, pdf_options) in enumerate(documents):
            assert printing.hidden_from_screen(html) != html  # each begins with a doctype
            options = pdf_options or contract.PdfOptions()
            pdfs = {
                hide: await worker.render(html, options, javascript=False)
                for hide, worker in workers.items()
            }
            pages = {hide: raster(pdf, tmp_path, f"{n}-{hide}") for hide, pdf in pdfs.items()}
            assert pages[True] and pages[True] == pages[False], name
            assert pdf_text(pdfs[True]) == pdf_text(pdfs[False])
        shots = {}
        for hide, worker in workers.items():
            (warm,) = worker._free
            assert warm.page is not None
            blank = await warm.page.context.new_page()
            await blank.set_content("<!DOCTYPE html>")
            shots[hide] = (await warm.page.screenshot(), await blank.screenshot())
            await blank.close()
        assert shots[True][0] == shots[True][1]
        assert shots[False][0] != shots[False][1]
    finally:
        for worker in workers.values():
            await worker.close()


class SlowFont:
    """An allowed host that serves a TrueType font after a pause, and counts the requests."""

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s
        self.requests = 0
        app = web.Application()
        app.router.add_get("/font.ttf", self._font)
        self.runner = web.AppRunner(app, access_log=None)
        self.port = 0

    async def _font(self, request: web.Request) -> web.Response:
        self.requests += 1
        await asyncio.sleep(self.pause_s)
        headers = {"Access-Control-Allow-Origin": "*"}
        return web.Response(body=FONT.read_bytes(), content_type="font/ttf", headers=headers)

    def document(self, n: int) -> str:
        return (
            "<!DOCTYPE html><style>@font-face { font-family: Slow; src: "
            f"url(http://{LAB_ADDRESS}:{self.port}/font.ttf?{n}) }}"
            "p { font-family: Slow, monospace; font-size: 24px }</style><p>a web font</p>"
        )


def font_names(pdf: bytes) -> set[str]:
    names = set()
    for page in pypdf.PdfReader(io.BytesIO(pdf)).pages:
        resources: Any = page["/Resources"].get_object()
        fonts = resources.get("/Font", {})
        for font in fonts.values():
            names.add(str(font.get_object()["/BaseFont"]).split("+")[-1])
    return names


@chromium
@in_loop
async def test_a_web_font_only_a_layout_loads_is_printed_when_the_screen_is_hidden() -> None:
    """A web font is loaded when text needs it, by a layout: with the screen hidden, the print's.
    Served after 0.5 s from an allowed host, it is in the PDF with the screen hidden as with it
    shown (the print waits for it), and was asked for each time."""
    if not FONT.exists() or browser.system_chromium() is None:
        pytest.skip("no DejaVu Serif Bold or no Chromium on this machine")
    server = SlowFont(pause_s=0.5)
    await server.runner.setup()
    site = web.TCPSite(server.runner, LAB_ADDRESS, 0)
    await site.start()
    server.port = server.runner.addresses[0][1]
    try:
        for n, hide in enumerate((True, False)):
            guard = network.NetworkGuard(
                policy=netpolicy.NetworkPolicy.for_documents(
                    [LAB_ADDRESS], allowed_networks=netpolicy.parse_networks([LAB_ADDRESS])
                )
            )
            async with browser.ChromiumLauncher(
                executable_path=browser.system_chromium(), guard=guard, hide_screen=hide
            ) as launcher:
                worker = await worker_for(launcher)
                try:
                    asked = server.requests
                    pdf = await worker.render(
                        server.document(n), contract.PdfOptions(), javascript=False
                    )
                finally:
                    await worker.close()
            assert server.requests == asked + 1
            assert "DejaVuSerif-Bold" in font_names(pdf), (hide, font_names(pdf))
    finally:
        await server.runner.cleanup()


def structure(pdf: bytes) -> tuple[list[str], int]:
    """The tagged PDF's structure elements' roles, depth first, and its outline's entries."""
    with pikepdf.open(io.BytesIO(pdf)) as document:
        roles: list[str] = []
        stack = [document.Root.StructTreeRoot]
        while stack:
            element = stack.pop()
            roles.append(str(element.get("/S", "root")))
            kids: Any = element.get("/K")
            if isinstance(kids, pikepdf.Dictionary):
                kids = [kids]
            if isinstance(kids, pikepdf.Array | list):
                stack += reversed([kid for kid in kids if isinstance(kid, pikepdf.Dictionary)])
        entries, item = 0, document.Root.Outlines.get("/First")
        while item is not None:
            entries, item = entries + 1, item.get("/Next")
    return roles, entries


@chromium
@in_loop
async def test_a_tagged_pdf_keeps_its_structure_when_the_screen_is_hidden(
    launchers: dict[bool, browser.ChromiumLauncher],
) -> None:
    """A tagged PDF's structure comes from the document's accessibility tree, and its outline from
    the headings: the example reports printed tagged with an outline have the same structure
    elements, in the same order, and the same outline, hidden and shown."""
    catalog = templates.TemplateCatalog.load(local.EXAMPLES / "templates")
    options = contract.PdfOptions(tagged=True, outline=True)
    workers = {hide: await worker_for(launcher) for hide, launcher in launchers.items()}
    try:
        for item in local.example_submissions(None)[:3]:
            html = catalog.render(item.template, item.data)
            found = {
                hide: structure(await worker.render(html, options, javascript=False))
                for hide, worker in workers.items()
            }
            roles, entries = found[True]
            assert len(roles) > 100 and entries > 0, item.template
            assert found[True] == found[False], item.template
    finally:
        for worker in workers.values():
            await worker.close()
