"""``reportfarm bench print``: the print path's factors, each against today's, in one run.

Every variant is the ceiling's print path (a warm page per lane, JavaScript off, printing
pre-rendered HTML: ``set_content`` and ``pdf``, nothing else) with one factor changed:

- **shape** ``NxM``: N browsers with M pages each (every page in its own context, as the pool's
  warm pages are), N x M lanes printing at once;
- **flags**: extra Chromium switches on the reference shape (:data:`FLAGS`);
- **loading**: ``set_content``'s ``wait_until`` (``load``, ``domcontentloaded``).

The reference, ``today``, is the print path as it was before this sweep: 2 browsers x 1 page
with :data:`TODAY_ARGS` on the full Chromium (:func:`browser.full_chromium`); ``production`` is
the print path as it is now: 2 browsers with the default pages per browser and the production
switches (``BASE_ARGS`` and ``STABILITY_ARGS``) on the launcher's Chromium (the headless shell when
installed), each document hidden from the screen as the renderer's warm page hides it;
``production, screen shown`` is the same without that; ``today +headless-shell`` is today's with
only the binary changed. Every other
variant runs the launcher's Chromium.
Both run in every round, so each ratio compares numbers measured side by side. Rounds
interleave the variants (forward, then backward) as ``reportfarm bench strategies`` does.

Memory is the PSS of each variant's browser process trees, sampled after every chunk (the peak
is kept), so PDFs/s per GiB is throughput over the memory it held at its largest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from playwright.async_api import Browser, Page
from reportfarm_renderer import browser, settings
from reportfarm_renderer import printing as renderer_printing

from reportfarm_bench import footprint, measuring, strategies
from reportfarm_bench.documents import Document
from reportfarm_bench.strategies import Lab

TODAY_ARGS = (*strategies.TODAY_ARGS, "--disable-site-isolation-trials")
"""The launch flags of the print path before this sweep (BASE_ARGS + STABILITY_ARGS then), kept
fixed so that every run compares against the same thing."""

FLAGS: dict[str, tuple[str, ...]] = {
    "all-stages": ("--run-all-compositor-stages-before-draw",),
    "no-zygote": ("--no-zygote",),
    "in-process-gpu": ("--in-process-gpu",),
    "no-software-rasterizer": ("--disable-software-rasterizer",),
    "font-hinting-none": ("--font-render-hinting=none",),
    "raster-threads-1": ("--num-raster-threads=1",),
    "no-lcd-text": ("--disable-lcd-text",),
    "renderer-backgrounding": ("--disable-renderer-backgrounding",),
}
"""Candidate switches that cut work a print never needs, by name (``--flags``)."""


def args_with(names: Sequence[str]) -> tuple[str, ...]:
    """Today's switches and the named :data:`FLAGS`; KeyError for an unknown name."""
    return (*TODAY_ARGS, *(arg for name in names for arg in FLAGS[name]))


WaitUntil = Literal["load", "domcontentloaded", "commit"]
WAIT_UNTIL: tuple[WaitUntil, ...] = ("load", "domcontentloaded", "commit")


def wait_until(text: str) -> WaitUntil:
    """A ``set_content`` ``wait_until`` value; ValueError for anything else."""
    for value in WAIT_UNTIL:
        if text == value:
            return value
    raise ValueError(f"wait_until is one of {', '.join(WAIT_UNTIL)}, not {text!r}")


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way to print: a shape, extra switches and how the HTML is loaded."""

    name: str
    browsers: int
    pages: int
    args: tuple[str, ...] = TODAY_ARGS
    wait_until: WaitUntil = "load"
    executable: str | None = None
    """Another Chromium build than the launcher's (e.g. Debian's ``chromium-headless-shell``)."""
    hide_screen: bool = False
    """The document hidden from the screen, as the renderer's warm page hides it
    (``printing.hidden_from_screen``)."""

    @property
    def lanes(self) -> int:
        return self.browsers * self.pages

    @property
    def shape(self) -> str:
        return f"{self.browsers}x{self.pages}"


def parse_shape(text: str) -> tuple[int, int]:
    """``"2x1"`` -> (2, 1); ValueError if it is not two positive whole numbers."""
    browsers, _, pages = text.strip().lower().partition("x")
    if not (browsers.isdigit() and pages.isdigit()) or min(int(browsers), int(pages)) < 1:
        raise ValueError(f"a shape is BROWSERSxPAGES, e.g. 1x2, not {text!r}")
    return int(browsers), int(pages)


def variants(
    *,
    shapes: Sequence[str],
    flags: Sequence[str],
    base_args: Sequence[str],
    flag_shape: str,
    loading: Sequence[WaitUntil] = (),
) -> list[Variant]:
    """``today``, ``production`` and ``production, screen shown`` first, then each shape, each
    flag on ``flag_shape`` with ``base_args``, each ``wait_until``. Unknown flag names raise
    KeyError."""
    production = (*browser.BASE_ARGS, *browser.STABILITY_ARGS)
    pages = settings.DEFAULT_PAGES_PER_BROWSER
    full = browser.full_chromium()
    found = [
        Variant("today", 2, 1, executable=full),
        Variant("production", 2, pages, production, hide_screen=True),
        Variant("production, screen shown", 2, pages, production),
    ]
    shell = browser.system_chromium()
    if full is not None and shell is not None and shell != full:
        found.append(Variant("today +headless-shell", 2, 1, executable=shell))
    for shape in shapes:
        browsers, pages = parse_shape(shape)
        found.append(Variant(f"shape {browsers}x{pages}", browsers, pages, tuple(base_args)))
    browsers, pages = parse_shape(flag_shape)
    for name in flags:
        args = (*base_args, *FLAGS[name])
        found.append(Variant(f"{flag_shape} +{name}", browsers, pages, args))
    for wait_until in loading:
        found.append(
            Variant(f"{flag_shape} {wait_until}", browsers, pages, tuple(base_args), wait_until)
        )
    return found


class Printer:
    """A variant's browsers and warm pages, alive for the whole run."""

    def __init__(self, variant: Variant, browsers: list[Browser], markers: list[str]) -> None:
        self.variant = variant
        self.run = measuring.Run(variant.name)
        self.peak_bytes = 0
        self.alone_peak_bytes: int | None = 0
        """The variant's browsers' memory as if nothing else ran (:func:`footprint.alone`): PSS
        splits a binary's pages among every process that maps it, so variants on one binary
        would seem smaller than a variant on a binary of its own; None without page frames."""
        self.cpu_s = 0.0
        self.client_cpu_s = 0.0
        """CPU time of the Playwright driver and this process while the variant printed (they
        serve one variant at a time: chunks never overlap)."""
        self._browsers = browsers
        self._markers = markers
        self._pages: list[Page] = []

    async def open_pages(self) -> None:
        for launched in self._browsers:
            for _ in range(self.variant.pages):
                context = await launched.new_context(java_script_enabled=False)
                self._pages.append(await context.new_page())

    async def job(self, lane: int, document: Document) -> bytes:
        page = self._pages[lane]
        html = document.html
        if self.variant.hide_screen:
            html = renderer_printing.hidden_from_screen(html)
        await page.set_content(html, wait_until=self.variant.wait_until)
        return await page.pdf(**document.pdf_kwargs)

    async def measure(self, documents: Sequence[Document], *, count: int, offset: int) -> None:
        """One timed chunk, its browsers' CPU time, then their memory."""
        before, client = await self._cpu_seconds(), _client_cpu_seconds()
        await measuring.closed_loop(
            self.job,
            documents,
            run=self.run,
            count=count,
            concurrency=self.variant.lanes,
            offset=offset,
        )
        self.client_cpu_s += _client_cpu_seconds() - client
        self.cpu_s += await self._cpu_seconds() - before
        sizes = await asyncio.gather(
            *(asyncio.to_thread(browser.marked_tree_memory, marker) for marker in self._markers)
        )
        self.peak_bytes = max(self.peak_bytes, sum(sizes))
        if self.alone_peak_bytes is not None:
            alone = await asyncio.to_thread(self._alone_bytes)
            self.alone_peak_bytes = None if alone is None else max(self.alone_peak_bytes, alone)

    def _alone_bytes(self) -> int | None:
        pids = [pid for marker in self._markers for pid in browser.marked_tree_pids(marker)]
        return footprint.alone(pids)

    async def _cpu_seconds(self) -> float:
        spent = await asyncio.gather(
            *(asyncio.to_thread(browser.marked_tree_cpu_seconds, m) for m in self._markers)
        )
        return sum(spent)

    def summary(self, cores: int) -> dict[str, Any]:
        row: dict[str, Any] = dict(self.run.summary())
        rate, gib, count = row["pdf_per_s"], self.peak_bytes / 2**30, self.run.count
        alone = self.alone_peak_bytes
        row.update(
            shape=self.variant.shape,
            lanes=self.variant.lanes,
            args=[arg for arg in self.variant.args if arg not in TODAY_ARGS],
            wait_until=self.variant.wait_until,
            hide_screen=self.variant.hide_screen,
            peak_mib=round(self.peak_bytes / 2**20),
            pdf_per_s_per_core=round(rate / cores, 2),
            pdf_per_s_per_gib=round(rate / gib, 2) if gib else None,
            alone_peak_mib=None if alone is None else round(alone / 2**20),
            pdf_per_s_per_gib_alone=round(rate / (alone / 2**30), 2) if alone else None,
            browser_cpu_ms_per_pdf=round(1000 * self.cpu_s / count, 1) if count else None,
            client_cpu_ms_per_pdf=round(1000 * self.client_cpu_s / count, 1) if count else None,
        )
        return row


@contextlib.asynccontextmanager
async def opened(lab: Lab, variant: Variant) -> AsyncIterator[Printer]:
    """Launch the variant's browsers (each marked, to find its processes) and warm pages."""
    markers = [secrets.token_hex(8) for _ in range(variant.browsers)]
    browsers = await asyncio.gather(
        *(
            lab.launcher.playwright.chromium.launch(
                executable_path=variant.executable or lab.launcher.executable_path,
                args=[*variant.args, browser.marker_arg(marker)],
            )
            for marker in markers
        )
    )
    lab.chromium_version = browsers[0].version
    printer = Printer(variant, list(browsers), [browser.marker_arg(m) for m in markers])
    try:
        await printer.open_pages()
        yield printer
    finally:
        await asyncio.gather(*(launched.close() for launched in browsers))


def _client_cpu_seconds() -> float:
    """This process's CPU time and its Playwright driver's."""
    own = os.times()
    driver = browser.driver_pid()
    spent = own.user + own.system
    return spent + (browser.process_cpu_seconds(driver) if driver is not None else 0.0)


def rounds(jobs: int, *, per_round: int = 8) -> list[int]:
    """Documents per variant in each round: short rounds, so that the machine's drift (it is
    shared) weighs on every variant alike."""
    count = max(1, jobs // per_round)
    return [jobs // count + (1 if index < jobs % count else 0) for index in range(count)]


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
