"""A throwaway self-signed certificate, written as a ``kubernetes.io/tls`` Secret is mounted.

Nothing in the farm's own path uses it: the benchmark's stand-in signing key
(:func:`reportfarm_bench.finishing.throwaway_signer`) and the tests' loopback
HTTPS certificate are made with it.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from reportfarm_renderer.finishing import keys


def self_signed(
    folder: Path,
    common_name: str,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    *extensions: tuple[x509.ExtensionType, bool],
) -> tuple[Path, Path]:
    """``key``'s self-signed certificate for ``common_name`` (SHA-256, valid from five minutes
    ago for a day, with ``extensions`` as ``(extension, critical)`` in order), written to
    ``folder`` with the key: (``tls.crt``, ``tls.key``), PEM, the key unencrypted PKCS#8."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    certificate = builder.sign(key, hashes.SHA256())
    cert_path, key_path = folder / keys.CERT_FILE, folder / keys.KEY_FILE
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
