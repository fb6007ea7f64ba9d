"""The ``permissions`` stage: PDF standard security, AES-256 (revision 6), with no password to
open and an owner password made here, used only by ``sign`` (if asked) and then forgotten.

Readers honour the permissions (print, copy, change, annotate); it is not secrecy, and anyone with
a tool that ignores them can. Extraction for accessibility is always allowed, so screen readers
keep working on a tagged PDF."""

from __future__ import annotations

import io
import secrets
from typing import TYPE_CHECKING

import pikepdf

if TYPE_CHECKING:
    from . import Inputs


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    wanted = inputs.finish.permissions
    assert wanted is not None
    owner = secrets.token_urlsafe(32)
    allow = pikepdf.Permissions(
        accessibility=True,
        extract=wanted.copy,
        modify_annotation=wanted.annotate,
        modify_assembly=wanted.modify,
        modify_form=wanted.annotate,
        modify_other=wanted.modify,
        print_lowres=wanted.print,
        print_highres=wanted.print,
    )
    with pikepdf.open(io.BytesIO(pdf)) as document:
        out = io.BytesIO()
        document.save(out, encryption=pikepdf.Encryption(owner=owner, user="", R=6, allow=allow))
    inputs.owner_password = owner
    return out.getvalue()
