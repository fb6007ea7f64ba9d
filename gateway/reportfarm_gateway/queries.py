"""Query parameters as the OpenAPI document declares them.

A /v1 call with a query parameter its operation does not take (a typo such as ``?templte=``),
one given twice, or a value outside the parameter's schema is refused with a 400 naming it,
before the handler runs: nothing is silently ignored or silently read as a default. The rules come
from :mod:`reportfarm_gateway.openapi`, so the document and the gateway cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from multidict import MultiMapping

# The schema keywords a query parameter may use; tests/gateway check that the document's query
# parameters use no other, so a new keyword cannot be silently skipped here. "format" is not
# checked here: the handler of the one parameter that has one (callback_url) checks it whole.
KEYWORDS = frozenset({"type", "enum", "pattern", "maxLength", "format"})

Rules = dict[str, dict[str, Any]]


def rules_of(document: Mapping[str, Any]) -> dict[tuple[str, str], Rules]:
    """(METHOD, path template) -> {parameter name: schema}, for every /v1 operation."""
    rules: dict[tuple[str, str], Rules] = {}
    for path, operations in document["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            rules[(method.upper(), path)] = {
                parameter["name"]: parameter.get("schema", {})
                for parameter in operation.get("parameters", [])
                if parameter["in"] == "query"
            }
    return rules


def _value_problem(name: str, value: str, schema: Mapping[str, Any]) -> str | None:
    if "enum" in schema and value not in schema["enum"]:
        return f"{name} is one of {', '.join(schema['enum'])}"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{name} is at most {schema['maxLength']} characters"
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        return f"{name} must match {schema['pattern']}"
    return None


def problems(query: MultiMapping[str], rules: Rules) -> list[str]:
    """What is wrong with this query string for an operation with these rules (empty: nothing)."""
    found = []
    unknown = sorted({name for name in query if name not in rules})
    if unknown:
        takes = ", ".join(sorted(rules)) if rules else "none"
        shown = ", ".join(repr(name[:64]) for name in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        found.append(f"unknown query parameter(s) {shown}{more} (this call takes: {takes})")
    for name, schema in rules.items():
        values = query.getall(name, [])
        if len(values) > 1:
            found.append(f"query parameter {name} is given {len(values)} times")
        elif values:
            problem = _value_problem(name, values[0], schema)
            if problem is not None:
                found.append(problem)
    return found
