"""A loopback RFC 3161 timestamp authority for the B-T rows of ``reportfarm bench einvoice
--signatures --tsa``: pyHanko's testing TSA (:class:`DummyTimeStamper`, a throwaway self-signed
certificate with the timeStamping key usage) behind a real HTTP exchange, so the renderer's client
is the one production uses. It runs in the benchmark's process (a thread): its CPU is not the
renderer's, as a real authority's is not, but it shares this machine's cores."""

from __future__ import annotations

import contextlib
import http.server
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from asn1crypto import keys as asn1_keys
from asn1crypto import tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper

from reportfarm_bench import throwaway


def stamper(key: rsa.RSAPrivateKey, certificate: x509.Certificate) -> DummyTimeStamper:
    """pyHanko's testing TSA signing with ``key`` (RSA only) as ``certificate``."""
    der_key = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return DummyTimeStamper(
        tsa_cert=asn1_x509.Certificate.load(certificate.public_bytes(serialization.Encoding.DER)),
        tsa_key=asn1_keys.PrivateKeyInfo.load(der_key),
    )


def _self_signed() -> DummyTimeStamper:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING])
    with tempfile.TemporaryDirectory(prefix="reportfarm-bench-tsa-") as folder:
        name = "reportfarm bench TSA"
        cert_path, _ = throwaway.self_signed(Path(folder), name, key, (usage, True))
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
    return stamper(key, certificate)


@contextlib.contextmanager
def serving(answer: Callable[[bytes], bytes | None]) -> Iterator[str]:
    """An HTTP server on loopback that answers each timestamp query's body with ``answer``'s
    (None: 503, the authority is away); its URL while it runs."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            reply = answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if reply is None:
                self.send_error(503, "the authority is away")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tsa"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def running() -> Iterator[str]:
    """The benchmark's authority (a throwaway self-signed TSA certificate): its URL."""
    tsa = _self_signed()
    with serving(lambda body: tsa.request_tsa_response(tsp.TimeStampReq.load(body)).dump()) as url:
        yield url
