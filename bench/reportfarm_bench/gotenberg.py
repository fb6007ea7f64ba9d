"""Gotenberg, the HTML-to-PDF server users pick instead of us, as ``reportfarm bench gotenberg``
runs it.

- :func:`form` maps our :class:`~reportfarm.contract.PdfOptions` to Gotenberg's form fields, so
  both sides print the same page (Gotenberg's defaults differ: Letter, 0.39 in margins, no
  backgrounds, the CSS page size ignored).
- :func:`serving` starts a binary built by ``scripts/gotenberg/build.sh`` in its own PID namespace
  (``unshare --pid --fork --mount-proc``): when Gotenberg restarts or stops its browser it kills
  every process whose command line contains ``chromium/chromium``, which would be ours too.
- :func:`flags` is the configuration, as a competent user would set it for this machine; the
  report prints it.
- :func:`choose` picks the Chromium each Gotenberg side is given: the same binary as ours (the
  same parts), and Debian's full ``chromium``, the one Gotenberg's official image runs
  (``CHROMIUM_BIN_PATH=/usr/bin/chromium``, the Debian wrapper script).
- :class:`Client` posts one document to ``/forms/chromium/convert/html``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shutil
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


SAME, IMAGE = "same", "image"
"""``--gotenberg-chromium`` words: the Chromium our pool runs; Debian's full ``chromium``."""
IMAGE_CHROMIUM = "chromium"
"""What Gotenberg's official image runs (it installs Debian's ``chromium`` and sets
``CHROMIUM_BIN_PATH=/usr/bin/chromium``): looked up on PATH."""
SIDE_NAMES = {SAME: "gotenberg", IMAGE: "gotenberg_full"}
IMAGE_WHICH = "Debian's full chromium, as Gotenberg's image runs it"


@dataclasses.dataclass(frozen=True)
class Choice:
    """One Gotenberg side: its name in the report and the Chromium it is given."""

    name: str
    chromium: str | None
    """The binary (CHROMIUM_BIN_PATH); None for a running Gotenberg (its own) or a missing one."""
    which: str
    """Which Chromium that is, in words, for the report."""
    skipped: str | None = None
    """Why this side is not run (the binary is not installed)."""


def choose(words: list[str], *, ours: str, image: str | None) -> list[Choice]:
    """The Gotenberg sides for ``--gotenberg-chromium``'s words (``same``, ``image`` or a path),
    one per distinct binary: the one that is ours is ``gotenberg``, Debian's full ``chromium``
    (``image``) is ``gotenberg_full``, any other ``gotenberg_<its file name>``."""
    chosen: dict[str, Choice] = {}
    for word in words:
        if word == IMAGE and image is None:
            chosen.setdefault(
                SIDE_NAMES[IMAGE],
                Choice(
                    SIDE_NAMES[IMAGE],
                    None,
                    IMAGE_WHICH,
                    skipped=f"no `{IMAGE_CHROMIUM}` on PATH (Debian's full browser)",
                ),
            )
            continue
        path = {SAME: ours, IMAGE: image}.get(word, word)
        assert path is not None
        choice = _choice(path, ours=ours, image=image, taken=set(chosen))
        if not any(_same_file(c.chromium, path) for c in chosen.values() if not c.skipped):
            chosen[choice.name] = choice
    return list(chosen.values())


def image_chromium() -> str | None:
    """Debian's full ``chromium`` on PATH, as Gotenberg's image runs it."""
    return shutil.which(IMAGE_CHROMIUM)


def _choice(path: str, *, ours: str, image: str | None, taken: set[str]) -> Choice:
    is_ours, is_image = _same_file(path, ours), _same_file(path, image)
    if is_ours:
        which = "the same binary as ours" + (
            ", and the one Gotenberg's image runs (Debian's full chromium)" if is_image else ""
        )
        return Choice(SIDE_NAMES[SAME], path, which)
    if is_image:
        return Choice(SIDE_NAMES[IMAGE], path, IMAGE_WHICH)
    name = "gotenberg_" + re.sub(r"\W+", "_", Path(path).name).strip("_").lower()
    base, index = name, 2
    while name in taken or name in SIDE_NAMES.values():
        name, index = f"{base}_{index}", index + 1
    return Choice(name, path, "given by --gotenberg-chromium")


def _same_file(one: str | None, other: str | None) -> bool:
    if one is None or other is None:
        return False
    return os.path.realpath(one) == os.path.realpath(other)


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
                raise GotenbergError(f"Gotenberg exited: {why(log.read_text(errors='replace'))}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url + "/health") as response:
                    if response.status == 200:
                        async with session.get(url + "/version") as answer:
                            return (await answer.text()).strip()
            await asyncio.sleep(0.2)
    raise GotenbergError(f"Gotenberg not healthy in {START_TIMEOUT_S:.0f} s")


def why(log: str) -> str:
    """What a Gotenberg that exited said: its log from the first FATAL line on (the message may
    span lines), else the end of its log."""
    lines = log.splitlines()
    first = next((i for i, line in enumerate(lines) if "FATAL" in line), None)
    if first is None:
        return log[-2000:]
    return " ".join(line.strip() for line in lines[first:] if line.strip())[:2000]


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
