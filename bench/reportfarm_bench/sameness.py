"""Did both sides print the same document? Same page count and the same text.

A speed comparison means nothing if one side prints less: each document goes once through our
pool and once through every Gotenberg side, and each of their PDFs must have as many pages and
the same text as ours.
Text is compared after NFKC normalisation (Chromium embeds CJK glyphs as Type 3 fonts, which
extract as radicals) with all whitespace removed (line breaks in extracted text follow glyph
positions, which two browser configurations may place a hair apart).
"""

from __future__ import annotations

import dataclasses
import io
import re
import unicodedata

import pypdf

_SPACE = re.compile(r"\s+")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One document's two PDFs, side by side."""

    document: str
    pages: tuple[int, int]
    """(ours, Gotenberg's)."""
    characters: tuple[int, int]
    """Characters of normalised text: (ours, Gotenberg's)."""
    same_text: bool
    first_difference: str | None = None
    """Around the first differing character: ours | theirs."""

    @property
    def same_pages(self) -> bool:
        return self.pages[0] == self.pages[1]

    @property
    def same(self) -> bool:
        return self.same_pages and self.same_text


def pages_and_text(pdf: bytes) -> tuple[int, str]:
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    text = "".join(page.extract_text() or "" for page in reader.pages)
    return len(reader.pages), _SPACE.sub("", unicodedata.normalize("NFKC", text))


def compare(document: str, ours: bytes, theirs: bytes) -> Verdict:
    (our_pages, our_text), (their_pages, their_text) = pages_and_text(ours), pages_and_text(theirs)
    return Verdict(
        document=document,
        pages=(our_pages, their_pages),
        characters=(len(our_text), len(their_text)),
        same_text=our_text == their_text,
        first_difference=_first_difference(our_text, their_text),
    )


def summary(verdicts: list[Verdict]) -> dict[str, object]:
    return {
        "documents": len(verdicts),
        "same_pages": sum(v.same_pages for v in verdicts),
        "same_text": sum(v.same_text for v in verdicts),
        "all_same": bool(verdicts) and all(v.same for v in verdicts),
        "pages": [list(v.pages) for v in verdicts],
        "differences": [
            {"document": v.document, "pages": list(v.pages), "around": v.first_difference}
            for v in verdicts
            if not v.same
        ],
    }


def _first_difference(ours: str, theirs: str, *, context: int = 20) -> str | None:
    if ours == theirs:
        return None
    index = next(
        (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
        min(len(ours), len(theirs)),
    )
    start = max(0, index - context)
    return f"{ours[start : index + context]!r} | {theirs[start : index + context]!r}"
