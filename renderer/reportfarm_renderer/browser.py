"""Chromium workers for the pool: one browser each, and a warm page for documents without JS.

:class:`ChromiumLauncher` owns the one Playwright driver all browsers share, and the network
guard; its :meth:`~ChromiumLauncher.new_worker` is the pool's factory. A :class:`ChromiumWorker`
implements :class:`reportfarm_renderer.pool.Worker`:

- **No JavaScript** (the default): long-lived warm pages, each in its own context with
  JavaScript disabled (so each its own renderer process and storage), reused job after job
  (about 3x faster than a context per job). A browser has up to ``pages`` of them and prints that
  many documents at once (the pool lends it that often): what they share is the browser process,
  its network service and the driver, never a context, a renderer process or storage. It starts
  with one; another opens when a document comes while every open one prints (once: it stays
  warm). A browser that never prints two at once never pays for a second (measured: ~65 ms of
  its launch and ~23 MiB, PSS, idle).
  ``set_content`` replaces the document; afterwards ``Page.stopLoading`` cancels whatever the
  old document still had scheduled (a meta refresh survives ``set_content``: measured), and a
  page that navigated away goes back to ``about:blank`` before the next job. Cookies and storage
  need no per-job clearing: without script nothing can write them, and the guard strips
  Set-Cookie (the tests prove it).
- **JavaScript**: a fresh context per job (its own renderer process and storage), closed after.
- **Printing**: CDP ``Page.printToPDF`` to a stream, read in chunks (:mod:`.printing`), on the
  warm page's CDP session or on one opened for the job's page. A PDF bigger than one chunk goes
  to the caller's sink while the page waits; a sink that fails stops the print and is not
  charged to the browser (:class:`~reportfarm_renderer.pool.OutputFailed`).
- **Memory**: PSS of the browser process and all its descendants, read from ``/proc`` (VmRSS
  where smaps_rollup is unreadable). The browser process is the one whose command line carries
  the worker's unique marker switch (Chromium ignores unknown switches and does not pass them to
  its children).
- **Closing**: ``browser.close()``, bounded; if that fails, SIGKILL to the process tree. The
  driver is the browser's parent and reaps it.
- **Whose fault**: a Playwright error while the browser is still connected and the page still
  open and answering is the document's (a header template Chromium cannot print, a load that
  fails): it is raised as :class:`~reportfarm_renderer.pool.DocumentError` and the browser
  stays. A browser that is gone (disconnected, process exited) or a page whose target closed
  while loading is a crash, and the pool replaces the worker. A step that fails and leaves the
  page not answering (its renderer died: a header Chromium cannot print does that, and so does
  a renderer killed from outside, the OOM killer say, with the same protocol error) is rendered
  once more on a fresh page of the same browser: a second crash is the document's fault.
- **Header and footer templates** are printed by Chromium outside the page, where the guard's
  interception never sees their requests (the closed network of layer 2 still refuses them): they
  are checked before printing (:func:`reportfarm.margins.external_references`), and a template
  that references anything but inline ``data:`` resources fails as a document error.
- **Site isolation trials are off** (:data:`STABILITY_ARGS`): with them, a page that printed a
  document with a ``data:`` subframe is killed, browser and all, when a document with an
  ``<iframe srcdoc>`` is set next (the full Chromium 156, plain Playwright too; about:blank
  between jobs does not help, the flag does; the headless shell survives it, the flag stays for
  whoever runs the full browser). Jobs are isolated by page and context, not by site process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import shutil
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar, overload

# The error Playwright raises when the page, its context or the browser has gone; not re-exported
# by playwright.async_api (1.65), and the one sure sign that the failure is not the document's.
from playwright._impl._errors import TargetClosedError
from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Page,
    Playwright,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from reportfarm import contract, margins
from reportfarm_renderer import network, pool, printing, settings

log = logging.getLogger(__name__)

BASE_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-software-rasterizer",
)
"""Flags that work headless, as root, in a container, and cut work a print never needs:
``--disable-software-rasterizer`` (no SwiftShader for a screen no one sees) printed 1.03-1.3x the
PDFs/s with 2-24 % less memory in five runs of ``reportfarm bench print``, the same PDFs pixel
for pixel. Others (``--in-process-gpu``, ``--no-zygote``, font hinting, raster threads,
``--run-all-compositor-stages-before-draw``) changed nothing beyond noise: not kept."""
MEMORY_ARGS = ("--no-zygote", "--in-process-gpu")
"""Flags that cut a worker's memory and change no page of a PDF: ``--no-zygote`` (as Gotenberg
runs its browser: no zygote processes, ~6 MiB PSS each, two a browser) and ``--in-process-gpu``
(no GPU process: with ``--disable-gpu`` it only composites in software, ~12 MiB anonymous and its
own mapped pages). Measured with ``bench sync``'s renderer of 2 browsers at 2 concurrent requests,
the 13 example documents, load 8-11: the renderer's tree peaked at 606 MiB as if alone with
neither, 617 with ``--no-zygote`` (within the noise), 534 -> 512 with ``--in-process-gpu`` beside
the low-end mode below; every PDF's bytes, and its pages rendered at 72 dpi, were the same.

Not used: :data:`LOW_END_ARGS`."""
LOW_END_ARGS = ("--enable-low-end-device-mode",)
"""Chromium's settings for a small device: smaller caches and heap reservations in the renderer
processes (each warm page's renderer 35-43 MiB anonymous instead of 87-98: the renderer's tree
517 MiB against 617 above), but also **a lower JavaScript heap limit**: a page that builds 12
million small objects (a few hundred MB of heap; a large data set turned into a chart or a table
by script) crashed with it and printed without it (24 million did). A farm that prints such
documents would see them fail as "the page crashed" where they printed before, so it is not a
default; ``ChromiumLauncher(extra_args=LOW_END_ARGS)`` turns it on."""
STABILITY_ARGS = ("--disable-site-isolation-trials",)
"""Flags every worker's browser gets so that no sequence of documents crashes it (see the
module docstring); ``new_worker(site_isolation_trials=True)`` leaves them out (the benchmark
measures their cost)."""
_MARKER = "--reportfarm-worker"
_CLOSE_TIMEOUT = 10.0
_LIVENESS_S = 0.5
"""How often a render checks that its browser process still runs."""
_PAGE_PROBE_S = 2.0
"""How long a page has to answer after a failed step before it counts as busy, not crashed."""


class PageCrashed(RuntimeError):
    """The page's renderer process died in ``step`` while the browser lives: the document or a
    kill from outside (the OOM killer), which one is told by rendering once more."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"the page crashed while {step}: {message}")
        self.step = step
        self.message = message


_T = TypeVar("_T")


class BrowserGone(RuntimeError):
    """The browser process exited during a render (a crash: the pool replaces the worker)."""


@dataclasses.dataclass(eq=False)
class _WarmPage:
    """A reusable page in a context of its own, with its CDP session; renewing it replaces
    both (None while that fails). ``printed``: documents since its garbage was last collected."""

    page: Page | None = None
    cdp: CDPSession | None = None
    printed: int = 0


COLLECT_EVERY = settings.DEFAULT_COLLECT_EVERY
"""A warm page's garbage is collected (``HeapProfiler.collectGarbage``: V8's and Blink's heaps)
after every this many documents; 0 leaves it to Chromium. Left to Chromium, a warm page's
renderer process grows by each document's DOM and layout (7-8 MiB for an example report) until
its heap's limit starts a collection at ~130 MiB, and holds ~130 MiB from then on; a browser's
pages are most of a renderer's memory. Measured on the 13 example documents, one browser of 2
warm pages, 400 PDFs each, two rounds interleaved: the browser's anonymous memory 267-273 MiB
left to Chromium; collected every document 88-89 MiB (+6-9 ms of Chromium's CPU a PDF, +8-11 %),
every 4th 109 MiB (+3-4 ms, +3-5 %), every 16th 127-129 MiB with peaks of 170 (+2-4 ms). The
collection is sent without waiting for it, after the PDF is read: it runs while the job
uploads, and the page's next document queues behind it in the renderer."""


HEADLESS_SHELLS = ("chromium-headless-shell", "chrome-headless-shell")
"""Chromium's headless shell (Debian's ``chromium-headless-shell``): the same Blink, V8, Skia and
print path as the full browser without its browser layer. Printing the example reports it made
2x the PDFs/s at 0.73x the CPU time and 0.6x the memory of the full ``chromium --headless``
(``reportfarm bench print``), with the same pages, text and embedded fonts. It is also what
Playwright itself runs headless."""


def system_chromium() -> str | None:
    """The headless shell on PATH (:func:`unwrapped`), else the full Chromium
    (:func:`full_chromium`), else None."""
    for name in HEADLESS_SHELLS:
        found = shutil.which(name)
        if found:
            return unwrapped(found)
    return full_chromium()


def unwrapped(path: str) -> str:
    """The binary a shell-script wrapper runs, if ``path`` is one that names it by its own name.

    Debian's ``/usr/bin/chromium-headless-shell`` is ``/usr/lib/chromium/chromium-headless-shell
    "$@"`` without ``exec``: launched through it, the browser is the script's child, so the pid
    the pool finds, signals and measures would be the shell's, and a killed or recycled browser
    would live on. Anything else (a binary, a wrapper that names no such file) is returned as it
    is."""
    try:
        with open(path, "rb") as file:
            head = file.read(4096)
    except OSError:
        return path
    if not head.startswith(b"#!"):
        return path
    name = os.path.basename(path)
    for token in head.decode(errors="replace").split():
        candidate = token.strip("\"'")
        if (
            os.path.isabs(candidate)
            and os.path.basename(candidate) == name
            and os.path.realpath(candidate) != os.path.realpath(path)
            and os.access(candidate, os.X_OK)
        ):
            return candidate
    return path


def full_chromium() -> str | None:
    """The full ``chromium`` on PATH, whose ``--headless`` is the whole browser without a window:
    what the print path ran before the headless shell (the benchmarks' "today"), and what
    Gotenberg's image ships."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class ChromiumLauncher:
    """Starts the Playwright driver once and launches one browser per worker.

    ``executable_path`` None: Playwright's own Chromium if installed, else the system's
    (:func:`system_chromium`).
    The launcher owns ``guard`` (a default one blocks every remote host) and closes it.
    ``chunk_bytes``: how much of a PDF is read from Chromium at a time (:mod:`.printing`).
    ``collect_every``: a warm page's garbage is collected after this many documents (0: never
    asked; see :data:`COLLECT_EVERY`).
    ``hide_screen``: a warm page's document is hidden from the screen, laid out and painted only
    for the print (:func:`printing.hidden_from_screen`).
    """

    def __init__(
        self,
        *,
        executable_path: str | None = None,
        guard: network.NetworkGuard | None = None,
        extra_args: Sequence[str] = (),
        launch_timeout: float = 30.0,
        chunk_bytes: int = printing.CHUNK_BYTES,
        collect_every: int = COLLECT_EVERY,
        hide_screen: bool = True,
    ) -> None:
        self._executable = executable_path
        self._chunk_bytes = chunk_bytes
        self._collect_every = collect_every
        self._hide_screen = hide_screen
        self.guard = guard or network.NetworkGuard()
        self._extra_args = tuple(extra_args)
        self._launch_timeout = launch_timeout
        self._playwright: Playwright | None = None
        self._strays: set[asyncio.Task[None]] = set()

    @property
    def playwright(self) -> Playwright:
        if self._playwright is None:
            raise RuntimeError("the launcher was not started")
        return self._playwright

    @property
    def executable_path(self) -> str | None:
        return self._executable

    async def __aenter__(self) -> ChromiumLauncher:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        with _driver_options():
            self._playwright = await async_playwright().start()
        if self._executable is None:
            bundled = self._playwright.chromium.executable_path
            if not os.path.exists(bundled):
                self._executable = system_chromium()
        else:
            self._executable = unwrapped(self._executable)
        log.info("Chromium: %s", self._executable or "Playwright's own")

    async def close(self) -> None:
        await asyncio.gather(*self._strays, return_exceptions=True)
        await self.guard.close()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def new_worker(
        self, *, pages: int = 1, site_isolation_trials: bool = False
    ) -> ChromiumWorker:
        """Launch a browser and warm its ``pages`` pages: the pool's worker factory. Safe to
        cancel.

        ``site_isolation_trials``: keep Chromium's default (only for measuring its cost)."""
        marker = secrets.token_hex(8)
        stability = () if site_isolation_trials else STABILITY_ARGS
        args = [
            *BASE_ARGS,
            *MEMORY_ARGS,
            *stability,
            *self.guard.chromium_args(),
            *self._extra_args,
            f"{_MARKER}={marker}",
        ]
        launching = asyncio.ensure_future(
            self.playwright.chromium.launch(
                executable_path=self._executable,
                args=args,
                timeout=self._launch_timeout * 1000,
                # The pool decides when browsers end, not a signal to the driver: a SIGTERM
                # drain must finish its renders.
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
        )
        try:
            browser = await asyncio.shield(launching)
        except asyncio.CancelledError:
            launching.add_done_callback(self._close_stray)
            raise
        worker = ChromiumWorker(
            browser,
            marker=marker,
            guard=self.guard,
            pages=pages,
            chunk_bytes=self._chunk_bytes,
            collect_every=self._collect_every,
            hide_screen=self._hide_screen,
        )
        try:
            await worker.prepare()
        except BaseException:
            await worker.close()
            raise
        return worker

    def _close_stray(self, launching: asyncio.Future[Browser]) -> None:
        """A launch whose caller gave up: close the browser when it arrives."""
        if not launching.cancelled() and launching.exception() is None:
            task = asyncio.ensure_future(launching.result().close())
            self._strays.add(task)
            task.add_done_callback(self._strays.discard)


class ChromiumWorker:
    """One browser; see the module docstring. Use through the pool: at most ``pages`` renders at
    a time."""

    def __init__(
        self,
        browser: Browser,
        *,
        marker: str,
        guard: network.NetworkGuard,
        pages: int = 1,
        chunk_bytes: int = printing.CHUNK_BYTES,
        collect_every: int = COLLECT_EVERY,
        hide_screen: bool = True,
    ) -> None:
        self.jobs_done = 0
        self._chunk_bytes = chunk_bytes
        self._collect_every = collect_every
        self._hide_screen = hide_screen
        self.collections = 0
        """Garbage collections asked of warm pages (see :data:`COLLECT_EVERY`)."""
        self._collecting: set[asyncio.Future[Any]] = set()
        self.page_crashes = 0
        self.pid: int | None = None
        self._browser = browser
        self._marker = f"{_MARKER}={marker}"
        self._guard = guard
        self.pages = pages
        self.opened = 0
        """Warm pages open (printing or not), at most :attr:`pages`."""
        self._free: list[_WarmPage] = []  # warm pages not printing now
        self._warm_crashed: set[Page] = set()  # warm pages whose renderer died, found by events
        self._broken = False
        self._closed = False
        browser.on("disconnected", self._on_disconnected)

    def __repr__(self) -> str:
        return f"<ChromiumWorker pid={self.pid} jobs={self.jobs_done}>"

    @property
    def alive(self) -> bool:
        return not (self._broken or self._closed) and self._browser.is_connected()

    async def prepare(self) -> None:
        """Open and warm the first reusable page (the others open as they are needed); find the
        browser's pid."""
        self._free.append(await self._another_warm_page())
        self.pid = await asyncio.to_thread(_find_browser_pid, self._marker)
        log.info("browser launched (pid %s)", self.pid)

    @overload
    async def render(
        self, html: str, options: contract.PdfOptions, *, javascript: bool
    ) -> bytes: ...

    @overload
    async def render(
        self, html: str, options: contract.PdfOptions, *, javascript: bool, sink: pool.Sink | None
    ) -> bytes | None: ...

    async def render(
        self,
        html: str,
        options: contract.PdfOptions,
        *,
        javascript: bool,
        sink: pool.Sink | None = None,
    ) -> bytes | None:
        """The PDF whole, or None once a PDF longer than one chunk went to ``sink`` (see
        :mod:`.printing`)."""
        _check_margins(options)
        if javascript:
            return await self._render(html, options, None, sink)
        # A page opened for this job opens under the same watch as a render: a browser killed
        # meanwhile is a crash, not a hang charged to the document as a render timeout.
        warm = (
            self._free.pop() if self._free else await self._unless_gone(self._another_warm_page())
        )
        try:
            return await self._render(html, options, warm, sink)
        finally:
            self._free.append(warm)

    async def _render(
        self,
        html: str,
        options: contract.PdfOptions,
        warm: _WarmPage | None,
        sink: pool.Sink | None,
    ) -> bytes | None:
        try:
            try:
                pdf = await self._render_once(html, options, warm, sink)
            except PageCrashed as crash:
                # A header Chromium cannot print and a renderer killed from outside end alike
                # (measured): once more on a fresh page in this browser tells them apart.
                log.warning(
                    "browser pid %s: %s; rendering once more on a fresh page", self.pid, crash
                )
                self.page_crashes += 1
                if warm is not None:
                    await self._renew_warm_page(warm)
                    if self._broken:
                        raise
                try:
                    pdf = await self._render_once(html, options, warm, sink)
                except PageCrashed as again:
                    raise pool.DocumentError(
                        f"{again.step} failed: {again.message} (the page crashed, and again "
                        "on a fresh page)"
                    ) from again
        except pool.OutputFailed:
            raise  # the caller's sink failed; the print itself ended well
        except pool.DocumentError:
            if warm is not None:
                # A page whose print failed crashes on its next document (measured): the job
                # was the document's fault, but the next one starts on a new warm page.
                await self._renew_warm_page(warm)
            raise
        except BaseException:
            self._broken = True  # the page is in an unknown state: the pool replaces us
            raise
        self.jobs_done += 1
        return pdf

    async def _render_once(
        self,
        html: str,
        options: contract.PdfOptions,
        warm: _WarmPage | None,
        sink: pool.Sink | None,
    ) -> bytes | None:
        if warm is None:
            return await self._unless_gone(self._render_isolated(html, options, sink))
        if warm.page in self._warm_crashed:
            # Its renderer died between jobs (killed from outside): a fresh page, not a crash.
            log.warning("browser pid %s: the warm page crashed while idle; renewing it", self.pid)
            await self._renew_warm_page(warm)
            if self._broken:
                raise RuntimeError(f"browser pid {self.pid}: the warm page could not be renewed")
        return await self._unless_gone(self._render_warm(warm, html, options, sink))

    async def _unless_gone(self, rendering: Coroutine[Any, Any, _T]) -> _T:
        """Run the render (or a page's opening) while the browser process lives. A browser
        killed mid-render is not always seen by the driver (a child that outlives it can hold
        the pipe open, measured: the render then hangs until the pool's timeout and would be
        charged to the document as a render timeout): the process itself is checked every
        :data:`_LIVENESS_S`."""
        work = asyncio.ensure_future(rendering)
        try:
            while True:
                done, _ = await asyncio.wait({work}, timeout=_LIVENESS_S)
                if done:
                    return work.result()
                if not self._process_running():
                    self._broken = True
                    raise BrowserGone(f"browser pid {self.pid} exited during the render")
        finally:
            if not work.done():
                work.cancel()
                work.add_done_callback(_retrieve)

    def _process_running(self) -> bool:
        """Whether the browser process still runs (unknown pid: assumed so)."""
        return self.pid is None or _running(self.pid, self._marker)

    async def _another_warm_page(self) -> _WarmPage:
        """Open one more warm page, up to :attr:`pages`; if that fails, the worker is broken (the
        pool replaces it)."""
        if self.opened >= self.pages:
            raise RuntimeError(f"browser pid {self.pid}: more renders than its {self.pages} pages")
        self.opened += 1
        warm = _WarmPage()
        try:
            await self._open_warm_page(warm)
        except BaseException:
            self.opened -= 1
            self._broken = True
            raise
        return warm

    async def _open_warm_page(self, warm: _WarmPage) -> None:
        context = await self._new_context(javascript=False)
        warm.page = page = await context.new_page()
        page.on("crash", lambda _: self._warm_crashed.add(page))
        warm.cdp = await context.new_cdp_session(page)
        await self._render_warm(warm, "<p></p>", contract.PdfOptions(), None)

    async def _renew_warm_page(self, warm: _WarmPage) -> None:
        """Close the warm page's context and open another; if that fails, the worker is broken."""
        old, warm.page, warm.cdp = warm.page, None, None
        try:
            if old is not None:
                self._warm_crashed.discard(old)
                await old.context.close()
            await self._open_warm_page(warm)
        except Exception as error:
            log.warning("could not renew the warm page of browser pid %s: %r", self.pid, error)
            self._broken = True

    async def rss_bytes(self) -> int:
        if self.pid is None:
            raise ProcessLookupError("the browser process was not found")
        return await asyncio.to_thread(_tree_memory, self.pid, self._marker)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.wait_for(self._browser.close(), _CLOSE_TIMEOUT)
        except Exception as error:
            log.warning("browser pid %s did not close (%r): killing it", self.pid, error)
            if self.pid is not None:
                await asyncio.to_thread(_kill_tree, self.pid, self._marker)

    async def _render_warm(
        self, warm: _WarmPage, html: str, options: contract.PdfOptions, sink: pool.Sink | None
    ) -> bytes | None:
        assert warm.page is not None and warm.cdp is not None, "prepare() first"
        page, cdp = warm.page, warm.cdp
        if page.url != "about:blank":
            await page.goto("about:blank")
        if self._hide_screen:
            html = printing.hidden_from_screen(html)
        async with self._document(page, "loading the document"):
            await page.set_content(html, wait_until="load")
        try:
            async with self._document(page, "printing the document"):
                pdf = await printing.print_pdf(
                    cdp, options, sink=sink, chunk_bytes=self._chunk_bytes
                )
        except pool.OutputFailed:
            await cdp.send("Page.stopLoading")  # the page stays warm for the next job
            raise
        await cdp.send("Page.stopLoading")
        self._collect(warm, cdp)
        return pdf

    def _collect(self, warm: _WarmPage, cdp: CDPSession) -> None:
        """Every :data:`COLLECT_EVERY` documents, ask the page's renderer to collect its garbage,
        without waiting: a page that crashed or closed meanwhile is the next render's to find."""
        warm.printed += 1
        if not self._collect_every or warm.printed < self._collect_every:
            return
        warm.printed = 0
        self.collections += 1
        collecting = asyncio.ensure_future(cdp.send("HeapProfiler.collectGarbage"))
        self._collecting.add(collecting)
        collecting.add_done_callback(self._collecting.discard)
        collecting.add_done_callback(_retrieve)

    async def _render_isolated(
        self, html: str, options: contract.PdfOptions, sink: pool.Sink | None
    ) -> bytes | None:
        """A context of its own. A script that navigates while the document loads would leave
        ``set_content`` waiting for a load event that never comes: fail it at once instead."""
        navigated: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def on_navigation(url: str) -> None:
            if not navigated.done():
                navigated.set_result(url)

        context = await self._new_context(javascript=True, on_navigation=on_navigation)
        try:
            page = await context.new_page()
            loading = asyncio.ensure_future(page.set_content(html, wait_until="load"))
            loading.add_done_callback(_retrieve)
            try:
                either: list[asyncio.Future[Any]] = [loading, navigated]
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                loading.cancel()
            if not loading.done() or loading.cancelled():
                raise pool.DocumentError(
                    f"the document tried to navigate to {network.shorten(navigated.result())} "
                    "while loading; documents may not navigate"
                )
            async with self._document(page, "loading the document"):
                loading.result()
            cdp = await context.new_cdp_session(page)
            async with self._document(page, "printing the document"):
                return await printing.print_pdf(
                    cdp, options, sink=sink, chunk_bytes=self._chunk_bytes
                )
        finally:
            if self._browser.is_connected():
                await context.close()

    @contextlib.asynccontextmanager
    async def _document(self, page: Page, step: str) -> AsyncIterator[None]:
        """A Playwright error in ``step`` is the document's fault while the browser and the page
        are still there (the error's type and the browser's state decide, not its text)."""
        try:
            yield
        except PlaywrightError as error:
            gone = isinstance(error, TargetClosedError) or page.is_closed()
            if gone or self._broken or not self._browser.is_connected():
                raise  # a crash: the pool replaces this worker
            message = error.message.splitlines()[0] if error.message else repr(error)
            if not await _page_answers(page):
                raise PageCrashed(step, message) from error
            raise pool.DocumentError(f"{step} failed: {message}") from error

    async def _new_context(
        self, *, javascript: bool, on_navigation: Callable[[str], object] | None = None
    ) -> BrowserContext:
        context = await self._browser.new_context(
            java_script_enabled=javascript, service_workers="block", accept_downloads=False
        )
        # No Playwright timeouts: the pool's render timeout bounds the whole job.
        context.set_default_timeout(0)
        context.set_default_navigation_timeout(0)
        await self._guard.install(context, on_navigation=on_navigation)
        return context

    def _on_disconnected(self, _browser: Browser) -> None:
        if not self._closed:
            log.warning("browser pid %s disconnected unexpectedly", self.pid)
            self._broken = True


def _check_margins(options: contract.PdfOptions) -> None:
    """Header and footer templates may only use inline resources (see the module docstring)."""
    if not options.display_header_footer:
        return
    for name in ("header_template", "footer_template"):
        found = margins.external_references(getattr(options, name))
        if found:
            raise pool.DocumentError(
                f"pdf.{name} references {network.shorten(found[0])}: header and footer "
                "templates may only use inline data: resources"
            )


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a side task's outcome as seen: the worker is replaced anyway if it failed."""
    if not task.cancelled():
        task.exception()


DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"
"""V8 options for the Playwright driver (Node), which every PDF passes through (base64, then
bytes): a young generation of 1 MiB semi-spaces, not Node's default 16, is collected more often
and keeps less. Measured with ``bench-sync``'s pool at 2 concurrent requests: the driver's
anonymous memory 63-64 MiB instead of 88-94."""


COMPILE_CACHE_VAR = "NODE_COMPILE_CACHE"
"""Node's module compile cache (V8's code cache of the driver's JavaScript, on disk): the driver
starts in ~0.23 s of CPU instead of ~0.28 (docs/node/pod-start.md). The renderer image ships one,
made at build time for its user and read only (``NODE_COMPILE_CACHE_READONLY``); elsewhere the
driver keeps one in :func:`compile_cache_dir` unless the environment names its own or sets
``NODE_DISABLE_COMPILE_CACHE``."""


def compile_cache_dir() -> str:
    """The driver's compile cache where the environment names none: the user's cache folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "reportfarm", "node-compile-cache")


async def warm_compile_cache(executable_path: str | None = None) -> None:
    """Start the driver, launch a browser, print a page, stop: the driver compiles what a
    renderer's start and its prints run, and Node writes the compile cache (where
    :data:`COMPILE_CACHE_VAR` says) as the driver exits. The renderer image runs this at build
    time, as the user it runs as (the cache is kept per user)."""
    async with ChromiumLauncher(executable_path=executable_path) as launcher:
        worker = await launcher.new_worker()
        try:
            await worker.render("<p>compile cache</p>", contract.PdfOptions(), javascript=False)
        finally:
            await worker.close()


@contextlib.contextmanager
def _driver_options() -> Iterator[None]:
    """``NODE_OPTIONS`` with :data:`DRIVER_NODE_OPTIONS` (after any the environment has, so a
    user's own win), and :data:`COMPILE_CACHE_VAR` where the environment has none, while
    Playwright starts its driver, which copies the environment then; the environment is as it was
    afterwards (nothing else this process starts gets them)."""
    before = {name: os.environ.get(name) for name in ("NODE_OPTIONS", COMPILE_CACHE_VAR)}
    os.environ["NODE_OPTIONS"] = f"{DRIVER_NODE_OPTIONS} {before['NODE_OPTIONS'] or ''}".strip()
    if before[COMPILE_CACHE_VAR] is None and not os.environ.get("NODE_DISABLE_COMPILE_CACHE"):
        os.environ[COMPILE_CACHE_VAR] = compile_cache_dir()
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- /proc --------------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().decode(errors="replace").split("\0")
    except OSError:
        return []


async def _page_answers(page: Page) -> bool:
    """Whether the page's renderer still answers after a failed step. A renderer killed while
    printing fails ``Page.pdf`` with a protocol error, not a closed target, and the page's crash
    event comes ~10 ms later (measured): the page is asked instead. A crashed page fails at once;
    a page too busy to answer within :data:`_PAGE_PROBE_S` is alive (the document's fault)."""
    try:
        await asyncio.wait_for(page.evaluate("0"), _PAGE_PROBE_S)
    except TimeoutError:
        return True
    except PlaywrightError:
        return False
    return True


def _running(pid: int, marker: str) -> bool:
    """The process exists, is not a zombie, and is still the marked browser."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            state = file.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and marker in _cmdline(pid)


def _find_browser_pid(marker: str) -> int | None:
    """The outermost process carrying the marker: a child the browser has forked but not yet
    exec'd carries it too, for a moment."""
    found = {int(p) for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(int(p))}
    parents = _parents()
    outer = sorted(pid for pid in found if parents.get(pid) not in found)
    return outer[0] if outer else None


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as file:
                    parents[int(entry)] = int(file.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def _tree(pid: int, marker: str) -> list[int]:
    """The browser and its descendants; raises if pid is no longer our browser."""
    if marker not in _cmdline(pid):
        raise ProcessLookupError(f"pid {pid} is no longer the worker's browser")
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    tree, stack = [], [pid]
    while stack:
        tree.append(current := stack.pop())
        stack.extend(children.get(current, ()))
    return tree


def _tree_memory(pid: int, marker: str) -> int:
    return sum(_process_memory(member) for member in _tree(pid, marker))


def _process_memory(pid: int) -> int:
    """PSS in bytes (fair share of shared pages), or RSS if smaps_rollup is unreadable."""
    for path, field in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
        try:
            with open(path) as file:
                for line in file:
                    if line.startswith(field):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def marker_arg(token: str) -> str:
    """The switch that marks a browser's command line, to find its processes in ``/proc``."""
    return f"{_MARKER}={token}"


def marked_tree_memory(marker: str) -> int:
    """PSS of the browser launched with ``marker`` (see :func:`marker_arg`) and its descendants;
    0 if it is not running."""
    pid = _find_browser_pid(marker)
    if pid is None:
        return 0
    try:
        return _tree_memory(pid, marker)
    except ProcessLookupError:
        return 0


def marked_tree_pids(marker: str) -> list[int]:
    """The marked browser's process and its descendants; empty if it is not running."""
    pid = _find_browser_pid(marker)
    try:
        return [] if pid is None else _tree(pid, marker)
    except ProcessLookupError:
        return []


def marked_tree_cpu_seconds(marker: str) -> float:
    """CPU time (user + system) the marked browser and its live descendants have used: a cost
    that other work on the machine hardly changes, unlike wall time. 0 if it is not running."""
    pid = _find_browser_pid(marker)
    try:
        members = [] if pid is None else _tree(pid, marker)
    except ProcessLookupError:
        return 0.0
    return sum(process_cpu_seconds(member) for member in members)


def driver_pid() -> int | None:
    """The Playwright driver this process started (a ``node`` child), if there is one."""
    mine = os.getpid()
    for child, parent in _parents().items():
        if parent == mine and "run-driver" in _cmdline(child):
            return child
    return None


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process, 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _kill_tree(pid: int, marker: str) -> None:
    try:
        members = _tree(pid, marker)
    except ProcessLookupError:
        return
    for member in members:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
