"""Header and footer templates: what they may reference (inline ``data:`` resources only).

Chromium prints ``pdf.header_template`` and ``pdf.footer_template`` in a page of its own, outside
the document: the network guard's interception never sees their requests, and a stylesheet it
cannot load makes the whole print fail ("Printing failed"). So a margin template must be
self-contained: every URL it names is a ``data:`` URL (or a ``#fragment``).

:func:`external_references` finds the others, in markup (any URL-bearing attribute, ``<base>``,
a meta refresh, an ``<iframe srcdoc>``'s document) and in CSS (``url()``, ``image-set()``,
``@import``, in ``<style>`` and ``style`` attributes, CSS escapes and comments undone first).
The contract refuses such templates at the edge (a 400 from the gateway, a ContractError from the
client, an invalid message in the renderer) and the renderer checks again before printing (a
document error, the browser untouched). A print that fails anyway (a ``data:`` stylesheet that
imports a URL, say) is a document error too: see ``reportfarm_renderer.browser``.
"""

from __future__ import annotations

import html.parser
import re

URL_ATTRIBUTES = frozenset(
    {
        "action", "archive", "background", "cite", "code", "codebase", "data", "dynsrc",
        "formaction", "href", "icon", "imagesrcset", "longdesc", "lowsrc", "manifest", "ping",
        "poster", "profile", "src", "srcset", "usemap", "xlink:href",
    }
)  # fmt: skip
"""Attributes whose value the browser may fetch."""
_INLINE = ("data:", "#")
_CSS_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})[ \t\r\n\f]?|\\(.)", re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?(\*/|\Z)", re.DOTALL)
_CSS_FETCH = re.compile(
    r"(?:url|image-set|image|src|cross-fade|-webkit-image-set)\(\s*['\"]?([^'\")\s]*)"
    r"|@import\s*['\"]?([^'\";\s]*)",
    re.IGNORECASE,
)


def external_references(template: str) -> list[str]:
    """The URLs (or constructs) in a margin template that are not inline; empty when it is safe."""
    if not template:
        return []
    finder = _Finder()
    finder.feed(template)
    finder.close()
    return finder.found


def css_references(css: str) -> list[str]:
    """What a piece of CSS would fetch that is not a ``data:`` URL (``@import`` always counts)."""
    plain = _CSS_COMMENT.sub("", _unescape_css(css))
    found = []
    for match in _CSS_FETCH.finditer(plain):
        target = match.group(1) if match.group(1) is not None else match.group(2)
        if not target.lower().startswith(_INLINE) and (target or match.group(2) is not None):
            found.append(target or match.group(0))
    return found


def _unescape_css(css: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            code = int(match.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF else "\ufffd"
        return match.group(2)

    return _CSS_ESCAPE.sub(replace, css)


class _Finder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        if tag == "base":
            self.found.append("<base>")
        for name, value in attrs:
            value = (value or "").strip()
            if name == "style":
                self.found.extend(css_references(value))
            elif name == "srcdoc":
                self.found.extend(external_references(value))
            elif name == "http-equiv" and value.lower() == "refresh":
                self.found.append("<meta http-equiv=refresh>")
            elif (name in URL_ATTRIBUTES or name.endswith(":href")) and value:
                candidates = (
                    [part.strip() for part in value.split(",")] if "srcset" in name else [value]
                )
                self.found.extend(
                    candidate.strip()
                    for candidate in candidates
                    if candidate.strip() and not candidate.strip().lower().startswith(_INLINE)
                )

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self._in_style = False

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.found.extend(css_references(data))
