"""The visible signature's stamp: pyHanko's text stamp, its lines set in several faces.

pyHanko's text box sets all its text in one font; a stamp that says who signed, why and where may
mix scripts no single face has (a Polish name, a reason in Arabic, a place in Hebrew). Here each
line is cut into runs (:func:`.fonts.runs`), each run shaped by HarfBuzz in its own face through
pyHanko's OpenType engine (a subset of each face used is embedded), and the runs placed left to
right in visual order.

Each face's program is prepared once per process: HarfBuzz shapes with the whole face (its
layout tables: Arabic's joining forms, marks), and pyHanko's subset for the PDF is cut from a copy
without the layout tables (a PDF's font needs none: the glyphs are chosen already). fontTools
reads and closes every layout table of a face it subsets, even ones it drops: cut from the whole
Noto Sans, a stamp's subset took ~250 ms of CPU; from the copy, ~25 ms. The CJK face (CID-keyed
CFF outlines, which pyHanko embeds as a CFF program) is parsed once per process too, and its
subsets kept by glyph set like the others': pyHanko's engine parsed it for every stamp (~0.13 s of
CPU) and cut its subset each time (~0.18 s), so a stamp with a name in Chinese cost ~0.36 s of CPU
where a Latin one cost ~0.03 s; now ~0.02-0.05 s."""

from __future__ import annotations

import dataclasses
import functools
import io
from typing import TYPE_CHECKING, Any

from pyhanko.pdf_utils import layout
from pyhanko.pdf_utils.content import ResourceType
from pyhanko.pdf_utils.font.api import FontEngine, FontEngineFactory
from pyhanko.pdf_utils.generic import pdf_name
from pyhanko.pdf_utils.text import TextBox, TextBoxStyle
from pyhanko.pdf_utils.writer import BasePdfFileWriter
from pyhanko.stamp import TextStamp, TextStampStyle

from . import fonts

if TYPE_CHECKING:
    from pyhanko.pdf_utils.font.opentype import GlyphAccumulator

FONT_SIZE = 10
LAYOUT_TABLES = ("GSUB", "GPOS", "GDEF", "BASE", "JSTF", "MATH")
"""What HarfBuzz shapes with and a PDF's embedded font never needs."""


class _FaceFont(FontEngineFactory):
    """pyHanko's OpenType engine on a face held in memory (a face of a collection, which its own
    factory, reading a file by name, cannot open): shaped with the whole face, embedded as a
    subset of its outlines (see the module's docstring)."""

    def __init__(self, face: fonts.Face) -> None:
        self.face = face

    def create_font_engine(
        self, writer: BasePdfFileWriter, obj_stream: object = None
    ) -> GlyphAccumulator:
        import uharfbuzz

        if obj_stream is None and writer.stream_xrefs:
            obj_stream = writer.prepare_object_stream()
        engine_class = _engine_class()
        parsed = _parsed(self.face)
        if parsed is not None:  # the face's tables read once, not per stamp
            return engine_class.of_parsed(writer, self.face, parsed, obj_stream=obj_stream)
        engine = engine_class(
            writer=writer,
            font_handle=io.BytesIO(_outlines(self.face)),
            font_size=FONT_SIZE,
            obj_stream=obj_stream,
        )
        engine.face = self.face
        engine.hb_font = uharfbuzz.Font(_shaping(self.face))
        return engine


SUBSETS_KEPT = 256
"""Subsets kept per process: a stamp's glyphs (the labels, the signer, the digits of its date, a
reason and a place) repeat from job to job, and its subset is then taken as it was cut."""
_SUBSETS: dict[tuple[str, frozenset[int]], bytes] = {}


@functools.cache
def _engine_class() -> Any:
    """pyHanko's engine, with its TrueType subsets kept by glyph set (:data:`SUBSETS_KEPT`)."""
    from fontTools.ttLib import TTFont
    from pyhanko.pdf_utils.font.opentype import CIDFontType0, CIDFontType2, GlyphAccumulator

    class Engine(GlyphAccumulator):
        face: fonts.Face | None = None

        @classmethod
        def of_parsed(
            cls, writer: BasePdfFileWriter, face: fonts.Face, parsed: _Parsed, obj_stream: Any
        ) -> Engine:
            """An engine on ``parsed`` (shared, read only): what ``GlyphAccumulator.__init__``
            sets, without reading the face's tables again (TrueType: ~15-30 ms of CPU a stamp,
            most of a visible signature's own; CJK's CFF outlines: ~0.13 s). The subset is cut
            from a fresh copy (:meth:`_extract_subset`): fontTools subsets in place."""
            import uharfbuzz

            engine = cls.__new__(cls)
            FontEngine.__init__(
                engine,
                writer,
                parsed.ps_name,
                embedded_subset=True,
                obj_stream=obj_stream,
                font_size=FONT_SIZE,
            )
            engine.face = face
            engine.hb_font = uharfbuzz.Font(_shaping(face))
            engine.tt = parsed.tt
            engine._font_ref = writer.allocate_placeholder()
            if parsed.cff:  # CID-keyed outlines (CJK): embedded as pyHanko does, a CFF program
                engine.cff_charset = parsed.tt["CFF "].cff[0].charset
                engine.cidfont_obj = CIDFontType0(parsed.tt, parsed.ps_name, engine.subset_prefix)
                engine.use_raw_gids = engine.cidfont_obj.use_raw_gids
            else:
                engine.cff_charset = None
                engine.use_raw_gids = True
                engine.cidfont_obj = CIDFontType2(parsed.tt, parsed.ps_name, engine.subset_prefix)
            engine.features = None
            engine.units_per_em = parsed.units_per_em
            engine._glyphs = {}
            engine._glyph_set = parsed.glyph_set
            engine._cid_to_unicode = {}
            engine._GlyphAccumulator__reverse_cmap = None  # type: ignore[attr-defined]
            engine.ot_language_tag = engine.ot_script_tag = None
            engine.writing_direction = None
            engine.bcp47_lang_code = None
            engine._subset_created = engine._write_prepared = False
            return engine

        def _extract_subset(self, options: Any = None) -> None:
            assert self.face is not None
            key = (self.face.name, frozenset(self._glyphs))
            kept = _SUBSETS.get(key)
            if kept is not None:  # the same glyphs (ids kept): the same program
                self._adopt(TTFont(io.BytesIO(kept), lazy=True))
                return
            parsed = _parsed(self.face)
            if parsed is not None and self.tt is parsed.tt:  # never cut the shared one
                self.tt = TTFont(io.BytesIO(_outlines(self.face)))
            super()._extract_subset(options)
            self._adopt(self.tt)
            out = io.BytesIO()
            self.tt.save(out)
            while _SUBSETS and len(_SUBSETS) >= SUBSETS_KEPT:
                _SUBSETS.pop(next(iter(_SUBSETS)))  # the oldest
            if SUBSETS_KEPT > 0:
                _SUBSETS[key] = out.getvalue()

        def _adopt(self, tt: Any) -> None:
            """The font program ``tt`` is what the PDF embeds: a CFF one is written from its
            CFF table, named as ``CIDFontType0`` names it."""
            font = self.cidfont_obj
            font._tt = tt
            if isinstance(font, CIDFontType0):
                font.cff = tt["CFF "].cff
                font.cff[0].rawDict["FullName"] = f"{font.subset_prefix}+{font.name}"

    return Engine


@dataclasses.dataclass(frozen=True)
class _Parsed:
    """A TrueType face's tables, read once per process: what shaping and measuring read."""

    tt: Any
    glyph_set: Any
    ps_name: str
    units_per_em: int
    cff: bool = False
    """CID-keyed CFF outlines (the CJK face), not TrueType's ``glyf``."""


@functools.cache
def _parsed(face: fonts.Face) -> _Parsed | None:
    """``face``'s outlines parsed, every table a stamp reads loaded now (so threads only read);
    None for outlines of neither kind or a face without a PostScript name."""
    from fontTools.ttLib import TTFont

    tt = TTFont(io.BytesIO(_outlines(face)))
    cff = "CFF " in tt and "glyf" not in tt
    if "glyf" not in tt and not cff:
        return None
    for tag in ("head", "hhea", "hmtx", "maxp", "loca", "glyf", "CFF ", "cmap", "OS/2", "post"):
        if tag in tt:
            tt[tag]  # fontTools loads a table when it is first read
    tt["name"]
    tt.getGlyphOrder()
    names = [record for record in tt["name"].names if record.nameID == 6]
    if not names:
        return None
    return _Parsed(
        tt=tt,
        glyph_set=tt.getGlyphSet(preferCFF=True),
        ps_name=names[0].toUnicode(),
        units_per_em=tt["head"].unitsPerEm,
        cff=cff,
    )


@functools.cache
def _outlines(face: fonts.Face) -> bytes:
    """``face``'s program without its layout tables (the glyphs keep their ids)."""
    from fontTools.ttLib import TTFont

    font = TTFont(io.BytesIO(face.program), lazy=True)
    for tag in LAYOUT_TABLES:
        if tag in font:
            del font[tag]
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


@functools.cache
def _shaping(face: fonts.Face) -> object:
    """HarfBuzz's face of the whole program (read-only, shared by every stamp)."""
    import uharfbuzz

    return uharfbuzz.Face(face.program)


def warm() -> None:
    """Prepare the first face now, which every stamp uses (a finishing process does at start,
    not in its first job); the others when a stamp first needs them."""
    first = fonts.faces()[0]
    _outlines(first)
    _shaping(first)
    _parsed(first)


class _RunsBox(TextBox):
    """A text box whose lines are runs in several faces (``F1``, ``F2``...)."""

    def __init__(self, style: TextBoxStyle, writer: BasePdfFileWriter, resources: Any) -> None:
        super().__init__(style, writer, resources=resources, box=None)
        # the first face's engine (F1) is the text box's own: every stamp has Latin labels
        self._engines = {fonts.faces()[0].name: (self.font_name, self.font_engine)}

    def _engine(self, face: fonts.Face) -> tuple[str, FontEngine]:
        if face.name not in self._engines:
            assert self.writer is not None
            engine = _FaceFont(face).create_font_engine(self.writer)
            engine.font_size = self.style.font_size
            self._engines[face.name] = (f"F{len(self._engines) + 1}", engine)
        return self._engines[face.name]

    def put_string_line(self, txt: str) -> tuple[bytes, float]:
        size = self.style.font_size
        ops: list[bytes] = []
        advance = 0.0
        for run in fonts.runs(txt):
            name, engine = self._engine(run.face)
            engine.writing_direction = "rtl" if run.rtl else "ltr"  # type: ignore[attr-defined]
            shaped = engine.shape(run.text)
            ops.append(b"/%s %d Tf" % (name.encode("ascii"), size))
            ops.append(shaped.graphics_ops)
            advance += shaped.x_advance * size
        # the engine leaves the cursor after the last glyph: back to the line's start, one down
        ops.append(b"%g %g Td" % (-advance, -self.leading))
        return b" ".join(ops), abs(advance)

    def render(self) -> bytes:
        for name, engine in self._engines.values():
            if name != self.font_name:  # F1, the first face's: the text box sets it
                self.set_resource(
                    category=ResourceType.FONT,
                    name=pdf_name("/" + name),
                    value=engine.as_resource(),
                )
        return super().render()


class _Stamp(TextStamp):
    def _text_layout(self) -> bytes:
        assert self.writer is not None
        self.text_box = box = _RunsBox(
            self.style.text_box_style, writer=self.writer, resources=self.resources
        )
        box.content = self.style.stamp_text % (self.text_params or {})
        return box.render()


@dataclasses.dataclass(frozen=True)
class RunsStampStyle(TextStampStyle):
    def create_stamp(
        self, writer: BasePdfFileWriter, box: layout.BoxConstraints, text_params: dict
    ) -> TextStamp:
        return _Stamp(writer=writer, style=self, box=box, text_params=text_params)


def style() -> RunsStampStyle:
    """The stamp's style: a 1-point border, the text at 10 points, shrunk to fit the box."""
    first = fonts.faces()[0]
    return RunsStampStyle(
        stamp_text="%(text)s",
        text_box_style=TextBoxStyle(font=_FaceFont(first), font_size=FONT_SIZE),
        border_width=1,
        inner_content_layout=layout.SimpleBoxLayoutRule(
            x_align=layout.AxisAlignment.ALIGN_MIN,
            y_align=layout.AxisAlignment.ALIGN_MID,
            margins=layout.Margins.uniform(5),
            inner_content_scaling=layout.InnerScaling.SHRINK_TO_FIT,
        ),
    )
