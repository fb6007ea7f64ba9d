"""The ReportPool reference page, generated at build time from the CRD's schema.

``crds/reportpools.reportfarm.io.yaml`` is the single source: every field with its type, default,
bounds, the API server's validation rules and its description, one table per object, plus the
columns of ``kubectl get reportpools``. Nothing is copied by hand, so the page cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from docsite import cells

PAGE = "reference/reportpool.md"
SOURCE = Path(__file__).resolve().parents[1] / "crds" / "reportpools.reportfarm.io.yaml"


def add_pages(files: Files, *, config: MkDocsConfig) -> None:
    """Add the generated page(s) to the site's files."""
    crd = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    files.append(File.generated(config, PAGE, content=page(crd=crd)))


def page(*, crd: dict[str, Any]) -> str:
    """The whole reference page for a CustomResourceDefinition."""
    spec = crd["spec"]
    kind, group = spec["names"]["kind"], spec["group"]
    lines = [
        f"# {kind} reference",
        "",
        f"Generated when the site is built from `crds/{SOURCE.name}`, the CRD the cluster runs "
        "(`kubectl explain reportpool.spec` shows the same descriptions). Defaults are applied "
        "by the API server; the rules are CEL checks it runs on every write, each naming its "
        "field.",
        "",
        f"Group `{group}`, scope {spec['scope']}, plural `{spec['names']['plural']}`, short names "
        + ", ".join(f"`{name}`" for name in spec["names"].get("shortNames", []))
        + ".",
    ]
    for version in spec["versions"]:
        if version.get("served"):
            lines += _version(kind=kind, group=group, version=version)
    return "\n".join(lines) + "\n"


def _version(*, kind: str, group: str, version: dict[str, Any]) -> list[str]:
    name = version["name"]
    lines = ["", f"## {group}/{name}", ""]
    if version.get("storage"):
        lines += ["The version the API server stores.", ""]
    columns = version.get("additionalPrinterColumns", [])
    if columns:
        lines += [
            f"### kubectl get {kind.lower()}s {{#{name}-columns}}",
            "",
            "Columns with priority 1 show with `-o wide`.",
            "",
            "| Column | Type | Priority | From | Meaning |",
            "|---|---|---|---|---|",
        ]
        for column in columns:
            meaning = cells.prose(column.get("description", ""))
            lines.append(
                f"| {column['name']} | {column['type']} | {column.get('priority', 0)} "
                f"| {cells.code(column['jsonPath'])} | {meaning} |"
            )
    schema = version["schema"]["openAPIV3Schema"]
    for path, node in _objects("", schema):
        lines += _object_table(version=name, path=path, node=node)
    return lines


def _objects(path: str, node: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object with properties, depth first, with its dotted path (``[]``: an array's
    items)."""
    if node.get("properties"):
        yield path, node
        for name, child in node["properties"].items():
            yield from _objects(_join(path, name), child)
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        yield from _objects(path + "[]", node["items"])


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def anchor(*, version: str, path: str) -> str:
    """The section id of an object's table (``v1alpha1-spec-queue``)."""
    return f"{version}-{cells.slug(path)}"


def _object_table(*, version: str, path: str, node: dict[str, Any]) -> list[str]:
    title = path or "The resource"
    lines = ["", f"### {title} {{#{anchor(version=version, path=path)}}}", ""]
    if path and node.get("description"):
        lines += [cells.prose(node["description"]), ""]
    for rule in node.get("x-kubernetes-validations", []):
        lines.append(
            f"- Rule on {cells.code(rule.get('fieldPath', '.'))}: {cells.prose(rule['message'])}"
        )
    if node.get("x-kubernetes-validations"):
        lines.append("")
    lines += [
        "| Field | Type | Required | Default | Bounds | Description |",
        "|---|---|---|---|---|---|",
    ]
    required = set(node.get("required", []))
    for name, child in node["properties"].items():
        field = cells.code(name)
        child_path = _join(path, name)
        target = child if child.get("type") != "array" else child.get("items", {})
        if target.get("properties"):
            suffix = "[]" if child.get("type") == "array" else ""
            link = anchor(version=version, path=child_path + suffix)
            field = f"[{field}](#{link})"
        lines.append(
            f"| {field} | {type_name(child)} | {'yes' if name in required else ''} "
            f"| {_default(child)} | {cells.bounds(child)} "
            f"| {cells.prose(child.get('description', ''))} |"
        )
    return lines


def type_name(node: dict[str, Any]) -> str:
    """A field's type in words: ``quantity`` for Kubernetes' int-or-string, ``array of ...``."""
    if node.get("x-kubernetes-int-or-string"):
        return "quantity (int or string)"
    kind = str(node.get("type", "any"))
    if kind == "array":
        return f"array of {type_name(node.get('items', {}))}"
    if kind == "string" and node.get("format"):
        return f"string ({node['format']})"
    if kind == "object" and not node.get("properties") and node.get("additionalProperties"):
        return f"map of {type_name(node['additionalProperties'])}"
    return kind


def _default(node: dict[str, Any]) -> str:
    if "default" not in node:
        return ""
    value = node["default"]
    if isinstance(value, dict | list):
        return cells.code(yaml.safe_dump(value, default_flow_style=True).strip())
    return cells.code(str(value))
