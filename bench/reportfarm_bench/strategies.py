"""The ways to print, each an async context manager that yields a :data:`Job`.

All of them use the same Chromium binary (the launcher's: the headless shell when installed) and
launch flags (:data:`browser.BASE_ARGS`), except ``ceiling_today``:

- ``browser_per_job``: launch a browser, open a page, print, close the browser.
- ``context_per_job``: the reference design: one browser per lane, a new BrowserContext and Page
  per job, closed after (Playwright's defaults, as the design had them; no network guard).
- ``reportfarm``: our :class:`~reportfarm_renderer.pool.BrowserPool` of
  :meth:`~reportfarm_renderer.browser.ChromiumLauncher.new_worker` workers (warm page, reset,
  real network guard) with the production pool settings, and the template rendered per job
  (``render_html`` in a thread, as the job runner does).
- ``site_isolated``: ``reportfarm`` with Chromium's default site isolation trials, which the farm
  turns off (:data:`browser.STABILITY_ARGS`: with them, a ``data:`` subframe then an
  ``<iframe srcdoc>`` kills the browser): the ratio of the two is what the fix costs.
- ``ceiling``: one warm page per lane (JavaScript off and the document hidden from the screen, as
  our warm page: ``printing.hidden_from_screen``) printing pre-rendered HTML: ``set_content`` and
  ``pdf`` and nothing else: no guard, no reset, no pool; N browsers with the production pages per
  browser (``REPORTFARM_PAGES_PER_BROWSER``) each.
- ``ceiling_today``: the same with one page per browser, :data:`TODAY_ARGS` and the full
  Chromium (:attr:`Lab.today_chromium`), the print path before it was tuned: the fixed reference
  the new ceiling is compared with in every run.

Lanes (documents printing at once): N for the first two and ``ceiling_today``, N x pages per
browser for the others (:func:`lanes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable

from playwright.async_api import Browser, Page
from reportfarm_renderer import browser, printing, templates
from reportfarm_renderer import pool as pooling
from reportfarm_renderer.settings import RendererSettings

from reportfarm_bench.documents import Document
from reportfarm_bench.measuring import Job

TODAY_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
"""``browser.BASE_ARGS`` before the print path was tuned, kept fixed for ``ceiling_today``."""


class Lab:
    """What the strategies share: the started launcher (one Playwright driver, the Chromium
    binary it resolved, the guard), the template catalog and the renderer's settings."""

    def __init__(
        self,
        launcher: browser.ChromiumLauncher,
        *,
        catalog: templates.TemplateCatalog,
        settings: RendererSettings,
    ) -> None:
        self.launcher = launcher
        self.catalog = catalog
        self.settings = settings
        self.chromium_version: str | None = None

    @property
    def today_chromium(self) -> str | None:
        """The binary of today's print path: the full Chromium when there is one (the print path
        ran it before the headless shell), else the launcher's."""
        return browser.full_chromium() or self.launcher.executable_path

    async def launch(
        self, args: tuple[str, ...] = browser.BASE_ARGS, *, executable: str | None = None
    ) -> Browser:
        """A plain browser with the farm's flags (no guard), the launcher's Chromium unless
        ``executable`` names another."""
        launched = await self.launcher.playwright.chromium.launch(
            executable_path=executable or self.launcher.executable_path, args=list(args)
        )
        if executable is None:
            self.chromium_version = launched.version
        return launched

    async def launch_many(
        self,
        count: int,
        args: tuple[str, ...] = browser.BASE_ARGS,
        *,
        executable: str | None = None,
    ) -> list[Browser]:
        launching = (self.launch(args, executable=executable) for _ in range(count))
        return list(await asyncio.gather(*launching))


Strategy = Callable[[Lab, int], contextlib.AbstractAsyncContextManager[Job]]


@contextlib.asynccontextmanager
async def browser_per_job(lab: Lab, size: int) -> AsyncIterator[Job]:
    async def job(lane: int, document: Document) -> bytes:
        launched = await lab.launch()
        try:
            page = await launched.new_page()
            await page.set_content(document.html, wait_until="load")
            return await page.pdf(**document.pdf_kwargs)
        finally:
            await launched.close()

    yield job


@contextlib.asynccontextmanager
async def context_per_job(lab: Lab, size: int) -> AsyncIterator[Job]:
    browsers = await lab.launch_many(size)

    async def job(lane: int, document: Document) -> bytes:
        context = await browsers[lane].new_context()
        try:
            page = await context.new_page()
            await page.set_content(document.html, wait_until="load")
            return await page.pdf(**document.pdf_kwargs)
        finally:
            await context.close()

    try:
        yield job
    finally:
        await asyncio.gather(*(launched.close() for launched in browsers))


@contextlib.asynccontextmanager
async def reportfarm(lab: Lab, size: int) -> AsyncIterator[Job]:
    factory = functools.partial(lab.launcher.new_worker, pages=lab.settings.pages_per_browser)
    async with _our_pool(lab, size, factory=factory) as job:
        yield job


@contextlib.asynccontextmanager
async def site_isolated(lab: Lab, size: int) -> AsyncIterator[Job]:
    factory = functools.partial(
        lab.launcher.new_worker, pages=lab.settings.pages_per_browser, site_isolation_trials=True
    )
    async with _our_pool(lab, size, factory=factory) as job:
        yield job


@contextlib.asynccontextmanager
async def _our_pool(lab: Lab, size: int, *, factory: pooling.WorkerFactory) -> AsyncIterator[Job]:
    settings = lab.settings
    pool = pooling.BrowserPool(
        factory,
        size=size,
        borrow_timeout=settings.borrow_timeout,
        launch_timeout=settings.launch_timeout,
        render_timeout=settings.render_timeout,
        recycle_after_jobs=settings.recycle_after_jobs,
        recycle_rss_bytes=settings.recycle_rss_bytes,
        pages_per_worker=settings.pages_per_browser,
    )
    catalog = lab.catalog

    async def job(lane: int, document: Document) -> bytes:
        html = await asyncio.to_thread(catalog.render, document.template, document.data)
        javascript = catalog.wants_javascript(document.template)
        return await pool.render(html, document.pdf, javascript=javascript)

    async with pool:
        yield job


@contextlib.asynccontextmanager
async def ceiling(lab: Lab, size: int) -> AsyncIterator[Job]:
    async with _warm_pages(
        lab, size, pages=lab.settings.pages_per_browser, hide_screen=lab.settings.hide_screen
    ) as job:
        yield job


@contextlib.asynccontextmanager
async def ceiling_today(lab: Lab, size: int) -> AsyncIterator[Job]:
    async with _warm_pages(
        lab, size, pages=1, args=TODAY_ARGS, executable=lab.today_chromium
    ) as job:
        yield job


@contextlib.asynccontextmanager
async def _warm_pages(
    lab: Lab,
    size: int,
    *,
    pages: int,
    args: tuple[str, ...] = browser.BASE_ARGS,
    executable: str | None = None,
    hide_screen: bool = False,
) -> AsyncIterator[Job]:
    """``size`` browsers with ``pages`` warm pages each, a context per page; lane i prints on
    page i (pages of one browser are neighbours); ``hide_screen``: each document hidden from the
    screen, as the renderer's warm page hides it."""
    browsers = await lab.launch_many(size, args, executable=executable)
    warm: list[Page] = []
    for launched in browsers:
        for _ in range(pages):
            context = await launched.new_context(java_script_enabled=False)
            warm.append(await context.new_page())

    async def job(lane: int, document: Document) -> bytes:
        page = warm[lane]
        html = printing.hidden_from_screen(document.html) if hide_screen else document.html
        await page.set_content(html, wait_until="load")
        return await page.pdf(**document.pdf_kwargs)

    try:
        yield job
    finally:
        await asyncio.gather(*(launched.close() for launched in browsers))


STRATEGIES: dict[str, tuple[Strategy, str]] = {
    "browser_per_job": (browser_per_job, "(a) a new browser per job"),
    "context_per_job": (context_per_job, "(b) reference: new context per job"),
    "reportfarm": (reportfarm, "(c) our pool: warm page, guard, template"),
    "site_isolated": (site_isolated, "(c') our pool, site isolation trials on"),
    "ceiling": (ceiling, "(d) ceiling: warm pages printing HTML, nothing else"),
    "ceiling_today": (
        ceiling_today,
        "(d0) ceiling, today's print path: full Chromium, 1 page a browser",
    ),
}
"""Name: (strategy, what it is), in the order they run."""


def lanes(name: str, lab: Lab, size: int) -> int:
    """Documents strategy ``name`` prints at once with ``size`` browsers."""
    if name in ("reportfarm", "site_isolated", "ceiling"):
        return size * lab.settings.pages_per_browser
    return size
