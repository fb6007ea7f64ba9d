"""The ``metadata`` stage: document information and XMP, kept in step (pikepdf), and the
document's language (``/Lang``), which screen readers use to pick a voice.

Chromium writes document information only (the HTML ``<title>``, creator, producer, dates), no
XMP: the packet starts from it, so what the job does not give (the HTML's title) is kept, not
dropped when the document information is synced from the XMP."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import pikepdf

from reportfarm import finishing

if TYPE_CHECKING:
    from . import Inputs


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    given = inputs.finish.metadata or finishing.Metadata()
    created = finishing.created_at(given.created) if given.created else inputs.moment
    with pikepdf.open(io.BytesIO(pdf)) as document:
        with document.open_metadata(set_pikepdf_as_editor=False) as xmp:
            if "/Metadata" not in document.Root:
                xmp.load_from_docinfo(document.docinfo, raise_failure=False)
            if given.title:
                xmp["dc:title"] = given.title
            if given.author:
                xmp["dc:creator"] = [given.author]
            if given.subject:
                xmp["dc:description"] = given.subject
            if given.keywords:
                xmp["dc:subject"] = list(given.keywords)
                xmp["pdf:Keywords"] = ", ".join(given.keywords)
            if given.language:
                xmp["dc:language"] = [given.language]
            xmp["xmp:CreateDate"] = created.isoformat()
            xmp["xmp:ModifyDate"] = inputs.moment.isoformat()
            xmp["xmp:MetadataDate"] = inputs.moment.isoformat()
        if given.language:
            document.Root.Lang = pikepdf.String(given.language)
        if given.title:  # readers show the title, not the file name (PDF/UA asks for this)
            preferences = document.Root.get("/ViewerPreferences") or pikepdf.Dictionary()
            preferences.DisplayDocTitle = True
            document.Root.ViewerPreferences = preferences
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()
