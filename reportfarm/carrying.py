"""A done hint that carries its answer: the stored record and PDF, signed, so the gateway a client
waits at answers without reading them back.

A synchronous report's answer was three steps once the PDF was stored: the renderer writes the
record, tells the gateway (the done hint), and the gateway reads the record and the PDF (at once,
:mod:`reportfarm_gateway.prefetching`). Measured on a lone request, the reads were ~4 ms of its
~30 ms beyond the print and the upload, and two of a PDF's storage requests. The renderer holds
both when it sends the hint, so the hint carries them: the PDF as the body, the record in a
header, and an HMAC over the job id, the record and the PDF.

What does not change: the record and the PDF are stored before the hint is sent, and they stay
the truth. The gateway uses a carried answer only when its signature holds, the record is the
job's own and says it succeeded into the job's default blob, and the body is exactly the PDF the
record names (its size); otherwise the hint wakes the wait as before and the gateway reads.

The key is derived from the storage account's secret (the account key or SAS of the connection
string), which the gateway and the renderers already share: whoever can sign a hint can write the
record itself. An account reached with Entra ID has no secret in a connection string: there the
key is ``REPORTFARM_HINT_KEY`` (a Secret both sides mount; it wins over the derived key when set),
and without it hints carry nothing and hand-offs are declined, as before. Only PDFs up to
:data:`MAX_PDF_BYTES` ride a hint.

The same key, derived once more for the purpose, signs a hand-off (``renderer_api.HANDOFF_PATH``):
a message the gateway sent invisible and hands, with its pop receipt, to a renderer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import TYPE_CHECKING

from reportfarm import connecting, contract

if TYPE_CHECKING:
    from reportfarm.settings import StorageSettings

RECORD_HEADER = "X-Reportfarm-Record"
"""The record's JSON, base64url (a header holds ASCII only)."""
SIGNATURE_HEADER = "X-Reportfarm-Signature"
"""HMAC-SHA256 (hex) of the job id, the record's JSON and the PDF, with :func:`key_for`'s key."""
MAX_PDF_BYTES = 4 * 2**20
"""Larger PDFs are not carried (the gateway reads them): a hint stays a short request."""
MAX_RECORD_BYTES = 4096
"""A larger record (stages, a long error) is not carried: the header stays small."""
HANDOFF_SIGNATURE_HEADER = "X-Reportfarm-Handoff-Signature"
"""HMAC-SHA256 (hex) of a hand-off's body (``renderer_api.HANDOFF_PATH``), with a key derived
from :func:`key_for`'s for that purpose alone."""
_LABEL = b"reportfarm done hint v1"
_HANDOFF_LABEL = b"reportfarm hand-off v1"
_SECRET_PARTS = ("accountkey", "sharedaccesssignature")


def key_for(connection_string: str | None, *, hint_key: str | None = None) -> bytes | None:
    """The hints' key: from ``hint_key`` (``REPORTFARM_HINT_KEY``) when given, else from the
    storage account's secret in ``connection_string``; None when neither (no connection string,
    or none with a key or SAS in it)."""
    if hint_key:
        return hmac.new(hint_key.encode("utf-8"), _LABEL, hashlib.sha256).digest()
    if not connection_string:
        return None
    try:
        parts = {name.lower(): value for name, value in connecting.parse(connection_string).items()}
    except connecting.ConnectionProblem:  # malformed: the storage client says so, not the hints
        return None
    secret = "\n".join(parts.get(name, "") for name in ("accountname", *_SECRET_PARTS))
    if not any(parts.get(name) for name in _SECRET_PARTS):
        return None
    return hmac.new(secret.encode("utf-8"), _LABEL, hashlib.sha256).digest()


def key_of(storage: StorageSettings) -> bytes | None:
    """The hints' key of a process's storage settings: :func:`key_for` with its connection
    string and ``REPORTFARM_HINT_KEY``, what the gateway and the renderers both use."""
    return key_for(storage.connection_string, hint_key=storage.hint_key)


def answers(record: contract.ResultRecord, job_id: str, *, pdf_bytes: int) -> bool:
    """Whether ``record`` can ride a hint as the answer: the job's own, succeeded into its default
    blob, of a PDF of ``pdf_bytes`` (what the renderer sends, what the gateway accepts)."""
    return (
        record.job_id == job_id
        and record.state == "succeeded"
        and record.output_blob == contract.default_output_blob(job_id)
        and record.output_bytes == pdf_bytes
    )


def sign(key: bytes, job_id: str, record_json: bytes, pdf: bytes) -> str:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (job_id.encode("utf-8"), record_json):
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    mac.update(pdf)
    return mac.hexdigest()


def verify(key: bytes, job_id: str, record_json: bytes, pdf: bytes, signature: str) -> bool:
    """Whether ``signature`` is the hint's (any text: a header may hold non-ASCII)."""
    expected = sign(key, job_id, record_json, pdf).encode("ascii")
    return hmac.compare_digest(expected, signature.encode("utf-8", "surrogateescape"))


def sign_handoff(key: bytes, body: bytes) -> str:
    """A hand-off's signature: whoever can sign one can receive the message itself."""
    handoff_key = hmac.new(key, _HANDOFF_LABEL, hashlib.sha256).digest()
    return hmac.new(handoff_key, body, hashlib.sha256).hexdigest()


def verify_handoff(key: bytes, body: bytes, signature: str) -> bool:
    expected = sign_handoff(key, body).encode("ascii")
    return hmac.compare_digest(expected, signature.encode("utf-8", "surrogateescape"))


def encode_record(record_json: bytes) -> str:
    return base64.urlsafe_b64encode(record_json).decode("ascii")


def decode_record(header: str) -> bytes | None:
    """The record's JSON from its header, or None when the header is not base64url."""
    if len(header) > 2 * MAX_RECORD_BYTES:
        return None
    try:
        return base64.urlsafe_b64decode(header.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
