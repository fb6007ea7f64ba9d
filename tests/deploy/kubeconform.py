"""kubeconform with schemas taken from a live API server's ``/openapi/v2``.

The server publishes every served kind, CRDs included (once established), as OpenAPI v2
definitions. :func:`write_schemas` turns the ones a set of manifests needs into standalone JSON
schemas, strict as kubeconform's ``-strict`` schemas are (an object with properties rejects
unknown ones, unless it preserves unknown fields), named for the location template
:data:`LOCATION`. Int-or-string fields and quantities accept strings and numbers, as the server does.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LOCATION = "{{ .Group }}_{{ .ResourceAPIVersion }}_{{ .ResourceKind }}.json"
_REF = "#/definitions/"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def file_name(api_version: str, kind: str) -> str:
    """What kubeconform makes of LOCATION: core ``v1`` is Group ``v1``, version ``v1``."""
    parts = api_version.split("/")
    return f"{parts[0]}_{parts[-1]}_{kind.lower()}.json"


def gvks(openapi: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(apiVersion, kind) -> definition name, for every kind the server serves."""
    found = {}
    for name, definition in openapi["definitions"].items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            found[(version, gvk["kind"])] = name
    return found


def _strict(schema: Any) -> Any:
    """A copy of one schema node, made strict; walks only schema positions (a property may well
    be named ``properties`` or ``type``, as in the CRD's own schema)."""
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    if "properties" in node:
        node["properties"] = {k: _strict(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            node[key] = _strict(node[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strict(item) for item in node[key]]
    if node.get("x-kubernetes-int-or-string") is True or node.get("format") == "int-or-string":
        node.pop("type", None)
        node.pop("format", None)
        node["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    closed = "additionalProperties" in node or node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and not closed:
        node["additionalProperties"] = False
    return node


def _references(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            yield ref.removeprefix(_REF)
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def standalone(openapi: dict[str, Any], definition: str) -> dict[str, Any]:
    """One definition with the definitions it references, transitively, made strict."""
    definitions = openapi["definitions"]
    needed, pending = set(), [definition]
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending.extend(_references(definitions[name]))
    closure = {name: _strict(definitions[name]) for name in sorted(needed)}
    if _QUANTITY in closure:
        closure[_QUANTITY] = {"oneOf": [{"type": "string"}, {"type": "number"}]}
    return {**closure[definition], "definitions": closure}


def write_schemas(
    openapi: dict[str, Any], manifests: Iterable[dict[str, Any]], directory: Path
) -> list[tuple[str, str]]:
    """Write the schema of every (apiVersion, kind) in ``manifests``; returns those not served."""
    served = gvks(openapi)
    missing = []
    for api_version, kind in sorted({(m["apiVersion"], m["kind"]) for m in manifests}):
        definition = served.get((api_version, kind))
        if definition is None:
            missing.append((api_version, kind))
            continue
        schema = standalone(openapi, definition)
        (directory / file_name(api_version, kind)).write_text(json.dumps(schema))
    return missing


def validate(
    kubeconform: Path, manifests: str, directory: Path
) -> subprocess.CompletedProcess[str]:
    """``kubeconform -strict`` on a YAML stream, with the schemas of ``directory`` only."""
    return subprocess.run(
        [
            str(kubeconform),
            "-strict",
            "-summary",
            "-schema-location",
            str(directory / LOCATION),
        ],
        input=manifests,
        capture_output=True,
        text=True,
        timeout=120,
    )


def summary_counts(output: str) -> dict[str, int]:
    """``Summary: 9 resources found parsing stdin - Valid: 9, Invalid: 0, ...`` as numbers."""
    return {key.lower(): int(n) for key, n in re.findall(r"(\w+): (\d+)", output)}
