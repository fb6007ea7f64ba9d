"""A local RFC 3161 timestamp authority for the B-T tests: an HTTP server on loopback (a thread)
answering ``application/timestamp-query`` POSTs with tokens signed by a TSA certificate under the
test root (extended key usage timeStamping, critical, as RFC 3161 requires). The token is made by
pyHanko's own testing TSA (:class:`~pyhanko.sign.timestamps.dummy_client.DummyTimeStamper`),
behind a real HTTP exchange, so the renderer's client is the one production uses."""

from __future__ import annotations

import contextlib
import datetime
import http.server
import threading
from collections.abc import Iterator

from asn1crypto import keys as asn1_keys
from asn1crypto import tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper

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
        der_key = key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self.stamper = DummyTimeStamper(
            tsa_cert=asn1_x509.Certificate.load(cert.public_bytes(serialization.Encoding.DER)),
            tsa_key=asn1_keys.PrivateKeyInfo.load(der_key),
        )
        self.certificate = cert
        self.tokens = 0
        self.down = False
        self.url = ""


@contextlib.contextmanager
def running(pki: Pki) -> Iterator[Authority]:
    authority = Authority(pki)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if authority.down:
                self.send_error(503, "down for the test")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            answer = authority.stamper.request_tsa_response(tsp.TimeStampReq.load(body)).dump()
            authority.tokens += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    authority.url = f"http://127.0.0.1:{server.server_address[1]}/tsa"
    try:
        yield authority
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
