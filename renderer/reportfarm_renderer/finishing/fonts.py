"""The faces that draw the text the farm writes itself: the signature stamp (set by pyHanko with
:mod:`.stamp`) and the watermark (printed by Chromium, whose fontconfig falls back to the same
installed faces), and the check that every character of that text has a glyph in one of them.

The faces are Debian's Noto: ``fonts-noto-core`` (Latin, Greek and Cyrillic in Noto Sans; Arabic,
Hebrew, Thai, Devanagari, Armenian, Georgian, symbols) and ``fonts-noto-cjk`` (Chinese, Japanese,
Korean). A run of text is set in the first face of :data:`FACES` that has its letters
(:func:`runs`); a character no face has is refused before the print (:func:`refuse_undrawable`),
with the field and the character named, instead of a ``.notdef`` box in a PDF that claims PDF/A.
Emoji are refused already by the contract: the only emoji face Debian has (Noto Color Emoji) is a
bitmap font that PDF/A cannot embed as a font.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import unicodedata
from pathlib import Path

from reportfarm.finishing import Finish, FinishError

logger = logging.getLogger(__name__)

FONT_ROOTS = (Path("/usr/share/fonts"),)
"""Where the faces are looked for (every distribution puts them under it, in its own folders)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FaceSpec:
    file: str
    """The font file's name (searched under :data:`FONT_ROOTS`)."""
    face: str | None = None
    """The face's family name, for a collection (``.ttc``)."""
    package: str = "fonts-noto-core"


FACES = (
    FaceSpec(file="NotoSans-Regular.ttf"),  # Latin (all of Europe's), Greek, Cyrillic
    FaceSpec(file="NotoSansArabic-Regular.ttf"),
    FaceSpec(file="NotoSansHebrew-Regular.ttf"),
    FaceSpec(file="NotoSansThai-Regular.ttf"),
    FaceSpec(file="NotoSansDevanagari-Regular.ttf"),
    FaceSpec(file="NotoSansArmenian-Regular.ttf"),
    FaceSpec(file="NotoSansGeorgian-Regular.ttf"),
    FaceSpec(file="NotoSansCJK-Regular.ttc", face="Noto Sans CJK SC", package="fonts-noto-cjk"),
    FaceSpec(file="NotoSansSymbols-Regular.ttf"),
    FaceSpec(file="NotoSansSymbols2-Regular.ttf"),
)
"""In order of preference: a letter is set in the first face that has it."""


@dataclasses.dataclass(frozen=True, eq=False)
class Face:
    name: str
    path: Path
    cmap: frozenset[int]
    spec: FaceSpec

    @functools.cached_property
    def program(self) -> bytes:
        """The font program (one face of a collection), as pyHanko embeds it."""
        if self.spec.face is None:
            return self.path.read_bytes()
        from fontTools.ttLib import TTCollection

        faces = TTCollection(str(self.path), lazy=True).fonts
        face = next(font for font in faces if font["name"].getDebugName(1) == self.spec.face)
        out = io.BytesIO()
        face.save(out)
        return out.getvalue()


@functools.cache
def faces() -> tuple[Face, ...]:
    """The faces of :data:`FACES` installed here (their character maps read once); a missing one
    is logged, and its script then refused."""
    from fontTools.ttLib import TTCollection, TTFont

    found: dict[str, Path] = {}
    for root in FONT_ROOTS:
        if root.is_dir():
            for file in sorted(root.rglob("*.tt[fc]")):
                found.setdefault(file.name, file)
    loaded: list[Face] = []
    for spec in FACES:
        path = found.get(spec.file)
        if path is None:
            logger.warning("font %s is not installed (Debian: %s)", spec.file, spec.package)
            continue
        try:
            if spec.face is None:
                font = TTFont(str(path), lazy=True)
            else:
                collection = TTCollection(str(path), lazy=True).fonts
                font = next(f for f in collection if f["name"].getDebugName(1) == spec.face)
            name = font["name"].getDebugName(4) or spec.file
            loaded.append(Face(name, path, frozenset(font.getBestCmap()), spec))
        except Exception as error:  # a broken file: the others still draw
            logger.warning("cannot read font %s: %s", path, error)
    return tuple(loaded)


def silent(char: str) -> bool:
    """A character that needs no glyph: white space and format characters (ZWJ, bidi marks)."""
    return char.isspace() or unicodedata.category(char) == "Cf"


def face_for(char: str, available: tuple[Face, ...]) -> Face | None:
    code = ord(char)
    return next((face for face in available if code in face.cmap), None)


def undrawable(text: str, available: tuple[Face, ...] | None = None) -> str | None:
    """The first character of ``text`` that no face draws, or None."""
    available = faces() if available is None else available
    for char in text:
        if not silent(char) and face_for(char, available) is None:
            return char
    return None


def describe(char: str) -> str:
    name = unicodedata.name(char, "unnamed")
    return f"U+{ord(char):04X} {name} ({char!r})"


def check(text: str | None, where: str, available: tuple[Face, ...] | None = None) -> None:
    """FinishError naming ``where`` and the character if a character of ``text`` has no face."""
    char = undrawable(text or "", available)
    if char is not None:
        raise FinishError(
            f"{where} holds {describe(char)}, which no font of the farm draws "
            f"(Noto: {', '.join(spec.file.split('-')[0] for spec in FACES)})"
        )


def refuse_undrawable(finish: Finish) -> None:
    """The text the farm draws itself (watermark, visible stamp), checked before the print."""
    if finish.watermark is not None:
        check(finish.watermark.text, "finish.watermark.text")
    if finish.sign is not None and finish.sign.visible:
        check(finish.sign.reason, "finish.sign.reason")
        check(finish.sign.location, "finish.sign.location")


def drawable(text: str, available: tuple[Face, ...] | None = None) -> str:
    """``text`` with each character no face draws written as ``U+XXXX`` (for a signer's name:
    a certificate is never a reason not to start)."""
    available = faces() if available is None else available
    return "".join(
        char if silent(char) or face_for(char, available) else f"U+{ord(char):04X}" for char in text
    )


@dataclasses.dataclass(frozen=True)
class Run:
    text: str
    face: Face
    rtl: bool


def runs(line: str, available: tuple[Face, ...] | None = None) -> list[Run]:
    """``line`` cut into runs of one face and one direction, in visual order (left to right).

    The line is left to right (the stamp's labels are English); a stretch from one right-to-left
    letter (Hebrew, Arabic) to the last before a left-to-right letter is shown reversed as a whole,
    its numbers left to right: the part of Unicode's bidi algorithm a one-line stamp needs.
    A letter takes the first face that has it; a mark, digit, space or punctuation stays in the
    face of the run it follows when that face has it."""
    available = faces() if available is None else available
    out: list[Run] = []
    for text, rtl in _direction_spans(line):
        pieces = _face_runs(text, available, rtl=rtl)
        out.extend(reversed(pieces) if rtl else pieces)
    return out


def _direction_spans(line: str) -> list[tuple[str, bool]]:
    kinds = [unicodedata.bidirectional(char) for char in line]
    spans: list[tuple[str, bool]] = []
    start = index = 0
    while index < len(line):
        if kinds[index] in ("R", "AL"):
            end = index
            for probe in range(index, len(line)):
                if kinds[probe] == "L":
                    break
                if kinds[probe] in ("R", "AL"):
                    end = probe
            end = _numbers_after(kinds, end)
            if start < index:
                spans.append((line[start:index], False))
            spans.append((line[index : end + 1], True))
            start = index = end + 1
        else:
            index += 1
    if start < len(line):
        spans.append((line[start:], False))
    return spans


def _numbers_after(kinds: list[str], end: int) -> int:
    """A number after right-to-left text (``ירושלים 2026``) belongs to it (bidi rules W7, N1)."""
    probe = end + 1
    while probe < len(kinds) and kinds[probe] in ("WS", "CS"):
        probe += 1
    if probe < len(kinds) and kinds[probe] in ("EN", "AN"):
        while probe < len(kinds) and kinds[probe] in ("EN", "AN", "CS"):
            probe += 1
        return _numbers_after(kinds, probe - 1)
    return end


def _face_runs(text: str, available: tuple[Face, ...], *, rtl: bool) -> list[Run]:
    pieces: list[Run] = []
    current: Face | None = None
    chars: list[str] = []
    number = False  # inside a right-to-left span, numbers are runs of their own (left to right)
    for char in text:
        is_number = rtl and unicodedata.bidirectional(char) in ("EN", "AN")
        keep = current is not None and (silent(char) or not char.isalpha())
        face = (current if keep and current and ord(char) in current.cmap else None) or face_for(
            char, available
        )
        if face is None:  # refused before the print; a stamp never gets here
            face = current or available[0]
        if chars and (face is not current or is_number != number):
            pieces.append(Run("".join(chars), current or face, rtl and not number))
            chars = []
        current, number = face, is_number
        chars.append(char)
    if chars and current is not None:
        pieces.append(Run("".join(chars), current, rtl and not number))
    return pieces
