"""Fixtures of the finishing tests: PDFs printed once by a real Chromium, the example invoice and
its Factur-X XML, a throwaway PKI for signing, and the renderer fixtures (Azurite, a client, the
example templates)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from reportfarm_renderer import browser, templates
from reportfarm_renderer.finishing import watermark

from reportfarm import contract, finishing
from tests.renderer import conftest as renderer_conftest
from tests.renderer.conftest import (  # noqa: F401  (fixtures)
    EXAMPLES,
    client,
    storage,
    template_dir,
    worker_process,
)

from . import invoices, rules
from .keys import Pki

TAGGED = contract.PdfOptions(tagged=True, outline=True)


@pytest.fixture(scope="session")
def invoice() -> dict[str, Any]:
    return invoices.load()


@pytest.fixture(scope="session")
def invoice_xml() -> bytes:
    return invoices.XML.read_bytes()


@pytest.fixture(scope="session")
def printed() -> Mapping[str, bytes]:
    """The example invoice printed by Chromium: ``plain``, ``tagged`` (structure tree and outline)
    and ``watermarked`` (the finishing watermark: transparent text over the page)."""
    catalog = templates.TemplateCatalog.load(EXAMPLES / "templates")
    html = catalog.render("invoice", invoices.load())
    marked = watermark.apply(html, finishing.Watermark(text="COPIE"))

    async def print_all() -> dict[str, bytes]:
        async with browser.ChromiumLauncher() as launcher:
            worker = await launcher.new_worker()
            try:
                return {
                    "plain": await worker.render(html, contract.PdfOptions(), javascript=False),
                    "tagged": await worker.render(html, TAGGED, javascript=False),
                    "watermarked": await worker.render(
                        marked, contract.PdfOptions(), javascript=False
                    ),
                }
            finally:
                await worker.close()

    return asyncio.run(print_all())


def example_data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "data" / f"{name}.json").read_text("utf-8"))
    return data


@pytest.fixture(scope="session")
def pki() -> Pki:
    return Pki.make()


@pytest.fixture
def signing_dir(tmp_path: Path, pki: Pki) -> Path:
    """The farm's signing Secret, mounted: tls.crt (signer + intermediate), tls.key, ca.crt."""
    return pki.write(tmp_path / "signing")


def renderer_settings(storage_settings: Any, templates: Path, **overrides: object) -> Any:
    """The renderer tests' settings, with EN 16931's rules (a renderer without refuses invoices)."""
    overrides.setdefault("en16931_xslt", rules.xslt())
    return renderer_conftest.renderer_settings(storage_settings, templates, **overrides)
