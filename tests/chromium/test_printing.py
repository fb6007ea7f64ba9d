"""Printing through CDP with ``transferMode: ReturnAsStream``, against a real Chromium.

The stream path must print what Playwright's ``page.pdf()`` prints (same pages, sizes, text) for
every option the contract has; a PDF longer than a chunk must come out whole, through the sink or
joined; a sink that fails must stop the print without costing the browser.
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator

import pypdf
import pytest
import pytest_asyncio
from reportfarm_renderer import browser, printing
from reportfarm_renderer import pool as pooling

from reportfarm import contract

pytestmark = [pytest.mark.chromium, pytest.mark.asyncio(loop_scope="module")]

SMALL_CHUNK = 8 * 1024
PAGES_HTML = (
    "<style>p { font-size: 11pt; margin: 0 0 4pt; }</style><h1>月末账单 statement</h1>"
    + "".join(f"<p>第 {i} 行 line {i}: 临考词汇突击 vocabulary sprint</p>" for i in range(160))
)
"""About four A4 pages of Chinese and Latin text (over :data:`SMALL_CHUNK` as a PDF)."""

CASES = [
    pytest.param(contract.PdfOptions(), id="defaults"),
    pytest.param(
        contract.PdfOptions(
            format="Letter",
            landscape=True,
            margin_top="10mm",
            margin_right="1in",
            margin_bottom="2cm",
            margin_left="24",
            scale=0.8,
            print_background=False,
            prefer_css_page_size=False,
        ),
        id="letter-landscape-margins-scale",
    ),
    pytest.param(
        contract.PdfOptions(
            format=None,
            width="150mm",
            height="200mm",
            margin_top="20mm",
            margin_bottom="20mm",
            display_header_footer=True,
            header_template="<span style='font-size:8px'>页眉 header</span>",
            footer_template="<span style='font-size:8px'><span class='pageNumber'></span></span>",
        ),
        id="custom-size-header-footer",
    ),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def launcher() -> AsyncIterator[browser.ChromiumLauncher]:
    started = browser.ChromiumLauncher(chunk_bytes=SMALL_CHUNK)
    await started.start()
    bundled = started.playwright.chromium.executable_path
    if started.executable_path is None and not os.path.exists(bundled):
        await started.close()
        pytest.skip("no Chromium on this machine")
    yield started
    await started.close()


class Replacements:
    """Pool events: only replacements are kept."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def borrow_waited(self, seconds: float) -> None:
        pass

    def render_finished(self, seconds: float, ok: bool) -> None:
        pass

    def worker_replaced(self, reason: str) -> None:
        self.reasons.append(reason)

    def worker_recycled(self, reason: str) -> None:
        pass


REPLACEMENTS = Replacements()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool(launcher: browser.ChromiumLauncher) -> AsyncIterator[pooling.BrowserPool]:
    async with pooling.BrowserPool(
        launcher.new_worker,
        size=1,
        borrow_timeout=30,
        launch_timeout=30,
        render_timeout=60,
        events=REPLACEMENTS,
    ) as started:
        yield started


class Chunks:
    """A sink that keeps what it gets; ``fail_at``: raise on that chunk (0-based)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.chunks: list[bytes] = []
        self.fail_at = fail_at

    async def write(self, chunk: bytes) -> None:
        if len(self.chunks) == self.fail_at:
            raise OSError("the blob store refused a block")
        self.chunks.append(chunk)


def pages(pdf: bytes) -> list[tuple[tuple[float, float], str]]:
    """Each page's size in points and its text."""
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    return [
        (
            (round(float(page.mediabox.width)), round(float(page.mediabox.height))),
            page.extract_text(),
        )
        for page in reader.pages
    ]


@pytest.mark.parametrize("options", CASES)
@pytest.mark.parametrize("javascript", [False, True], ids=["warm", "isolated"])
async def test_the_stream_prints_what_page_pdf_prints(
    launcher: browser.ChromiumLauncher,
    pool: pooling.BrowserPool,
    options: contract.PdfOptions,
    javascript: bool,
) -> None:
    reference = await launcher.playwright.chromium.launch(
        executable_path=launcher.executable_path, args=list(browser.BASE_ARGS)
    )
    try:
        page = await reference.new_page()
        await page.set_content(PAGES_HTML, wait_until="load")
        expected = pages(await page.pdf(**options.playwright_kwargs()))
    finally:
        await reference.close()
    printed = pages(await pool.render(PAGES_HTML, options, javascript=javascript))
    assert len(expected) > 1
    assert printed == expected


async def test_a_pdf_longer_than_a_chunk_goes_to_the_sink_whole(pool: pooling.BrowserPool) -> None:
    whole = await pool.render(PAGES_HTML, contract.PdfOptions())
    assert len(whole) > 3 * SMALL_CHUNK  # joined from several chunks when no sink is given
    sink = Chunks()
    assert await pool.render(PAGES_HTML, contract.PdfOptions(), sink=sink) is None
    assert len(sink.chunks) > 3
    assert all(0 < len(chunk) <= SMALL_CHUNK for chunk in sink.chunks)
    assert pages(b"".join(sink.chunks)) == pages(whole)


async def test_a_pdf_within_one_chunk_is_returned_whole_and_the_sink_stays_unused(
    pool: pooling.BrowserPool,
) -> None:
    sink = Chunks()
    pdf = await pool.render("<p>one page</p>", contract.PdfOptions(), sink=sink)
    assert pdf is not None and len(pdf) <= SMALL_CHUNK
    assert "one page" in pages(pdf)[0][1]
    assert sink.chunks == []


@pytest.mark.parametrize("javascript", [False, True], ids=["warm", "isolated"])
async def test_a_failing_sink_stops_the_print_and_the_browser_serves_on(
    pool: pooling.BrowserPool, javascript: bool
) -> None:
    sink = Chunks(fail_at=1)
    replaced = len(REPLACEMENTS.reasons)
    with pytest.raises(OSError, match="refused a block"):
        await pool.render(PAGES_HTML, contract.PdfOptions(), javascript=javascript, sink=sink)
    assert len(sink.chunks) == 1
    after = await pool.render("<p>after</p>", contract.PdfOptions(), javascript=javascript)
    assert "after" in pages(after)[0][1]
    assert len(REPLACEMENTS.reasons) == replaced  # the browser was not charged


async def test_lengths_convert_to_inches_as_playwright_does() -> None:
    assert printing.inches("96") == 1.0
    assert printing.inches("1in") == 1.0
    assert printing.inches("25.4mm") == pytest.approx(25.4 * 3.78 / 96)
    assert printing.inches("2cm") == pytest.approx(2 * 37.8 / 96)
    params = printing.print_params(contract.PdfOptions(format="A4"))
    assert (params["paperWidth"], params["paperHeight"]) == (8.27, 11.7)
    assert params["transferMode"] == "ReturnAsStream"
