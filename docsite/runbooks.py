"""One runbook page per alert of ``charts/reportfarm/rules/alerts.yaml``.

The pages' text is written by hand (``docs/operating/runbooks/<alert in lower case>.md``); the
build holds them to the rules: the build fails when an alert has no page, a page has no alert, or
an alert's ``runbook_url`` does not name its page (the path under ``site_url``). Each page gets
the rule itself (severity, how long it must hold, the expression) from the rules file, and the
runbooks' index is generated, so neither can drift from what Prometheus evaluates.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from docsite import cells

SOURCE = Path(__file__).resolve().parents[1] / "charts" / "reportfarm" / "rules" / "alerts.yaml"
FOLDER = "operating/runbooks/"
INDEX = FOLDER + "index.md"


def alerts() -> dict[str, dict[str, Any]]:
    """Every alert rule by its page's name (the alert's name in lower case)."""
    groups = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))["groups"]
    return {
        rule["alert"].lower(): {**rule, "group": group["name"]}
        for group in groups
        for rule in group["rules"]
        if "alert" in rule
    }


def page_url(*, site_url: str, alert: str) -> str:
    """Where an alert's runbook is on the site."""
    return f"{site_url.rstrip('/')}/{FOLDER}{alert.lower()}/"


def add_pages(files: Files, *, config: MkDocsConfig) -> None:
    """Check the runbook pages and the alerts' runbook_url against the rules (a build error
    names every mismatch), then add the runbooks' generated index."""
    rules = alerts()
    pages = {
        file.src_uri.removeprefix(FOLDER).removesuffix(".md")
        for file in files
        if file.src_uri.startswith(FOLDER) and file.src_uri.endswith(".md")
    }
    problems = [
        f"alert {rule['alert']} has no page {FOLDER}{name}.md"
        for name, rule in rules.items()
        if name not in pages
    ]
    problems += [
        f"{FOLDER}{name}.md names no alert of {SOURCE.name}" for name in pages - set(rules)
    ]
    # By path: `mkdocs serve` moves site_url to its own address (the same path); the tests hold
    # the whole URL to mkdocs.yml's site_url.
    for rule in rules.values():
        wanted = urllib.parse.urlsplit(
            page_url(site_url=config.site_url or "", alert=rule["alert"])
        )
        found = rule.get("annotations", {}).get("runbook_url")
        if urllib.parse.urlsplit(str(found)).path != wanted.path:
            problems.append(
                f"alert {rule['alert']}: runbook_url is {found!r}, its page {wanted.path}"
            )
    if problems:
        raise PluginError("runbooks: " + "; ".join(problems))
    files.append(File.generated(config, INDEX, content=_index(rules)))


def with_rule(markdown: str, *, page: Page) -> str:
    """A runbook's Markdown with the rule, as Prometheus evaluates it, below its title."""
    name = page.file.src_uri.removeprefix(FOLDER).removesuffix(".md")
    rule = alerts().get(name) if page.file.src_uri.startswith(FOLDER) else None
    if rule is None:
        return markdown
    title, _, rest = markdown.partition("\n")
    return "\n".join([title, "", *_rule_block(rule), rest])


def _rule_block(rule: dict[str, Any]) -> list[str]:
    holds = f"true for {rule['for']}" if rule.get("for") else "true once (no `for:`)"
    return [
        f'!!! abstract "The rule: `{rule["alert"]}` ({rule["labels"]["severity"]})"',
        "",
        f"    Group `{rule['group']}` in `charts/reportfarm/rules/alerts.yaml`; fires when the "
        f"expression is {holds}.",
        "",
        "    ```text",
        *(f"    {line}" for line in rule["expr"].rstrip().splitlines()),
        "    ```",
        "",
        f"    **Summary:** {_summary(rule)}",
        "",
    ]


def _index(rules: dict[str, dict[str, Any]]) -> str:
    lines = [
        "# Runbooks",
        "",
        "One page per alert of the chart's PrometheusRule (`prometheusRule.enabled`); each alert's "
        "`runbook_url` annotation links its page here (`prometheusRule.runbookBaseUrl` points "
        "them at your own copy of this site). Generated from "
        "`charts/reportfarm/rules/alerts.yaml`.",
        "",
        "| Alert | Severity | Holds for | What it says |",
        "|---|---|---|---|",
    ]
    for name, rule in rules.items():
        lines.append(
            f"| [{rule['alert']}]({name}.md) | {rule['labels']['severity']} "
            f"| {rule.get('for', 'at once')} | {_summary(rule)} |"
        )
    return "\n".join(lines) + "\n"


def _summary(rule: dict[str, Any]) -> str:
    """The alert's summary, its label templates shown as placeholders (``<namespace>``)."""
    text = re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", r"<\1>", rule["annotations"]["summary"])
    return cells.prose(text)
