"""The documentation site: it builds with ``--strict`` (what scripts/test.sh runs), every alert's
``runbook_url`` is a page of the built site that names the alert, and the generated reference
pages cover their sources whole. A broken link, or an alert without its runbook, fails the build.

One build for the module (~3-9 s on 2 cores), offline; the failing builds use a copy of docs/.
"""

from __future__ import annotations

import html as html_lib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from reportfarm_gateway import openapi

from docsite import runbooks

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "reportpools.reportfarm.io.yaml"


class _ConfigLoader(yaml.SafeLoader):
    """mkdocs.yml as data: its ``!!python/name:`` tags (superfences' mermaid) read as None."""


_ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)


def config() -> dict[str, Any]:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_ConfigLoader)


def build(*, config_file: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config_file),
            "-d",
            str(site),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("site")
    done = build(config_file=ROOT / "mkdocs.yml", site=out)
    assert done.returncode == 0, done.stdout + done.stderr
    yield out


def page_text(site: Path, url: str) -> str:
    """The text of the built page a site URL names (a folder URL: its index.html)."""
    base = config()["site_url"]
    assert url.startswith(base), f"{url} is not on the site ({base})"
    path = site / url.removeprefix(base) / "index.html"
    assert path.is_file(), f"{url}: no page {path.relative_to(site)}"
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(runbooks.alerts()))
def test_each_alert_runbook_url_is_a_page_that_names_it(site: Path, name: str) -> None:
    rule = runbooks.alerts()[name]
    html = page_text(site, rule["annotations"]["runbook_url"])
    title = re.search(r"<h1[^>]*>(.*?)</h1>", html, re.S)
    assert title and rule["alert"] in title.group(1), f"the page's title is not {rule['alert']}"
    # The rule block, generated from alerts.yaml: its group and its whole expression.
    text = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", "", html)).split())
    assert rule["group"] in text
    assert " ".join(rule["expr"].split()) in text


def test_the_runbooks_index_links_every_alert(site: Path) -> None:
    html = page_text(site, config()["site_url"] + "operating/runbooks/")
    for name, rule in runbooks.alerts().items():
        assert f'href="{name}/"' in html, rule["alert"]


def test_the_reportpool_reference_covers_every_field(site: Path) -> None:
    html = html_lib.unescape(page_text(site, config()["site_url"] + "reference/reportpool/"))
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    names: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        for field, child in node.get("properties", {}).items():
            names.add(field)
            walk(child)
        if isinstance(node.get("items"), dict):
            walk(node["items"])

    walk(schema)
    assert len(names) > 50
    missing = [field for field in sorted(names) if f"<code>{field}</code>" not in html]
    assert not missing, f"fields not on the page: {missing}"
    assert "<code>connection-string</code>" in html  # a default, from the schema


def test_the_gateway_api_page_covers_every_operation_and_schema(site: Path) -> None:
    html = html_lib.unescape(page_text(site, config()["site_url"] + "reference/gateway-api/"))
    document = openapi.document()
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"{method.upper()} {path}" in html, f"{method} {path}"
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name.lower()}"' in html, name
    missing = [
        field
        for field in sorted(_property_names(document["components"]["schemas"].values()))
        if f"<code>{field}</code>" not in html
    ]
    assert not missing, f"properties not on the page: {missing}"


def _property_names(schemas: Iterable[dict[str, Any]]) -> set[str]:
    """Every property name in the schemas, inline objects and arrays' items included."""
    names: set[str] = set()
    for schema in schemas:
        properties = schema.get("properties", {})
        names |= set(properties)
        names |= _property_names(properties.values())
        if isinstance(schema.get("items"), dict):
            names |= _property_names([schema["items"]])
    return names


def _broken_copy(tmp_path: Path, *, change: str) -> Path:
    """mkdocs.yml and docs/ copied under tmp_path, with one fault in the copy."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("figures"))
    (docs / "figures").symlink_to(ROOT / "docs" / "figures")
    if change == "link":
        page = docs / "concepts.md"
        page.write_text(page.read_text() + "\nSee [the old page](no-such-page.md).\n")
    else:
        (docs / "operating" / "runbooks" / f"{change}.md").unlink()
    text = (ROOT / "mkdocs.yml").read_text()
    assert "  - mkdocs_hooks.py" in text and "docs_dir: docs" in text  # what the copy rewrites
    text = text.replace("  - mkdocs_hooks.py", f"  - {ROOT / 'mkdocs_hooks.py'}")
    text = text.replace("docs_dir: docs", f"docs_dir: {docs}")
    config_file = tmp_path / "mkdocs.yml"
    config_file.write_text(text)
    return config_file


@pytest.mark.parametrize(
    ("change", "said"),
    [
        pytest.param("link", "no-such-page.md", id="broken-link"),
        pytest.param("reportfarmpoisonmessages", "ReportFarmPoisonMessages", id="missing-runbook"),
    ],
)
def test_a_fault_fails_the_strict_build(tmp_path: Path, change: str, said: str) -> None:
    done = build(config_file=_broken_copy(tmp_path, change=change), site=tmp_path / "site")
    assert done.returncode != 0
    assert said in done.stdout + done.stderr
