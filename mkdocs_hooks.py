"""The documentation site's build hooks (mkdocs.yml ``hooks:``), handing off to ``docsite``.

mkdocs loads a hook from its path with only the hook's own folder on ``sys.path``: this entry sits
at the root so that ``docsite`` imports, and the modules there stay plain, typed modules.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from docsite import api_reference, crd_reference, runbooks

_GENERATORS = (crd_reference, api_reference, runbooks)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """``mkdocs serve`` rebuilds when a generated page's source changes."""
    for generator in _GENERATORS:
        config.watch.append(str(generator.SOURCE))
    return config


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """The generated pages join the hand-written ones (before the nav is built)."""
    for generator in _GENERATORS:
        generator.add_pages(files, config=config)
    return files


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    return runbooks.with_rule(markdown, page=page)
