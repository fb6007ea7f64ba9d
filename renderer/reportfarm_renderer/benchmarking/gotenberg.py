"""Gotenberg, the HTML-to-PDF server users pick instead of us, as ``bench-gotenberg`` runs it.

- :func:`form` maps our :class:`~reportfarm.contract.PdfOptions` to Gotenberg's form fields, so
  both sides print the same page (Gotenberg's defaults differ: Letter, 0.39 in margins, no
  backgrounds, the CSS page size ignored).
- :func:`serving` starts a binary built by ``scripts/gotenberg/build.sh`` in its own PID namespace
  (``unshare --pid --fork --mount-proc``): when Gotenberg restarts or stops its browser it kills
  every process whose command line contains ``chromium/chromium``, which would be ours too.
- :func:`flags` is the configuration, as a competent user would set it for this machine; the
  report prints it.
- :class:`Client` posts one document to ``/forms/chromium/convert/html``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from reportfarm import azurite, contract

ROUTE = "/forms/chromium/convert/html"
REQUEST_TIMEOUT_S = 120.0
START_TIMEOUT_S = 60.0

PAPER_INCHES: dict[str, tuple[float, float]] = {
    "Letter": (8.5, 11),
    "Legal": (8.5, 14),
    "Tabloid": (11, 17),
    "Ledger": (17, 11),
    "A0": (33.1, 46.8),
    "A1": (23.4, 33.1),
    "A2": (16.54, 23.4),
    "A3": (11.7, 16.54),
    "A4": (8.27, 11.7),
    "A5": (5.83, 8.27),
    "A6": (4.13, 5.83),
}
"""Playwright's paper formats in inches (what ``page.pdf(format=...)`` prints); Gotenberg takes
the width and height only."""

PDF_ENGINE_FEATURES = (
    *("merge", "split", "flatten", "convert", "optimize-images", "read-metadata"),
    *("write-metadata", "encrypt", "embed", "embed-metadata", "read-bookmarks"),
    *("write-bookmarks", "watermark", "stamp", "rotate", "factur-x"),
)
"""Every ``--pdfengines-<feature>-engines`` flag: their defaults name qpdf, pdftk, LibreOffice
and ExifTool, which this build leaves out; empty means "whatever is there" (pdfcpu)."""


def form(options: contract.PdfOptions) -> dict[str, str]:
    """Gotenberg's form fields for ``options`` (lengths keep their units: Gotenberg converts
    pt, px, in, mm, cm and pc; a bare number is inches, and our bare numbers are zeros)."""
    fields = {
        "landscape": _bool(options.landscape),
        "printBackground": _bool(options.print_background),
        "preferCssPageSize": _bool(options.prefer_css_page_size),
        "scale": f"{options.scale:g}",
        "marginTop": options.margin_top,
        "marginRight": options.margin_right,
        "marginBottom": options.margin_bottom,
        "marginLeft": options.margin_left,
    }
    if options.width is not None and options.height is not None:
        fields.update(paperWidth=options.width, paperHeight=options.height)
    elif options.format is not None:
        width, height = PAPER_INCHES[options.format]
        fields.update(paperWidth=f"{width:g}in", paperHeight=f"{height:g}in")
    return fields


def header_footer(options: contract.PdfOptions) -> dict[str, str]:
    """The ``header.html`` and ``footer.html`` files (Gotenberg prints them when sent)."""
    if not options.display_header_footer:
        return {}
    return {
        "header.html": _page(options.header_template),
        "footer.html": _page(options.footer_template),
    }


def flags(*, port: int, concurrency: int, restart_after: int) -> list[str]:
    """The configuration: the browser's tabs match our pool size, restarts match our recycling,
    no queue limit (a 429 would end the benchmark), generous timeouts, Chromium launched at start
    (no cold first request), quiet logs as ours are."""
    return [
        f"--api-port={port}",
        "--api-bind-ip=127.0.0.1",
        f"--api-timeout={int(REQUEST_TIMEOUT_S)}s",
        "--api-disable-download-from",
        f"--chromium-max-concurrency={concurrency}",
        f"--chromium-restart-after={restart_after}",
        "--chromium-max-queue-size=0",
        "--chromium-auto-start",
        f"--chromium-start-timeout={int(START_TIMEOUT_S)}s",
        "--gotenberg-graceful-shutdown-duration=0s",
        "--log-level=warn",
        *(f"--pdfengines-{feature}-engines=" for feature in PDF_ENGINE_FEATURES),
    ]


def supported(binary: Path, wanted: list[str]) -> list[str]:
    """The flags of ``wanted`` that ``binary`` knows (``--help`` lists them): an older release,
    such as the one the Go module proxy serves, lacks some, and an unknown flag is fatal."""
    done = subprocess.run([str(binary), "--help"], capture_output=True, timeout=30, check=False)
    return known(wanted, (done.stdout + done.stderr).decode(errors="replace"))


def known(wanted: list[str], usage: str) -> list[str]:
    """The flags of ``wanted`` that a ``--help`` text lists."""
    listed = set(re.findall(r"--([a-z0-9-]+)", usage))
    return [flag for flag in wanted if flag.removeprefix("--").split("=")[0] in listed]


@dataclasses.dataclass(frozen=True)
class Server:
    """A running Gotenberg: its URL and, when we started it, the root of its process tree."""

    url: str
    pid: int | None
    version: str
    flags: list[str] = dataclasses.field(default_factory=list)
    """Its arguments, when we started it."""
    dropped: list[str] = dataclasses.field(default_factory=list)
    """Arguments of :func:`flags` this version does not know, left out."""


@contextlib.asynccontextmanager
async def serving(
    binary: Path, *, concurrency: int, restart_after: int, chromium: str
) -> AsyncIterator[Server]:
    """Start ``binary`` (with ``pdfcpu`` and ``chromium-hyphen-data`` beside it, as the build
    script leaves them) in its own PID namespace; stop it and everything it started on exit."""
    port = azurite.free_port()
    with tempfile.TemporaryDirectory(prefix="gotenberg-") as scratch:
        log = Path(scratch) / "gotenberg.log"
        wanted = flags(port=port, concurrency=concurrency, restart_after=restart_after)
        process, used = await asyncio.to_thread(
            _launch, binary, wanted, chromium=chromium, scratch=Path(scratch)
        )
        try:
            url = f"http://127.0.0.1:{port}"
            version = await _wait_ready(url, process, log)
            dropped = [flag for flag in wanted if flag not in used]
            yield Server(url, process.pid, version, flags=used, dropped=dropped)
        finally:
            await asyncio.to_thread(_stop, process)


class Client:
    """Posts documents to a Gotenberg: one HTTP session, as a user's service would keep."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        self._session = aiohttp.ClientSession(timeout=timeout)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def convert(self, html: str, options: contract.PdfOptions) -> bytes:
        assert self._session is not None, "use the client as an async context manager"
        for attempt in range(UNAVAILABLE_RETRIES + 1):
            data = aiohttp.FormData()
            data.add_field("files", html.encode(), filename="index.html", content_type="text/html")
            for name, content in header_footer(options).items():
                data.add_field("files", content.encode(), filename=name, content_type="text/html")
            for name, value in form(options).items():
                data.add_field(name, value)
            async with self._session.post(self.url + ROUTE, data=data) as response:
                body = await response.read()
                if response.status == 200:
                    return body
                # 503: its browser is restarting or busy; a competent client retries (as ours
                # redelivers), so a restart costs Gotenberg time, not the run.
                if response.status != 503 or attempt == UNAVAILABLE_RETRIES:
                    raise GotenbergError(
                        f"{response.status}: {body[:300].decode(errors='replace')}"
                    )
            await asyncio.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")


UNAVAILABLE_RETRIES = 5
"""How often a conversion Gotenberg answers with 503 is sent again."""


class GotenbergError(RuntimeError):
    """Gotenberg refused a conversion or did not start."""


def _launch(
    binary: Path, wanted: list[str], *, chromium: str, scratch: Path
) -> tuple[subprocess.Popen[bytes], list[str]]:
    folder = binary.resolve().parent
    used = supported(binary, wanted)
    command = [
        *("unshare", "--pid", "--fork", "--mount-proc", "--kill-child"),
        *([] if os.geteuid() == 0 else ["--map-root-user"]),
        str(binary),
        *used,
    ]
    env = {
        **os.environ,
        "TMPDIR": str(scratch),  # its uploads and browser profile, apart from ours
        "CHROMIUM_BIN_PATH": chromium,
        "CHROMIUM_HYPHEN_DATA_DIR_PATH": str(folder / "chromium-hyphen-data"),
        "PDFCPU_BIN_PATH": str(folder / "pdfcpu"),
        # As Gotenberg's own image sets them: no OpenTelemetry export.
        **{f"OTEL_{kind}_EXPORTER": "none" for kind in ("TRACES", "METRICS", "LOGS")},
    }
    with (scratch / "gotenberg.log").open("wb") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process, used


async def version(url: str) -> str:
    """What ``/version`` says (a running Gotenberg given by URL)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/version") as response:
        return (await response.text()).strip()


async def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise GotenbergError(f"Gotenberg exited: {log.read_text(errors='replace')[-2000:]}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url + "/health") as response:
                    if response.status == 200:
                        async with session.get(url + "/version") as answer:
                            return (await answer.text()).strip()
            await asyncio.sleep(0.2)
    raise GotenbergError(f"Gotenberg not healthy in {START_TIMEOUT_S:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to its process group (unshare and Gotenberg, the namespace's init: when it exits
    the kernel ends everything in the namespace), SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _page(template: str) -> str:
    return f"<html><head></head><body>{template or '<span></span>'}</body></html>"
