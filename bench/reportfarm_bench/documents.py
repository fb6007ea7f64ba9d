"""The benchmark's documents: the example reports and the batch lines, rendered to HTML once."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2.sandbox
from reportfarm_renderer import local, templates
from reportfarm_renderer.settings import RendererSettings

from reportfarm import contract
from reportfarm.settings import StorageSettings

TEMPLATES = local.EXAMPLES / "templates"


def settings(*, pool_size: int | None = None, chromium_path: str | None = None) -> RendererSettings:
    """The renderer's production defaults for a benchmark: the example templates, no storage (a
    benchmark that needs it replaces it), no HTTP port; ``pool_size`` None keeps the default."""
    sized = {} if pool_size is None else {"pool_size": pool_size}
    return RendererSettings.from_env(
        {},
        storage=StorageSettings(connection_string=None),
        templates=TEMPLATES,
        port=0,
        chromium_path=chromium_path,
        **sized,
    )


@dataclasses.dataclass(frozen=True)
class Document:
    """One report: its template and data (for strategies that render), and the HTML rendered up
    front (for those that only print)."""

    template: str
    data: Mapping[str, Any]
    pdf: contract.PdfOptions
    html: str

    @property
    def pdf_kwargs(self) -> dict[str, Any]:
        return self.pdf.playwright_kwargs()


def load(folder: Path = TEMPLATES) -> tuple[templates.TemplateCatalog, list[Document]]:
    """The catalog and every example job (``examples/data/*.json``, then ``batch.jsonl``)."""
    catalog = templates.TemplateCatalog.load(folder)
    documents = [
        Document(
            template=item.template,
            data=item.data,
            pdf=item.pdf or contract.PdfOptions(),
            html=catalog.render(item.template, item.data),
        )
        for item in local.example_submissions(None)
    ]
    return catalog, documents


class JinjasReads(templates._Sandbox):
    """The renderer's sandbox with Jinja's own attribute reads put back (no kept verdicts, a
    dict's items read after an attribute lookup fails): what the renderer's reads are held to."""

    is_safe_attribute = jinja2.sandbox.ImmutableSandboxedEnvironment.is_safe_attribute
    getattr = jinja2.sandbox.ImmutableSandboxedEnvironment.getattr


def load_with_jinjas_reads(folder: Path = TEMPLATES) -> templates.TemplateCatalog:
    """The catalog of ``folder`` compiled in :class:`JinjasReads` (for
    ``scripts/bench_templates.py`` and the tests that compare the two)."""
    sandbox = templates._Sandbox
    templates._Sandbox = JinjasReads  # type: ignore[misc]
    try:
        return templates.TemplateCatalog.load(folder)
    finally:
        templates._Sandbox = sandbox  # type: ignore[misc]
