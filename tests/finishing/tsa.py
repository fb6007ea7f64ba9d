"""A local RFC 3161 timestamp authority for the B-T tests: an HTTP server on loopback (a thread)
answering ``application/timestamp-query`` POSTs with tokens signed by a TSA certificate under the
test root (extended key usage timeStamping, critical, as RFC 3161 requires). The token is made by
pyHanko's own testing TSA (:class:`~pyhanko.sign.timestamps.dummy_client.DummyTimeStamper`),
behind a real HTTP exchange (the benchmark's server, :func:`authority.serving`), so the renderer's
client is the one production uses."""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

from asn1crypto import tsp
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from reportfarm_bench import authority

from .keys import Pki, rsa_key


def tsa_certificate(pki: Pki, key: rsa.RSAPrivateKey) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reportfarm test TSA")]))
        .issuer_name(pki.root.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .sign(pki.root_key, hashes.SHA256())
    )


class Authority:
    """The TSA's state: how many tokens it gave, and whether it answers at all."""

    def __init__(self, pki: Pki) -> None:
        key = rsa_key()  # pyHanko's testing TSA signs with RSA only
        cert = tsa_certificate(pki, key)
        self.stamper = authority.stamper(key, cert)
        self.certificate = cert
        self.tokens = 0
        self.down = False
        self.url = ""

    def answer(self, body: bytes) -> bytes | None:
        if self.down:
            return None
        self.tokens += 1
        return bytes(self.stamper.request_tsa_response(tsp.TimeStampReq.load(body)).dump())


@contextlib.contextmanager
def running(pki: Pki) -> Iterator[Authority]:
    tsa = Authority(pki)
    with authority.serving(tsa.answer) as url:
        tsa.url = url
        yield tsa
