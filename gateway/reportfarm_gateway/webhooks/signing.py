"""Signing webhook payloads, and verifying them (what a receiver does).

Header: ``X-Reportfarm-Signature: t=<unix seconds>,v1=<hex>`` where ``v1`` is
HMAC-SHA256(secret, ``f"{t}.{body}"``). A receiver recomputes it over the raw body it got, compares
in constant time, and refuses timestamps older than a tolerance (replays).
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Reportfarm-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT_HEADER = "X-Reportfarm-Event"
ATTEMPT_HEADER = "X-Reportfarm-Attempt"
DEFAULT_TOLERANCE_S = 300


class SignatureError(ValueError):
    """The signature is missing, malformed, wrong or too old."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The signature header's value for ``body``."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return f"t={stamp},v1={signature(secret, stamp, body)}"


def verify(
    secret: str,
    header: str | None,
    body: bytes,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> int:
    """Check a signature header against the raw body; return its timestamp or raise."""
    if not header:
        raise SignatureError("no signature header")
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        fields.setdefault(key, []).append(value)
    try:
        stamp = int(fields["t"][0])
    except (KeyError, ValueError):
        raise SignatureError("no timestamp in the signature header") from None
    current = time.time() if now is None else now
    if abs(current - stamp) > tolerance_s:
        raise SignatureError(f"timestamp {stamp} is outside the {tolerance_s:.0f} s tolerance")
    expected = signature(secret, stamp, body)
    if not any(hmac.compare_digest(expected, given) for given in fields.get("v1", [])):
        raise SignatureError("signature does not match")
    return stamp
