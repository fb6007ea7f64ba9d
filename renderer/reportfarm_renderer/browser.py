"""Chromium workers for the pool: one browser each, and a warm page for documents without JS.

:class:`ChromiumLauncher` owns the one Playwright driver all browsers share, and the network
guard; its :meth:`~ChromiumLauncher.new_worker` is the pool's factory. A :class:`ChromiumWorker`
implements :class:`reportfarm_renderer.pool.Worker`:

- **No JavaScript** (the default): one long-lived context with JavaScript disabled and one page,
  reused job after job (about 3x faster than a context per job). ``set_content`` replaces the
  document; afterwards ``Page.stopLoading`` cancels whatever the old document still had
  scheduled (a meta refresh survives ``set_content``: measured), and a page that navigated away
  goes back to ``about:blank`` before the next job. Cookies and storage need no per-job clearing:
  without script nothing can write them, and the guard strips Set-Cookie (the tests prove it).
- **JavaScript**: a fresh context per job (its own renderer process and storage), closed after.
- **Memory**: PSS of the browser process and all its descendants, read from ``/proc`` (VmRSS
  where smaps_rollup is unreadable). The browser process is the one whose command line carries
  the worker's unique marker switch (Chromium ignores unknown switches and does not pass them to
  its children).
- **Closing**: ``browser.close()``, bounded; if that fails, SIGKILL to the process tree. The
  driver is the browser's parent and reaps it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import signal
from collections.abc import Callable, Sequence
from typing import Any

from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Page,
    Playwright,
    async_playwright,
)

from reportfarm import contract
from reportfarm_renderer import network, pool

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
)
"""Flags that work headless, as root, in a container."""
_MARKER = "--reportfarm-worker"
_CLOSE_TIMEOUT = 10.0


class ChromiumLauncher:
    """Starts the Playwright driver once and launches one browser per worker.

    ``executable_path`` None: Playwright's own Chromium if installed, else ``chromium`` on PATH.
    The launcher owns ``guard`` (a default one blocks every remote host) and closes it.
    """

    def __init__(
        self,
        *,
        executable_path: str | None = None,
        guard: network.NetworkGuard | None = None,
        extra_args: Sequence[str] = (),
        launch_timeout: float = 30.0,
    ) -> None:
        self._executable = executable_path
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
        self._playwright = await async_playwright().start()
        if self._executable is None:
            bundled = self._playwright.chromium.executable_path
            if not os.path.exists(bundled):
                self._executable = shutil.which("chromium") or shutil.which("chromium-browser")
        log.info("Chromium: %s", self._executable or "Playwright's own")

    async def close(self) -> None:
        await asyncio.gather(*self._strays, return_exceptions=True)
        await self.guard.close()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def new_worker(self) -> ChromiumWorker:
        """Launch a browser and warm its page: the pool's worker factory. Safe to cancel."""
        marker = secrets.token_hex(8)
        args = [*BASE_ARGS, *self.guard.chromium_args(), *self._extra_args, f"{_MARKER}={marker}"]
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
        worker = ChromiumWorker(browser, marker=marker, guard=self.guard)
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
    """One browser; see the module docstring. Use through the pool: one render at a time."""

    def __init__(self, browser: Browser, *, marker: str, guard: network.NetworkGuard) -> None:
        self.jobs_done = 0
        self.pid: int | None = None
        self._browser = browser
        self._marker = f"{_MARKER}={marker}"
        self._guard = guard
        self._page: Page | None = None
        self._cdp: CDPSession | None = None
        self._broken = False
        self._closed = False
        browser.on("disconnected", self._on_disconnected)

    def __repr__(self) -> str:
        return f"<ChromiumWorker pid={self.pid} jobs={self.jobs_done}>"

    @property
    def alive(self) -> bool:
        return not (self._broken or self._closed) and self._browser.is_connected()

    async def prepare(self) -> None:
        """Open and warm the reusable page; find the browser's pid."""
        context = await self._new_context(javascript=False)
        self._page = await context.new_page()
        self._cdp = await context.new_cdp_session(self._page)
        await self._render_warm("<p></p>", contract.PdfOptions())
        self.pid = await asyncio.to_thread(_find_browser_pid, self._marker)
        log.info("browser launched (pid %s)", self.pid)

    async def render(self, html: str, options: contract.PdfOptions, *, javascript: bool) -> bytes:
        try:
            if javascript:
                pdf = await self._render_isolated(html, options)
            else:
                pdf = await self._render_warm(html, options)
        except pool.DocumentError:
            raise
        except BaseException:
            self._broken = True  # the page is in an unknown state: the pool replaces us
            raise
        self.jobs_done += 1
        return pdf

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

    async def _render_warm(self, html: str, options: contract.PdfOptions) -> bytes:
        assert self._page is not None and self._cdp is not None, "prepare() first"
        if self._page.url != "about:blank":
            await self._page.goto("about:blank")
        await self._page.set_content(html, wait_until="load")
        pdf = await self._page.pdf(**options.playwright_kwargs())
        await self._cdp.send("Page.stopLoading")
        return pdf

    async def _render_isolated(self, html: str, options: contract.PdfOptions) -> bytes:
        """A context of its own. A script that navigates while the document loads would leave
        ``set_content`` waiting for a load event that never comes: fail it at once instead."""
        navigated: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def on_navigation(url: str) -> None:
            if not navigated.done():
                navigated.set_result(url)

        context = await self._new_context(javascript=True, on_navigation=on_navigation)
        page = await context.new_page()
        loading = asyncio.ensure_future(page.set_content(html, wait_until="load"))
        loading.add_done_callback(_retrieve)
        try:
            either: list[asyncio.Future[Any]] = [loading, navigated]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loading.cancel()
        if not loading.done() or loading.cancelled():
            await context.close()
            raise pool.DocumentError(
                f"the document tried to navigate to {network.shorten(navigated.result())} "
                "while loading; documents may not navigate"
            )
        loading.result()
        pdf = await page.pdf(**options.playwright_kwargs())
        await context.close()
        return pdf

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


def _retrieve(task: asyncio.Future[None]) -> None:
    """Mark a side task's outcome as seen: the worker is replaced anyway if it failed."""
    if not task.cancelled():
        task.exception()


# -- /proc --------------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().decode(errors="replace").split("\0")
    except OSError:
        return []


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
