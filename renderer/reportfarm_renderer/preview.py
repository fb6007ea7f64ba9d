"""``reportfarm preview``: one template and one data file to one PDF, on this machine, no queue.

The fast loop while writing a template: load the folder as a renderer would (the same catalog,
sandbox and filters), render the data, print it with one Chromium, write the PDF. A template error
is one line naming the template's file and line, e.g. ``templates/invoice.html, line 12: ...``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import playwright.async_api
from rich.console import Console

from reportfarm import contract, renderer_api
from reportfarm_renderer import browser, templates

console = Console(stderr=True)


class PreviewError(Exception):
    """The template, the data or the browser failed; the message is one line."""


def load_data(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as error:
        raise PreviewError(f"cannot read {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise PreviewError(
            f"{path}, line {error.lineno}, column {error.colno}: not JSON ({error.msg})"
        ) from None
    if not isinstance(data, dict):
        raise PreviewError(f"{path}: the data must be one JSON object")
    return data


def render_html(folder: Path, template: str, data: Mapping[str, Any]) -> tuple[str, bool]:
    """The template's HTML and whether it runs JavaScript; errors name the file and line."""
    try:
        catalog = templates.TemplateCatalog.load(folder)
        return catalog.render(template, data), catalog.wants_javascript(template)
    except templates.TemplateLoadError as error:
        raise PreviewError(_where(folder, error.file, error.line) + error.reason) from None
    except templates.TemplateRenderError as error:
        raise PreviewError(_where(folder, error.file, error.line) + error.reason) from None
    except templates.TemplateError as error:
        raise PreviewError(str(error)) from None


async def print_pdf(html: str, *, javascript: bool) -> bytes:
    """One Chromium (REPORTFARM_CHROMIUM_PATH, else Playwright's, else the system's), one PDF."""
    executable = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    try:
        async with browser.ChromiumLauncher(executable_path=executable) as launcher:
            worker = await launcher.new_worker()
            try:
                return await worker.render(html, contract.PdfOptions(), javascript=javascript)
            finally:
                await worker.close()
    except playwright.async_api.Error as error:
        raise PreviewError(
            f"Chromium failed: {str(error).strip().splitlines()[0]} (install it with "
            "scripts/bootstrap.sh, or set REPORTFARM_CHROMIUM_PATH)"
        ) from None


def render(*, templates_dir: Path, template: str, data: Path, out: Path) -> float:
    """Write the PDF; the seconds it took."""
    began = time.monotonic()
    html, javascript = render_html(templates_dir, template, load_data(data))
    pdf = asyncio.run(print_pdf(html, javascript=javascript))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(pdf)
    return time.monotonic() - began


def quiet() -> None:
    """Only warnings from the renderer's loggers (their start-up lines mean nothing here),
    unless REPORTFARM_LOG_LEVEL asks for more."""
    if not os.environ.get("REPORTFARM_LOG_LEVEL"):
        logging.getLogger("reportfarm_renderer").setLevel(logging.WARNING)


def main(*, templates: Path, template: str, data: Path, out: Path | None) -> int:
    quiet()
    target = out or Path("out") / f"{template}.pdf"
    try:
        seconds = render(templates_dir=templates, template=template, data=data, out=target)
    except PreviewError as error:
        console.print(f"[red]error:[/] {error}", soft_wrap=True, highlight=False)
        return 2
    console.print(f"PDF: {target} ({seconds:.1f} s)", soft_wrap=True, highlight=False)
    return 0


def _where(folder: Path, file: str | None, line: int | None) -> str:
    if not file:
        return ""
    path = Path(file) if Path(file).is_absolute() else folder / file
    return f"{path}, line {line}: " if line is not None else f"{path}: "
