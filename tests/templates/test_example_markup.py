"""The examples' markup is what a tagged PDF is built from: every element is a known HTML or SVG
element, tables have their header row in a thead with scope'd header cells, and every chart has
an accessible name. (An edit once turned each ``<thead>`` into ``<th scope="col"ead>``: Chromium
took it for a header cell, the tables lost their repeated header rows, and only this reads it.)"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from reportfarm_renderer import local, templates

HTML = set(
    "html head meta title style body div span p a b i em strong small sub sup br hr h1 h2 h3 h4 "
    "h5 h6 ul ol li dl dt dd table caption colgroup col thead tbody tfoot tr th td section header "
    "footer main article aside nav figure figcaption address time abbr code pre blockquote img "
    "link script".split()
)
SVG = set(
    "svg g path rect circle ellipse line polyline polygon text tspan title desc defs "
    "lineargradient stop clippath use marker pattern".split()
)


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def rendered() -> dict[str, list[tuple[str, dict[str, str | None]]]]:
    catalog = templates.TemplateCatalog.load(local.EXAMPLES / "templates")
    found = {}
    for item in local.example_submissions(None):
        if item.template not in found:
            parser = Elements()
            parser.feed(catalog.render(item.template, item.data))
            found[item.template] = parser.tags
    return found


EXAMPLES = rendered()


@pytest.mark.parametrize("template", sorted(EXAMPLES))
def test_every_element_is_a_known_one(template: str) -> None:
    unknown = {tag for tag, _ in EXAMPLES[template]} - HTML - SVG
    assert not unknown, unknown


@pytest.mark.parametrize("template", sorted(EXAMPLES))
def test_header_cells_say_what_they_head_and_charts_have_names(template: str) -> None:
    tags = EXAMPLES[template]
    assert [tag for tag, _ in tags].count("thead") >= 1
    cells = [attrs for tag, attrs in tags if tag == "th"]
    assert cells and all(attrs.get("scope") in ("col", "row") for attrs in cells)
    allowed = {"scope", "class", "colspan", "rowspan", "style", "id", "abbr"}
    assert all(set(attrs) <= allowed for attrs in cells), cells
    charts = [attrs for tag, attrs in tags if tag == "svg" and attrs.get("role") == "img"]
    assert all((attrs.get("aria-label") or "").strip() for attrs in charts)
