"""The ``sign`` stage on its own (no browser, no storage): the key loaded from a Secret-like folder
once, PAdES B-B signatures pyHanko's validator accepts, visible and invisible, on encrypted PDFs
too, and any change to a signed file breaking its signature."""

from __future__ import annotations

import io
import re
from pathlib import Path

import hypothesis
import pikepdf
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import strategies as st
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.diff_analysis import ModificationLevel
from pyhanko.sign.validation import validate_pdf_signature
from pyhanko.sign.validation.status import SignatureCoverageLevel
from reportfarm_renderer import finishing
from reportfarm_renderer.finishing import fonts, permissions, signing

from reportfarm.finishing import Finish, FinishError, Permissions, Signature

from .keys import SIGNER_NAME, Pki, certificate, key_pem, pem, rsa_key, signatures, validate


@pytest.fixture(scope="module")
def signer(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> signing.Signer:
    loaded = signing.Signer.load(pki.write(tmp_path_factory.mktemp("secret")))
    assert loaded is not None
    return loaded


def document(pages: int = 3, *, size: tuple[float, float] = (595, 842)) -> bytes:
    made = pikepdf.new()
    for number in range(pages):
        made.add_blank_page(page_size=size)
        page = made.pages[number]
        page.Contents = made.make_stream(b"0 0 1 rg 72 700 200 50 re f")
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def signed(signer: signing.Signer, wanted: Signature, pdf: bytes | None = None) -> bytes:
    inputs = finishing.Inputs(job_id="j1", finish=Finish(sign=wanted), signer=signer)
    return signing.apply(pdf or document(), inputs)


def assert_valid(pdf: bytes, pki: Pki) -> None:
    status = validate(pdf, pki)
    assert status.intact and status.valid and status.trusted, status.pretty_print_details()
    assert status.coverage is SignatureCoverageLevel.ENTIRE_FILE
    assert status.modification_level is ModificationLevel.NONE
    assert status.bottom_line, status.pretty_print_details()


# --- what a signature is ----------------------------------------------------------------------


def test_an_invisible_signature_is_pades_and_valid_for_whoever_trusts_the_root(
    signer: signing.Signer, pki: Pki
) -> None:
    wanted = Signature(reason="Annual statement", location="Berlin", contact="ops@example.com")
    pdf = signed(signer, wanted)
    assert_valid(pdf, pki)
    [signature] = signatures(pdf)
    dictionary = signature.sig_object
    assert dictionary["/SubFilter"] == "/ETSI.CAdES.detached"  # PAdES, not adbe.pkcs7.detached
    assert signature.md_algorithm == "sha256"
    assert (dictionary["/Reason"], dictionary["/Location"]) == ("Annual statement", "Berlin")
    assert dictionary["/ContactInfo"] == "ops@example.com"
    assert signature.signer_cert.subject.native["common_name"] == SIGNER_NAME
    with pikepdf.open(io.BytesIO(pdf)) as opened:
        [widget] = opened.Root.AcroForm.Fields
        assert widget.T == signing.FIELD_NAME
        assert [float(v) for v in widget.Rect] == [0, 0, 0, 0]  # invisible
        assert int(widget.F) & 4  # printable, as PDF/A wants of every annotation


def test_the_signature_is_an_incremental_update_over_the_file_as_it_was(
    signer: signing.Signer,
) -> None:
    original = document()
    pdf = signed(signer, Signature(), original)
    assert pdf.startswith(original)  # the stages' PDF, byte for byte, then the signature


def test_the_signer_embeds_its_chain_so_the_root_alone_is_trusted(
    signer: signing.Signer, pki: Pki
) -> None:
    assert [cert.subject for cert in signer.chain] == [pki.intermediate.subject, pki.root.subject]
    [signature] = signatures(signed(signer, Signature()))
    embedded = {
        choice.chosen.subject.native["common_name"]
        for choice in signature.signed_data["certificates"]
    }
    assert embedded == {SIGNER_NAME, "reportfarm test intermediate", "reportfarm test root"}


@pytest.mark.parametrize(("page", "expected"), [(0, 0), (-1, 2), (1, 1)])
def test_a_visible_signature_is_a_stamp_in_its_box_on_its_page(
    signer: signing.Signer, pki: Pki, page: int, expected: int
) -> None:
    box = (300.0, 40.0, 560.0, 120.0)
    pdf = signed(signer, Signature(visible=True, page=page, box=box, reason="Approved 批准"))
    assert_valid(pdf, pki)
    with pikepdf.open(io.BytesIO(pdf)) as opened:
        [widget] = opened.Root.AcroForm.Fields
        assert [float(v) for v in widget.Rect] == list(box)
        assert widget.P.objgen == opened.pages[expected].obj.objgen
        annotations = [a.objgen for a in opened.pages[expected].obj.get("/Annots", [])]
        assert widget.objgen in annotations
        assert set(widget.AP.keys()) == {"/N"}  # PDF/A: the normal appearance only
        assert int(widget.F) & 4 and not int(widget.F) & (1 | 2 | 32)  # printed, never hidden
        text = stamp_text(widget.AP.N)
        fonts = list(stamp_fonts(widget.AP.N))
    assert f"Digitally signed by {SIGNER_NAME}" in text
    assert "Reason: Approved 批准" in text and " UTC" in text
    assert fonts and all(embedded for embedded in fonts)  # PDF/A: every font embedded


@pytest.fixture(scope="module")
def polish_signer(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> signing.Signer:
    """A signer named in Latin-extended letters (the CJK face has no Ł: it stopped the start)."""
    folder = tmp_path_factory.mktemp("polish")
    key = ec.generate_private_key(ec.SECP256R1())
    issuer = (pki.intermediate, pki.intermediate_key)
    pki.write(folder, key=key, cert=certificate("Łukasz Wójcik İşçi", key, issuer))
    loaded = signing.Signer.load(folder)
    assert loaded is not None
    return loaded


SCRIPTS = {
    "latin-extended": "Zatwierdzone — Łódź, İstanbul, şţ, ř, ő, ą, Ærøskøbing",
    "greek": "Εγκρίθηκε από το λογιστήριο",
    "cyrillic": "Утверждено бухгалтерией",
    "arabic": "تمت الموافقة 2026",
    "hebrew": "אושר על ידי הנהלת החשבונות 2026",
    "thai": "อนุมัติแล้ว",
    "cjk": "批准 承認 승인",
    "mixed": "Genehmigt · موافق · מאושר · Одобрено · 批准",
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_stamp_in_any_script_the_faces_cover_is_drawn_embedded_and_valid(
    polish_signer: signing.Signer, pki: Pki, script: str
) -> None:
    reason = SCRIPTS[script]
    pdf = signed(polish_signer, Signature(visible=True, reason=reason, location=reason[::-1]))
    assert_valid(pdf, pki)
    with pikepdf.open(io.BytesIO(pdf)) as opened:
        [widget] = opened.Root.AcroForm.Fields
        text = stamp_text(widget.AP.N)
        assert all(stamp_fonts(widget.AP.N))  # PDF/A: every font embedded
        assert not list(notdef_glyphs(widget.AP.N))  # every glyph drawn
    assert "Digitally signed by Łukasz Wójcik İşçi" in text
    for word in reason.split():
        assert word in text


def test_stamps_never_cut_the_face_they_share_and_embed_every_glyph_they_show(
    signer: signing.Signer,
) -> None:
    """Each process reads a face's tables once and shares them between stamps; fontTools cuts a
    subset in place, so each stamp's subset is cut from a copy. Three stamps with glyphs no
    earlier one had (no kept subset): the shared face keeps every glyph, and each stamp's
    embedded program has an outline for every glyph it shows."""
    from fontTools.ttLib import TTFont
    from reportfarm_renderer.finishing import stamp

    first = fonts.faces()[0]
    whole = TTFont(io.BytesIO(stamp._outlines(first)))
    for reason in ("Quartz jinx vow", "Zebra fjord 0815", "Ærøskøbing Łódź ő ř"):
        pdf = signed(signer, Signature(visible=True, reason=reason))
        with pikepdf.open(io.BytesIO(pdf)) as opened:
            [widget] = opened.Root.AcroForm.Fields
            shown = {int.from_bytes(code) for code in stamp_codes(widget.AP.N)}
            font = next(iter(widget.AP.N.Resources.Font.values()))
            program = font.DescendantFonts[0].FontDescriptor.FontFile2.read_bytes()
        embedded = TTFont(io.BytesIO(program))
        cut, order, full = embedded["glyf"], embedded.getGlyphOrder(), whole.getGlyphOrder()
        outlines = {cid: cut[order[cid]].numberOfContours for cid in shown}
        assert outlines == {cid: whole["glyf"][full[cid]].numberOfContours for cid in shown}
        assert any(outlines.values()), reason
    parsed = stamp._parsed(first)
    assert parsed is not None
    assert len(parsed.tt.getGlyphOrder()) == len(whole.getGlyphOrder())
    assert len(parsed.tt["glyf"].keys()) == len(whole["glyf"].keys())


def test_a_cjk_stamp_parses_its_face_once_keeps_its_subsets_and_embeds_every_glyph(
    signer: signing.Signer, pki: Pki
) -> None:
    """The CJK face (CID-keyed CFF outlines) is read once per process like the others, and its
    subsets kept by glyph set: a stamp that repeats an earlier one's glyphs takes the subset as it
    was cut (the hit), a new one cuts from a copy (the miss), and neither cuts the shared face.
    Each embedded CFF program has every CID its stamp shows, and each signature is valid."""
    from fontTools.cffLib import CFFFontSet
    from reportfarm_renderer.finishing import stamp

    [cjk] = [face for face in fonts.faces() if face.spec.file.startswith("NotoSansCJK")]
    glyphs = None
    for reason in ("批准 承認", "批准 承認", "審核 通過 承認", "批准 承認"):
        pdf = signed(signer, Signature(visible=True, reason=reason))
        assert_valid(pdf, pki)
        with pikepdf.open(io.BytesIO(pdf)) as opened:
            [widget] = opened.Root.AcroForm.Fields
            shown = set(stamp_cids(widget.AP.N, skip="/F1"))
            programs = [
                descendant.FontDescriptor.FontFile3.read_bytes()
                for font in widget.AP.N.Resources.Font.values()
                for descendant in font.DescendantFonts
                if "/FontFile3" in descendant.FontDescriptor
            ]
        [program] = programs  # the CJK face's, a CFF program
        cff = CFFFontSet()
        cff.decompile(io.BytesIO(program), None)
        embedded = {int(name[3:]) for name in cff[0].charset if name.startswith("cid")}
        assert shown and shown <= embedded, reason
        parsed = stamp._parsed(cjk)
        assert parsed is not None and parsed.cff
        count = len(parsed.tt.getGlyphOrder())
        assert glyphs in (None, count)  # the shared face is never cut
        glyphs = count
    assert any(key[0] == cjk.name for key in stamp._SUBSETS)


@hypothesis.settings(max_examples=25, deadline=None, derandomize=True)
@hypothesis.given(
    reason=st.text(
        alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5), min_size=1, max_size=12
    )
)
def test_any_cjk_reason_kept_or_cut_embeds_every_glyph_its_stamp_shows(
    signer: signing.Signer, reason: str
) -> None:
    """Generated reasons in CJK ideographs, the same glyphs again or new ones: the CFF program
    each stamp embeds (a kept subset or a new cut) has every CID it shows, and no glyph is
    .notdef (the face covers the whole block of unified ideographs)."""
    from fontTools.cffLib import CFFFontSet

    pdf = signed(signer, Signature(visible=True, reason=reason))
    with pikepdf.open(io.BytesIO(pdf)) as opened:
        [widget] = opened.Root.AcroForm.Fields
        shown = set(stamp_cids(widget.AP.N, skip="/F1"))
        assert not list(notdef_glyphs(widget.AP.N))
        [program] = [
            descendant.FontDescriptor.FontFile3.read_bytes()
            for font in widget.AP.N.Resources.Font.values()
            for descendant in font.DescendantFonts
            if "/FontFile3" in descendant.FontDescriptor
        ]
    cff = CFFFontSet()
    cff.decompile(io.BytesIO(program), None)
    assert shown <= {int(name[3:]) for name in cff[0].charset if name.startswith("cid")}


def stamp_cids(appearance: pikepdf.Object, *, skip: str):  # type: ignore[no-untyped-def]
    """The two-byte codes (CIDs) the stamp shows in its fonts other than ``skip``."""
    current = None
    for operands, operator in pikepdf.parse_content_stream(appearance):
        if str(operator) == "Tf":
            current = str(operands[0])
        elif str(operator) in ("Tj", "TJ") and current != skip:
            for operand in operands[0] if str(operator) == "TJ" else operands:
                if isinstance(operand, pikepdf.String):
                    codes = bytes(operand)
                    yield from (int.from_bytes(codes[i : i + 2]) for i in range(0, len(codes), 2))


def stamp_codes(appearance: pikepdf.Object):  # type: ignore[no-untyped-def]
    """The two-byte codes shown in the stamp's first font (F1, the Latin face's: Identity-H)."""
    current = None
    for operands, operator in pikepdf.parse_content_stream(appearance):
        if str(operator) == "Tf":
            current = str(operands[0])
        elif str(operator) in ("Tj", "TJ") and current == "/F1":
            for operand in operands[0] if str(operator) == "TJ" else operands:
                if isinstance(operand, pikepdf.String):
                    codes = bytes(operand)
                    yield from (codes[i : i + 2] for i in range(0, len(codes), 2))


def notdef_glyphs(appearance: pikepdf.Object):  # type: ignore[no-untyped-def]
    """Glyph 0 (.notdef) shown by the stamp's text (its fonts are Identity-H: codes are CIDs,
    and CID 0 is .notdef in either kind of font pyHanko embeds)."""
    for operands, operator in pikepdf.parse_content_stream(appearance):
        if str(operator) in ("Tj", "TJ"):
            for operand in operands[0] if str(operator) == "TJ" else operands:
                if isinstance(operand, pikepdf.String):
                    codes = bytes(operand)
                    for index in range(0, len(codes), 2):
                        if codes[index : index + 2] == b"\0\0":
                            yield operand


def stamp_text(appearance: pikepdf.Object) -> str:
    """The stamp's words, from the ActualText of its spans (what a text extractor reads)."""
    words = []
    for operands, operator in pikepdf.parse_content_stream(appearance):
        if str(operator) == "BDC" and isinstance(operands[1], pikepdf.Dictionary):
            words.append(str(operands[1].get("/ActualText", "")))
        elif str(operator) == "Td" and float(operands[1]) < 0:  # the next line
            words.append("\n")
    return "".join(words)


def stamp_fonts(appearance: pikepdf.Object):  # type: ignore[no-untyped-def]
    """Whether each font the stamp uses carries its program."""
    for font in appearance.Resources.Font.values():
        for descendant in font.get("/DescendantFonts", [font]):
            descriptor = descendant.FontDescriptor
            yield any(key in descriptor for key in ("/FontFile", "/FontFile2", "/FontFile3"))


def test_a_long_reason_is_cut_on_the_stamp_but_kept_whole_in_the_signature(
    signer: signing.Signer,
) -> None:
    reason = "checked " * 25
    pdf = signed(signer, Signature(visible=True, reason=reason))
    [signature] = signatures(pdf)
    assert signature.sig_object["/Reason"] == reason
    with pikepdf.open(io.BytesIO(pdf)) as opened:
        text = stamp_text(opened.Root.AcroForm.Fields[0].AP.N)
    [line] = [line for line in text.splitlines() if line.startswith("Reason:")]
    assert line.endswith("…") and len(line) <= len("Reason: ") + signing.STAMP_LINE


@pytest.mark.parametrize(
    ("wanted", "says"),
    [
        (Signature(visible=True, page=3), "past the last page (the PDF has 3)"),
        (Signature(visible=True, box=(500, 40, 700, 100)), "does not fit page 3 (595 x 842"),
        (Signature(visible=True, page=0, box=(40, 800, 240, 900)), "does not fit page 1"),
    ],
)
def test_a_stamp_off_the_document_is_the_jobs_mistake(
    signer: signing.Signer, wanted: Signature, says: str
) -> None:
    with pytest.raises(FinishError, match=re.escape(says)):
        signed(signer, wanted)


def test_signing_leaves_the_metadata_as_the_earlier_stages_made_it(
    signer: signing.Signer, pki: Pki
) -> None:
    """PDF/A wants Info and XMP to agree, and Factur-X's extension schema intact: pyHanko would
    rewrite both (see signing's docstring)."""
    made = pikepdf.open(io.BytesIO(document()))
    with made.open_metadata(set_pikepdf_as_editor=False) as xmp:
        xmp["pdfaid:part"], xmp["pdfaid:conformance"] = "3", "B"
        xmp["dc:title"] = "Invoice 42"
        xmp["pdf:Producer"] = "reportfarm"
    made.docinfo["/Title"], made.docinfo["/Producer"] = "Invoice 42", "reportfarm"
    out = io.BytesIO()
    made.save(out)
    before = out.getvalue()
    with pikepdf.open(io.BytesIO(before)) as opened:
        xmp_before, info_before = opened.Root.Metadata.read_bytes(), dict(opened.docinfo)
    pdf = signed(signer, Signature(visible=True), before)
    assert_valid(pdf, pki)
    with pikepdf.open(io.BytesIO(pdf)) as opened:
        assert opened.Root.Metadata.read_bytes() == xmp_before
        assert dict(opened.docinfo) == info_before


# --- any change breaks it -----------------------------------------------------------------------


def test_changing_any_byte_the_signature_covers_breaks_it(signer: signing.Signer, pki: Pki) -> None:
    pdf = signed(signer, Signature(visible=True, reason="Approved"))
    [signature] = signatures(pdf)
    start1, length1, start2, length2 = signature.byte_range
    assert start1 == 0 and start2 + length2 == len(pdf)  # all but the signature's own /Contents
    assert _still_valid(pdf, pki)  # untouched, it is valid: the check below can say no
    covered = [*range(start1, start1 + length1), *range(start2, start2 + length2)]
    step = max(1, len(covered) // 40)
    for position in [*covered[::step], covered[-1]]:
        changed = bytearray(pdf)
        changed[position] ^= 0x20
        assert not _still_valid(bytes(changed), pki), f"a change at byte {position} went unseen"


def _still_valid(pdf: bytes, pki: Pki) -> bool:
    """A file that no longer parses, or whose signature is not intact: broken either way."""
    try:
        [signature] = signatures(pdf)
        status = validate_pdf_signature(signature, pki.context())
    except Exception:
        return False
    return bool(status.intact and status.valid and status.bottom_line)


def test_a_later_update_that_changes_a_page_is_reported(signer: signing.Signer, pki: Pki) -> None:
    """An incremental update leaves the signed bytes intact: the validator's diff analysis says
    the document changed in a way no signing or form filling explains."""
    pdf = signed(signer, Signature(visible=True))
    writer = IncrementalPdfFileWriter(io.BytesIO(pdf))
    page = writer.root["/Pages"]["/Kids"][0].get_object()
    page["/Rotate"] = generic.NumberObject(90)
    writer.update_container(page)
    out = io.BytesIO()
    writer.write(out)
    status = validate_pdf_signature(PdfFileReader(out).embedded_signatures[0], pki.context())
    assert status.intact and status.valid  # the signed revision itself is untouched...
    assert status.coverage is SignatureCoverageLevel.ENTIRE_REVISION  # ...but not the file
    assert status.modification_level is ModificationLevel.OTHER
    assert not status.docmdp_ok and not status.bottom_line


# --- with permissions: an encrypted PDF ---------------------------------------------------------


def test_an_encrypted_pdf_is_signed_with_the_owner_password_and_keeps_its_permissions(
    signer: signing.Signer, pki: Pki
) -> None:
    finish = Finish(permissions=Permissions(copy=False, modify=False), sign=Signature(visible=True))
    inputs = finishing.Inputs(job_id="j1", finish=finish, signer=signer)
    pdf = document()
    for name, stage in finishing.plan(finish):
        pdf = finishing.run_stage(name, stage, pdf, inputs)
    assert inputs.owner_password  # the permissions stage made one, for this stage
    assert_valid(pdf, pki)
    with pikepdf.open(io.BytesIO(pdf)) as opened:  # no password to open, as before
        assert opened.is_encrypted and opened.encryption.R == 6
        assert not opened.allow.extract and not opened.allow.modify_other
        assert opened.allow.print_highres
        assert opened.Root.AcroForm.Fields[0].T == signing.FIELD_NAME


def test_an_encrypted_pdf_without_its_owner_password_is_refused(signer: signing.Signer) -> None:
    finish = Finish(permissions=Permissions(modify=False), sign=Signature())
    inputs = finishing.Inputs(job_id="j1", finish=finish, signer=signer)
    encrypted = permissions.apply(document(), inputs)
    inputs.owner_password = None
    with pytest.raises(FinishError, match="encrypted, and no owner password"):
        signing.apply(encrypted, inputs)
    inputs.owner_password = "not it"
    with pytest.raises(FinishError, match="does not open it"):
        signing.apply(encrypted, inputs)


# --- the key: loaded once, at start, or the renderer does not start ---------------------------


def test_a_folder_without_a_key_means_no_signing(tmp_path: Path) -> None:
    assert signing.Signer.load(tmp_path / "absent") is None
    (tmp_path / "..data").mkdir()  # what the kubelet keeps in a Secret's folder
    assert signing.Signer.load(tmp_path) is None


def test_a_secret_of_another_shape_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text("...")
    (tmp_path / "cert.pem").write_text("...")
    with pytest.raises(signing.SignerError, match=r"holds cert.pem, key.pem but no tls.key"):
        signing.Signer.load(tmp_path)


def test_a_job_on_a_farm_without_a_key_is_refused_with_that_reason() -> None:
    inputs = finishing.Inputs(job_id="j1", finish=Finish(sign=Signature()), signer=None)
    with pytest.raises(finishing.FinishingFailed, match=r"stage 'sign'.*no signing key"):
        finishing.run_stage("sign", signing.apply, document(), inputs)


def test_an_elliptic_curve_key_signs_too(pki: Pki, tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP384R1())
    loaded = signing.Signer.load(pki.write(tmp_path, key=key, cert=pki.issue(key)))
    assert loaded is not None
    assert_valid(signed(loaded, Signature(visible=True)), pki)


def test_the_start_up_log_names_the_certificate_never_the_key(signer: signing.Signer) -> None:
    described = signer.describe()
    assert SIGNER_NAME in described and "reportfarm test intermediate" in described
    assert "PRIVATE" not in described


def _secret(pki: Pki, folder: Path, **files: bytes) -> Path:
    pki.write(folder)
    for name, content in files.items():
        path = folder / name.replace("_", ".")
        if content:
            path.write_bytes(content)
        else:
            path.unlink()
    return folder


@pytest.mark.parametrize(
    ("files", "says"),
    [
        pytest.param({"tls_crt": b""}, "holds tls.key but no tls.crt", id="no certificate"),
        pytest.param({"tls_key": b""}, "holds tls.crt but no tls.key", id="no key"),
        pytest.param({"tls_key": b"not a key"}, "tls.key is not a private key", id="garbage key"),
        pytest.param(
            {"tls_crt": b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
            "holds no certificate",
            id="garbage certificate",
        ),
        pytest.param({"ca_crt": b"nonsense"}, "ca.crt holds no certificate", id="garbage chain"),
    ],
)
def test_a_secret_that_cannot_be_used_stops_the_renderer_with_its_reason(
    pki: Pki, tmp_path: Path, files: dict[str, bytes], says: str
) -> None:
    with pytest.raises(signing.SignerError, match=says):
        signing.Signer.load(_secret(pki, tmp_path, **files))


def test_a_key_that_is_not_the_certificates_is_refused(pki: Pki, tmp_path: Path) -> None:
    folder = pki.write(tmp_path, key=rsa_key())
    with pytest.raises(signing.SignerError, match=r"does not match the certificate in .*tls.crt"):
        signing.Signer.load(folder)


def test_an_encrypted_key_is_refused(pki: Pki, tmp_path: Path) -> None:
    folder = pki.write(tmp_path)
    (folder / "tls.key").write_bytes(key_pem(pki.signer_key, password=b"secret"))
    with pytest.raises(signing.SignerError, match=r"tls.key is encrypted"):
        signing.Signer.load(folder)


def test_a_short_rsa_key_is_refused(pki: Pki, tmp_path: Path) -> None:
    key = rsa_key(1024)
    with pytest.raises(signing.SignerError, match="1024-bit RSA key"):
        signing.Signer.load(pki.write(tmp_path, key=key, cert=pki.issue(key)))


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"valid_days": (-30, -1)}, "expired on"),
        ({"valid_days": (2, 30)}, "is not valid before"),
        ({"signing": False}, "may not sign: its key usage"),
    ],
)
def test_a_certificate_that_cannot_sign_now_is_refused(
    pki: Pki, tmp_path: Path, options: dict[str, object], says: str
) -> None:
    key = rsa_key()
    with pytest.raises(signing.SignerError, match=says):
        signing.Signer.load(pki.write(tmp_path, key=key, cert=pki.issue(key, **options)))


def test_a_certificate_that_expires_while_the_farm_runs_fails_the_job(
    signer: signing.Signer,
) -> None:
    later = signer.not_after.replace(year=signer.not_after.year + 1)
    with pytest.raises(FinishError, match=r"signing certificate .* expired on .*renew its Secret"):
        signing.sign(document(), signer, Signature(), owner_password=None, moment=later)


def test_without_the_stamps_font_the_renderer_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fonts, "FONT_ROOTS", (tmp_path,))
    fonts.faces.cache_clear()
    try:
        with pytest.raises(signing.SignerError, match=r"no NotoSans-Regular.ttf.*fonts-noto-core"):
            signing.stamp_fonts()
    finally:
        monkeypatch.undo()
        fonts.faces.cache_clear()


def test_the_chain_file_is_optional(pki: Pki, tmp_path: Path) -> None:
    folder = pki.write(tmp_path)
    (folder / "ca.crt").unlink()
    loaded = signing.Signer.load(folder)
    assert loaded is not None and [c.subject for c in loaded.chain] == [pki.intermediate.subject]
    assert_valid(signed(loaded, Signature()), pki)  # the root is the recipient's, not the PDF's


def test_a_lone_certificate_in_der_is_read(pki: Pki, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = rsa_key()
    cert = pki.issue(key)
    folder = pki.write(tmp_path, key=key, cert=cert)
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.DER))
    (folder / "ca.crt").write_bytes(pem(pki.intermediate, pki.root))
    loaded = signing.Signer.load(folder)
    assert loaded is not None and loaded.certificate == cert
