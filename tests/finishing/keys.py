"""Throwaway PKI for the signing tests: a root CA, an intermediate CA, signer keys and certificates,
written as a mounted ``kubernetes.io/tls`` Secret is (``tls.crt``, ``tls.key``, ``ca.crt``); and
the check a recipient makes: pyHanko's validator trusting the test root only."""

from __future__ import annotations

import dataclasses
import datetime
import io
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from pyhanko.keys import load_certs_from_pemder_data
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.validation import validate_pdf_signature
from pyhanko.sign.validation.pdf_embedded import EmbeddedPdfSignature
from pyhanko.sign.validation.status import PdfSignatureStatus
from pyhanko_certvalidator import ValidationContext

SIGNER_NAME = "Reports Ltd 报告 signing"

Key = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def _name(common: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "reportfarm tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ]
    )


def _usage(*, ca: bool, signing: bool = True) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca and signing,
        content_commitment=not ca and signing,
        key_encipherment=not signing,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def certificate(
    subject: str,
    key: Key,
    issuer: tuple[x509.Certificate, Key] | None,
    *,
    ca: bool = False,
    signing: bool = True,
    valid_days: tuple[int, int] = (-1, 30),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = (
        (_name(subject), key) if issuer is None else (issuer[0].subject, issuer[1])
    )
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + datetime.timedelta(days=valid_days[0]))
        .not_valid_after(now + datetime.timedelta(days=valid_days[1]))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(_usage(ca=ca, signing=signing), critical=True)
        .sign(issuer_key, hashes.SHA256())
    )


def rsa_key(bits: int = 2048) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def pem(*certs: x509.Certificate) -> bytes:
    return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in certs)


def key_pem(key: Key, password: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


@dataclasses.dataclass(frozen=True)
class Pki:
    """A root, an intermediate under it, and a signer under the intermediate."""

    root: x509.Certificate
    root_key: Key
    intermediate: x509.Certificate
    intermediate_key: Key
    signer: x509.Certificate
    signer_key: Key

    @classmethod
    def make(cls) -> Pki:
        root_key = ec.generate_private_key(ec.SECP256R1())
        root = certificate("reportfarm test root", root_key, None, ca=True)
        intermediate_key = ec.generate_private_key(ec.SECP256R1())
        intermediate = certificate(
            "reportfarm test intermediate", intermediate_key, (root, root_key), ca=True
        )
        signer_key = rsa_key()
        signer = certificate(SIGNER_NAME, signer_key, (intermediate, intermediate_key))
        return cls(root, root_key, intermediate, intermediate_key, signer, signer_key)

    def issue(self, key: Key, **options: object) -> x509.Certificate:
        """Another signer certificate under the intermediate."""
        return certificate(SIGNER_NAME, key, (self.intermediate, self.intermediate_key), **options)  # type: ignore[arg-type]

    def write(
        self,
        folder: Path,
        *,
        key: Key | None = None,
        cert: x509.Certificate | None = None,
    ) -> Path:
        """The Secret as mounted: tls.crt (signer + intermediate, as cert-manager writes it),
        tls.key, ca.crt (the root)."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tls.crt").write_bytes(pem(cert or self.signer, self.intermediate))
        (folder / "tls.key").write_bytes(key_pem(key or self.signer_key))
        (folder / "ca.crt").write_bytes(pem(self.root))
        return folder

    def context(self) -> ValidationContext:
        """What a recipient trusts: the root only (the intermediate comes in the signature)."""
        [root] = load_certs_from_pemder_data(pem(self.root))
        return ValidationContext(trust_roots=[root], allow_fetching=False)


def signatures(pdf: bytes) -> list[EmbeddedPdfSignature]:
    reader = PdfFileReader(io.BytesIO(pdf))
    if reader.encrypted:
        reader.decrypt("")  # no password to open: the permissions stage sets an owner's only
    return list(reader.embedded_signatures)


def validate(pdf: bytes, pki: Pki) -> PdfSignatureStatus:
    """The only signature's status, as pyHanko's validator sees it trusting the test root."""
    [signature] = signatures(pdf)
    return validate_pdf_signature(signature, pki.context())
