"""The gateway's HTTP API page, generated at build time from its OpenAPI document.

``reportfarm_gateway.openapi.document()`` is the document the gateway serves and that the
property-based tests hold the gateway to; this page is written from it, so it cannot drift: each
operation with its parameters, body and answers, then each schema with its properties.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from reportfarm_gateway import openapi

from docsite import cells

PAGE = "reference/gateway-api.md"
SOURCE = Path(openapi.__file__)
_METHODS = ("get", "put", "post", "delete", "patch")


def add_pages(files: Files, *, config: MkDocsConfig) -> None:
    """Add the generated page(s) to the site's files."""
    files.append(File.generated(config, PAGE, content=page(document=openapi.document())))


def page(*, document: dict[str, Any]) -> str:
    info = document["info"]
    lines = [
        "# Gateway HTTP API",
        "",
        f"Generated when the site is built from the gateway's OpenAPI {document['openapi']} "
        "document (`reportfarm_gateway/openapi.py`, the one the property-based tests check the "
        "gateway against).",
        "",
        cells.prose(info.get("description", "")),
        "",
        "## Operations",
    ]
    for path, operations in document["paths"].items():
        for method in _METHODS:
            if method in operations:
                lines += _operation(method=method, path=path, operation=operations[method])
    lines += ["", "## Schemas"]
    for name, schema in document["components"]["schemas"].items():
        lines += _schema(name=name, schema=schema)
    return "\n".join(lines) + "\n"


def operation_id(*, method: str, path: str) -> str:
    """The section id of an operation (``post-v1-reports``)."""
    return cells.slug(f"{method} {path}")


def _operation(*, method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"### {method.upper()} {path} {{#{operation_id(method=method, path=path)}}}",
        "",
        cells.prose(operation.get("summary", "")),
        "",
    ]
    if operation.get("description"):
        lines += [cells.prose(operation["description"]), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += [
            "| Parameter | In | Required | Type | Bounds | Description |",
            "|---|---|---|---|---|---|",
        ]
        for parameter in parameters:
            lines.append(
                f"| {cells.code(parameter['name'])} | {parameter['in']} "
                f"| {'yes' if parameter.get('required') else ''} "
                f"| {describe(parameter.get('schema', {}))} "
                f"| {cells.bounds(parameter.get('schema', {}))} "
                f"| {cells.prose(parameter.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        kinds = ", ".join(
            f"{cells.code(kind)} {describe(media.get('schema', {}))}"
            for kind, media in body["content"].items()
        )
        lines += [f"Body{' (required)' if body.get('required') else ''}: {kinds}", ""]
    lines += ["| Status | Meaning | Content |", "|---|---|---|"]
    for status, answer in sorted(operation["responses"].items()):
        content = "<br>".join(
            f"{cells.code(kind)} {describe(media.get('schema', {}))}"
            for kind, media in answer.get("content", {}).items()
        )
        headers = ", ".join(cells.code(name) for name in answer.get("headers", {}))
        meaning = cells.prose(answer.get("description", ""))
        if headers:
            meaning += f" Headers: {headers}."
        lines.append(f"| {status} | {meaning} | {content} |")
    return lines


def _schema(*, name: str, schema: dict[str, Any], level: str = "###") -> list[str]:
    """A schema's section: its properties as a table, then a section for each inline object
    among them (``Finish.metadata``)."""
    lines = ["", f"{level} {name} {{#{schema_id(name)}}}", ""]
    if schema.get("description"):
        lines += [cells.prose(schema["description"]), ""]
    properties = schema.get("properties")
    if not properties:
        return [*lines, f"Type: {describe(schema)}."]
    if schema.get("additionalProperties") is False:
        lines += ["Other properties are refused.", ""]
    lines += ["| Property | Type | Required | Bounds | Description |", "|---|---|---|---|---|"]
    required = set(schema.get("required", []))
    nested: list[str] = []
    for field, child in properties.items():
        kind = describe(child)
        inline = _inline_object(child)
        if inline is not None:
            section = f"{name}.{field}"
            kind = kind.replace("object", f"[object](#{schema_id(section)})", 1)
            nested += _schema(name=section, schema=inline, level="####")
        lines.append(
            f"| {cells.code(field)} | {kind} | {'yes' if field in required else ''} "
            f"| {cells.bounds(child)} | {cells.prose(child.get('description', ''))} |"
        )
    return lines + nested


def _inline_object(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The object with properties a schema holds in place (itself, or an array's items)."""
    if schema.get("properties"):
        return schema
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, dict) and items.get("properties"):
        return items
    return None


def schema_id(name: str) -> str:
    return "schema-" + cells.slug(name)


def describe(schema: dict[str, Any]) -> str:
    """A schema's type in words, a reference as a link to its section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{schema_id(name)})"
    for combiner, word in (("anyOf", " or "), ("oneOf", " or "), ("allOf", " and ")):
        if combiner in schema:
            return word.join(describe(part) for part in schema[combiner])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        kind = f"array of {describe(schema.get('items', {}))}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = f"map of {describe(schema['additionalProperties'])}"
    elif schema.get("format"):
        kind = f"{kind} ({schema['format']})"
    return kind + (" or null" if schema.get("nullable") else "")
