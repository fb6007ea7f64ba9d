"""The ``attach`` stage: the job's files, embedded as PDF/A-3 associated files (pikepdf).

Each file is an embedded file stream with its MIME type (``/Subtype``) and ``/Params`` (size,
MD5 checksum, creation and modification dates: when finishing began), in a file specification
with its name (``/F`` and ``/UF``), description (``/Desc``) and relationship to the document
(``/AFRelationship``: Data, Source, Alternative, Supplement or Unspecified). The specification is
listed in the embedded files name tree (what readers show in their attachments panel) and in the
catalogue's ``/AF`` (what makes it an associated file, as PDF/A-3 requires). Files already
attached (the Factur-X XML) are kept.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import pikepdf
from pikepdf.models.metadata import encode_pdf_date

from reportfarm.finishing import FinishError

if TYPE_CHECKING:
    import datetime

    from . import Inputs


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    when = pdf_date(inputs.moment)
    with pikepdf.open(io.BytesIO(pdf)) as document:
        associated = document.Root.get("/AF")
        if not isinstance(associated, pikepdf.Array):
            associated = document.make_indirect(pikepdf.Array())
        for attachment in inputs.finish.attachments:
            content = inputs.files.get(attachment.blob)
            if content is None:
                raise FinishError(f"the job's file {attachment.blob!r} was not loaded")
            name = attachment.file_name
            if name in document.attachments:
                raise FinishError(f"a file named {name!r} is already attached")
            spec = pikepdf.AttachedFileSpec(
                document,
                content,
                description=attachment.description or name,
                filename=name,
                # /Subtype is a media type's name, without its parameters (PDF 7.11.4)
                mime_type=attachment.mime.split(";")[0].strip(),
                creation_date=when,
                mod_date=when,
                relationship=pikepdf.Name("/" + attachment.relationship),
            )
            document.attachments[name] = spec
            associated.append(spec.obj)
        document.Root.AF = associated
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()


def pdf_date(moment: datetime.datetime) -> str:
    """A PDF date string (``D:20261203100000+01'00'``) of an aware datetime."""
    return encode_pdf_date(moment)
