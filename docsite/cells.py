"""Text in a generated Markdown table cell: one line, HTML-escaped, pipes kept from splitting
the row; a JSON schema's limits in words. Shared by the generated reference pages."""

from __future__ import annotations

import html
import json
import re
from typing import Any

_BOUNDS = (
    ("minimum", "≥ {}"),
    ("maximum", "≤ {}"),
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "items ≥ {}"),
    ("maxItems", "items ≤ {}"),
    ("minProperties", "entries ≥ {}"),
)


# Characters Markdown would read inside raw HTML (links, emphasis, escapes, table cells).
_MARKDOWN = str.maketrans({char: f"&#{ord(char)};" for char in "[]()*_`\\|{}#+!~"})


def code(text: str) -> str:
    """Literal text (a field name, a pattern, a value), shown exactly as it is."""
    return "<code>" + html.escape(text, quote=False).translate(_MARKDOWN) + "</code>"


def prose(text: str) -> str:
    """A description: whitespace folded to one line, escaped (``<queue>-poison`` is text, not a
    tag), backticks kept as code."""
    escaped = html.escape(" ".join(str(text).split())).replace("|", "&#124;")
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def slug(text: str) -> str:
    """A section id from a path or a name (``spec.queue`` -> ``spec-queue``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "root"


def bounds(schema: dict[str, Any]) -> str:
    """A schema's limits on a value (numbers, lengths, sizes, enum, pattern), one per line."""
    found = [text.format(schema[key]) for key, text in _BOUNDS if key in schema]
    if "enum" in schema:
        values = ", ".join(code(json.dumps(value)) for value in schema["enum"])
        found.append(f"one of {values}")
    if "pattern" in schema:
        found.append("pattern " + code(schema["pattern"]))
    return "<br>".join(found)
