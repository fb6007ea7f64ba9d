"""The ``sign`` stage: a PAdES baseline B-B signature (``ETSI.CAdES.detached``, SHA-256; B-T
with a timestamp authority) by the farm's key, added as an incremental update, always the last
stage (a later change would break it).

The key and its certificate come from a ``kubernetes.io/tls`` Secret mounted as a folder
(``REPORTFARM_SIGNING_DIR``, by default ``renderer_api.SIGNING_DIR``): ``tls.key`` (unencrypted,
PEM or DER), ``tls.crt`` (the signer's certificate, possibly followed by its intermediates, as
cert-manager writes it) and optionally ``ca.crt`` (more of the chain, embedded too). They are read
once, at start, by :meth:`Signer.load`, which also signs a blank page to prove they work: a key
that cannot be used stops the renderer with its reason instead of failing every job. A folder
with neither file means no signing: a job asking for a signature then fails (poison) saying so.
A job never carries a key; it only asks for a signature.

What a signature is here:

- an approval signature in a new field, ``ReportfarmSignature``, with the job's reason, location
  and contact in the signature dictionary;
- invisible (a zero-size widget on the first page), or visible: a stamp in the job's box on its
  page, saying who signed (the certificate's common name), when (UTC) and, cut to a line each, the
  reason and location. Its text is set run by run in Debian's Noto faces (:mod:`.fonts`,
  :mod:`.stamp`: Latin, Greek, Cyrillic, Arabic, Hebrew, Thai, CJK...), a subset of each embedded:
  PDF/A allows no font that is not embedded, and the PDF may be PDF/A by now. A reason or
  location no face can draw is refused before the print; a signer's name is drawn with such
  characters as ``U+XXXX`` (a certificate is never a reason not to start);
- an encrypted PDF (``permissions``) is signed with the owner password that stage left, and keeps
  its encryption and permissions;
- the document's metadata (its Info dictionary and XMP) stays as the earlier stages made it:
  pyHanko would rewrite the XMP (breaking the PDF/A extension schemas Factur-X needs, pyHanko
  issue 755) and add itself to the Info's producer only, which PDF/A forbids (the two must agree).

With a timestamp authority named (the ReportPool's ``signingTimestampUrl``, the renderer's
``REPORTFARM_TSA_URL``), every signature carries its RFC 3161 signature timestamp: PAdES B-T, the
time vouched for by the authority, not the renderer's clock. An authority that does not answer
makes the job temporary (delivered again later), never a signature without the timestamp asked
for; at start it is asked once and only logged (:meth:`Signer.try_timestamp`). Not here:
revocation data for long-term validation (B-LT, B-LTA).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pikepdf
from asn1crypto import keys as asn1_keys
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.x509.oid import NameOID
from pyhanko.pdf_utils.crypt import AuthStatus
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign import fields, signers, timestamps
from pyhanko.sign.general import SigningError
from pyhanko.sign.timestamps.common_utils import TimestampRequestError
from pyhanko_certvalidator.registry import SimpleCertificateStore
from pyhanko_certvalidator.util import get_pyca_cryptography_hash, process_pss_params

from reportfarm import outcomes
from reportfarm.finishing import FinishError, Signature

from . import fonts, stamp
from .keys import CERT_FILE, CHAIN_FILE, KEY_FILE, SignerError, absent, require

__all__ = ["CERT_FILE", "CHAIN_FILE", "KEY_FILE", "Signer", "SignerError", "apply", "require"]

if TYPE_CHECKING:
    from . import Inputs

logger = logging.getLogger(__name__)
# fontTools logs each subset it makes, a line per table, at INFO: thirty lines a visible signature.
logging.getLogger("fontTools.subset").setLevel(logging.WARNING)

"""The file names of a ``kubernetes.io/tls`` Secret (``ca.crt``: as cert-manager adds it)."""
FIELD_NAME = "ReportfarmSignature"
STAMP_LINE = 80
"""Characters of a stamp line (reason, location) before it is cut; the signature keeps it whole."""
TSA_TIMEOUT_S = 10
TSA_RETRY_S = 30.0
"""A job whose timestamp the authority did not give is delivered again after this."""
MIN_RSA_BITS = 2048
PrivateKey = (
    rsa.RSAPrivateKey
    | ec.EllipticCurvePrivateKey
    | ed25519.Ed25519PrivateKey
    | ed448.Ed448PrivateKey
)
"""The keys pyHanko signs with."""
_SHA256 = hashes.SHA256()


@dataclasses.dataclass(frozen=True, eq=False)
class Signer:
    """The farm's key and certificate, loaded once at start (:meth:`load`), and the stamp's font."""

    pyhanko_signer: signers.SimpleSigner
    certificate: x509.Certificate
    chain: tuple[x509.Certificate, ...]
    """The certificates embedded after the signer's (intermediates, and the root if given)."""
    timestamper: timestamps.TimeStamper | None = None
    """The timestamp authority (RFC 3161) that makes signatures PAdES B-T; None: B-B."""
    timestamp_url: str | None = None
    reserved: dict[bool, int] = dataclasses.field(default_factory=dict)
    """Bytes to reserve for the signature container, by whether it is timestamped: pyHanko's
    estimate (a whole dry-run signature, ~a third of an invisible signature's CPU) taken from the
    first signature of each kind, then reused (:func:`sign`)."""

    @property
    def subject(self) -> str:
        return self.certificate.subject.rfc4514_string()

    @property
    def name(self) -> str:
        """Who signs, as the stamp says it: the certificate's common name, else its subject."""
        names = self.certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        value = names[0].value if names else None
        return value if isinstance(value, str) and value.strip() else self.subject

    @property
    def not_after(self) -> datetime.datetime:
        return self.certificate.not_valid_after_utc

    def describe(self) -> str:
        """For the start-up log: the certificate, never the key."""
        return (
            f"certificate {self.subject!r} issued by {self.certificate.issuer.rfc4514_string()!r}, "
            f"valid until {self.not_after:%Y-%m-%d}, SHA-256 "
            f"{self.certificate.fingerprint(_SHA256).hex()}, {len(self.chain)} more in the chain"
        )

    def check_current(self, moment: datetime.datetime) -> None:
        """A certificate out of its validity makes signatures no validator accepts."""
        if moment > self.certificate.not_valid_after_utc:
            raise FinishError(
                f"the farm's signing certificate {self.subject!r} expired on "
                f"{self.certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC: renew its Secret"
            )
        if moment < self.certificate.not_valid_before_utc:
            raise FinishError(
                f"the farm's signing certificate {self.subject!r} is not valid before "
                f"{self.certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
            )

    @classmethod
    def load(
        cls, folder: Path, *, timestamp_url: str | None = None, prove: bool = True
    ) -> Signer | None:
        """The key in ``folder`` (a mounted ``kubernetes.io/tls`` Secret), proven by signing a
        blank page (unless ``prove`` is False: a finishing process loads the key the renderer
        proved); None when the folder holds neither key nor certificate (signing is off).
        Blocking (files, a signature): run it in a thread. Raises :class:`SignerError`."""
        key_path, cert_path = folder / KEY_FILE, folder / CERT_FILE
        if absent(folder):
            return None
        for path in (key_path, cert_path):
            if not path.exists():
                raise SignerError(
                    f"{folder} holds {key_path.name if path is cert_path else cert_path.name} "
                    f"but no {path.name}: a kubernetes.io/tls Secret has both"
                )
        key = _private_key(_read(key_path))
        certificates = _certificates(_read(cert_path), cert_path)
        chain_path = folder / CHAIN_FILE
        extra = _certificates(_read(chain_path), chain_path) if chain_path.exists() else []
        mine = _public(key)
        leaves = [cert for cert in certificates if _public(cert.public_key()) == mine]
        if not leaves:
            subjects = ", ".join(repr(cert.subject.rfc4514_string()) for cert in certificates)
            raise SignerError(
                f"{key_path} does not match the certificate in {cert_path} ({subjects}): "
                "the Secret must hold the certificate of this key"
            )
        certificate = leaves[0]
        _check_certificate(certificate, datetime.datetime.now(datetime.UTC))
        seen = {certificate.fingerprint(_SHA256)}
        chain: list[x509.Certificate] = []
        for cert in (*certificates, *extra):
            if cert.fingerprint(_SHA256) not in seen:
                seen.add(cert.fingerprint(_SHA256))
                chain.append(cert)
        signer = cls(
            pyhanko_signer=_pyhanko_signer(key, certificate, chain),
            certificate=certificate,
            chain=tuple(chain),
            timestamper=timestamps.HTTPTimeStamper(timestamp_url, timeout=TSA_TIMEOUT_S)
            if timestamp_url
            else None,
            timestamp_url=timestamp_url,
        )
        stamp_fonts()
        if not prove:
            return signer
        signer.prove()
        signer.try_timestamp()
        if fonts.undrawable(signer.name) is not None:
            logger.warning(
                "no font draws all of the signer's name %r: stamps say %r",
                signer.name,
                fonts.drawable(signer.name),
            )
        return signer

    def try_timestamp(self) -> None:
        """Ask the timestamp authority once, at start: an answer it cannot give is logged (a
        TSA that is away now may be back for the first job; a job then retries, see sign)."""
        if self.timestamper is None:
            return
        try:  # blocking, in the start-up thread (which has no event loop)
            asyncio.run(self.timestamper.async_timestamp(bytes(32), "sha256"))
        except Exception as error:
            logger.warning(
                "the timestamp authority %s did not answer: %s", self.timestamp_url, error
            )
        else:
            logger.info("signing: PAdES B-T, timestamps from %s", self.timestamp_url)

    def prove(self) -> None:
        """Sign a blank page (visible, so the stamp's font is tried too): whatever pyHanko
        refuses about the key shows at start, not in the first job. Without a timestamp: the
        authority's answer is tried apart (:meth:`try_timestamp`) and never stops the start."""
        document = pikepdf.new()
        document.add_blank_page(page_size=(595, 842))
        blank = io.BytesIO()
        document.save(blank)
        wanted = Signature(visible=True, reason="start-up check")
        try:
            sign(
                blank.getvalue(),
                dataclasses.replace(self, timestamper=None),
                wanted,
                owner_password=None,
            )
        except Exception as error:
            raise SignerError(
                f"signing a blank page with {self.subject!r} failed: "
                f"{type(error).__name__}: {error}"[:500]
            ) from error


def apply(pdf: bytes, inputs: Inputs) -> bytes:
    wanted = inputs.finish.sign
    assert wanted is not None
    return sign(pdf, require(inputs.signer), wanted, owner_password=inputs.owner_password)


def sign(
    pdf: bytes,
    signer: Signer,
    wanted: Signature,
    *,
    owner_password: str | None,
    moment: datetime.datetime | None = None,
) -> bytes:
    """``pdf`` with a PAdES B-B signature by ``signer`` as ``wanted`` asks, as an incremental
    update; ``owner_password`` opens an encrypted PDF. Raises FinishError on a job's mistake."""
    moment = moment or datetime.datetime.now(datetime.UTC)
    signer.check_current(moment)
    timestamped = signer.timestamper is not None
    reserved = signer.reserved.get(timestamped)
    try:
        signed = _signed(pdf, signer, wanted, owner_password, moment, reserved)
    except SigningError as error:
        if reserved is None or "larger than expected" not in str(error):
            raise
        # a container larger than the first one (a longer chain from the authority): estimate
        signer.reserved.pop(timestamped, None)
        signed = _signed(pdf, signer, wanted, owner_password, moment, None)
    if reserved is None and owner_password is None:  # an encrypted one is not read back
        signer.reserved[timestamped] = _reserved_size(signed)
    return signed


def _signed(
    pdf: bytes,
    signer: Signer,
    wanted: Signature,
    owner_password: str | None,
    moment: datetime.datetime,
    reserved: int | None,
) -> bytes:
    writer = _Writer(io.BytesIO(pdf))
    if writer.prev.encrypted:
        if owner_password is None:
            raise FinishError("the PDF is encrypted, and no owner password came with it")
        if writer.encrypt(owner_password).status is not AuthStatus.OWNER:
            raise FinishError("the owner password the permissions stage left does not open it")
    metadata = signers.PdfSignatureMetadata(
        field_name=FIELD_NAME,
        subfilter=fields.SigSeedSubFilter.PADES,
        md_algorithm="sha256",
        reason=wanted.reason,
        location=wanted.location,
        contact_info=wanted.contact,
    )
    try:
        if not wanted.visible:
            spec = fields.SigFieldSpec(FIELD_NAME, on_page=0)
            pdf_signer = signers.PdfSigner(
                metadata, signer.pyhanko_signer, new_field_spec=spec, timestamper=signer.timestamper
            )
            return pdf_signer.sign_pdf(writer, bytes_reserved=reserved).getvalue()
        page, box = _placement(pdf, wanted)
        text = stamp_text(signer.name, moment, wanted)
        spec = fields.SigFieldSpec(FIELD_NAME, on_page=page, box=box)
        pdf_signer = signers.PdfSigner(
            metadata,
            signer.pyhanko_signer,
            stamp_style=stamp.style(),
            new_field_spec=spec,
            timestamper=signer.timestamper,
        )
        return pdf_signer.sign_pdf(
            writer, bytes_reserved=reserved, appearance_text_params={"text": text}
        ).getvalue()
    except TimestampRequestError as error:  # the authority is away: another delivery may do
        raise outcomes.TemporaryError(
            f"the timestamp authority {signer.timestamp_url} did not answer: {error}"[:500],
            delay_s=TSA_RETRY_S,
        ) from error


def _reserved_size(signed: bytes) -> int:
    """The bytes pyHanko reserved for the last signature of ``signed`` (its ``/Contents``, as
    hexadecimal digits: twice the container's bytes)."""
    reader = PdfFileReader(io.BytesIO(signed))
    contents = reader.embedded_signatures[-1].sig_object["/Contents"]
    return 2 * len(bytes(contents))


def stamp_text(name: str, moment: datetime.datetime, wanted: Signature) -> str:
    """What a visible signature says: who, when (UTC), and the reason and location if given."""
    lines = [
        f"Digitally signed by {_line(fonts.drawable(name))}",
        f"Date: {moment.astimezone(datetime.UTC):%Y-%m-%d %H:%M:%S} UTC",
    ]
    if wanted.reason:
        lines.append(f"Reason: {_line(wanted.reason)}")
    if wanted.location:
        lines.append(f"Location: {_line(wanted.location)}")
    return "\n".join(lines)


def _line(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= STAMP_LINE else flat[: STAMP_LINE - 1].rstrip() + "…"


def _placement(pdf: bytes, wanted: Signature) -> tuple[int, tuple[int, int, int, int]]:
    """The page index and the box in the page's coordinates, in whole points (as pyHanko takes a
    field's box); FinishError if they do not fit."""
    with pikepdf.open(io.BytesIO(pdf)) as document:
        count = len(document.pages)
        index = count - 1 if wanted.page == -1 else wanted.page
        if index >= count:
            raise FinishError(
                f"finish.sign.page {wanted.page} is past the last page (the PDF has {count})"
            )
        llx, lly, urx, ury = (float(value) for value in document.pages[index].mediabox)
    width, height = urx - llx, ury - lly
    x1, y1, x2, y2 = (float(value) for value in wanted.box)
    if x2 > width or y2 > height or x1 >= x2 or y1 >= y2:
        raise FinishError(
            f"finish.sign.box {list(wanted.box)} does not fit page {index + 1} "
            f"({width:g} x {height:g} points)"
        )
    corner = (llx + x1, lly + y1, llx + x2, lly + y2)
    return index, (round(corner[0]), round(corner[1]), round(corner[2]), round(corner[3]))


class _Writer(IncrementalPdfFileWriter):
    """An incremental update that leaves the document's metadata alone (see the module's
    docstring); pyHanko's maintainer names this override as the way to do that (issue 223)."""

    def _update_meta(self) -> None:
        return None


def stamp_fonts() -> None:
    """The stamp's faces are installed (and pyHanko's OpenType engine), or :class:`SignerError`."""
    try:  # pyHanko's OpenType engine, which the stamp uses: fontTools and HarfBuzz
        import pyhanko.pdf_utils.font.opentype  # noqa: F401
    except ImportError as error:
        raise SignerError(
            f"the signature stamp needs pyHanko's OpenType support: {error}; "
            "install reportfarm[renderer] (pyhanko[opentype])"
        ) from None
    available = fonts.faces()
    if not available or available[0].spec != fonts.FACES[0]:
        raise SignerError(
            f"no {fonts.FACES[0].file} for the signature stamp (looked under "
            f"{', '.join(map(str, fonts.FONT_ROOTS))}): install fonts-noto-core"
        )


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise SignerError(f"cannot read {path}: {error.strerror or error}") from None


def _private_key(data: bytes) -> PrivateKey:
    try:
        if b"-----BEGIN" in data:
            key = serialization.load_pem_private_key(data, password=None)
        else:
            key = serialization.load_der_private_key(data, password=None)
    except TypeError:
        raise SignerError(
            f"{KEY_FILE} is encrypted: the Secret must hold it unencrypted "
            "(as `kubectl create secret tls` and cert-manager store it)"
        ) from None
    except (ValueError, UnsupportedAlgorithm) as error:
        raise SignerError(f"{KEY_FILE} is not a private key in PEM or DER: {error}") from None
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size < MIN_RSA_BITS:
        raise SignerError(f"{KEY_FILE} is a {key.key_size}-bit RSA key: at least 2048 bits")
    if not isinstance(key, PrivateKey):
        raise SignerError(
            f"{KEY_FILE} is a {type(key).__name__}: the farm signs with RSA, ECDSA or EdDSA keys"
        )
    return key


def _certificates(data: bytes, path: Path) -> list[x509.Certificate]:
    try:
        if b"-----BEGIN" in data:
            found = x509.load_pem_x509_certificates(data)
        else:
            found = [x509.load_der_x509_certificate(data)]
    except ValueError as error:
        raise SignerError(f"{path} holds no certificate in PEM or DER: {error}") from None
    return found


def _public(key: object) -> bytes:
    public = key.public_key() if hasattr(key, "public_key") else key
    return public.public_bytes(  # type: ignore[union-attr]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _check_certificate(certificate: x509.Certificate, now: datetime.datetime) -> None:
    subject = certificate.subject.rfc4514_string()
    if now > certificate.not_valid_after_utc:
        raise SignerError(
            f"the signing certificate {subject!r} expired on "
            f"{certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
        )
    if now < certificate.not_valid_before_utc:
        raise SignerError(
            f"the signing certificate {subject!r} is not valid before "
            f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
        )
    try:
        usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return
    if not (usage.digital_signature or usage.content_commitment):
        raise SignerError(
            f"the signing certificate {subject!r} may not sign: its key usage has neither "
            "digitalSignature nor nonRepudiation"
        )
    if not usage.content_commitment:
        logger.warning(
            "the signing certificate %r has no nonRepudiation (contentCommitment) key usage: "
            "some validators (pyHanko's by default) refuse its signatures",
            subject,
        )


def _pyhanko_signer(
    key: PrivateKey, certificate: x509.Certificate, chain: list[x509.Certificate]
) -> signers.SimpleSigner:
    def as_asn1(cert: x509.Certificate) -> asn1_x509.Certificate:
        return asn1_x509.Certificate.load(cert.public_bytes(serialization.Encoding.DER))

    der = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return _LoadedKeySigner(
        key,
        signing_cert=as_asn1(certificate),
        signing_key=asn1_keys.PrivateKeyInfo.load(der),
        cert_registry=SimpleCertificateStore.from_certs([as_asn1(cert) for cert in chain]),
    )


class _LoadedKeySigner(signers.SimpleSigner):
    """pyHanko's in-memory signer with the key parsed once: its own ``sign_raw`` parses the key
    from DER for every signature (for an RSA key, OpenSSL's checks: the largest single cost of
    an invisible signature here). Same mechanisms, same results; another mechanism than
    RSA (PKCS#1 v1.5, PSS), ECDSA or EdDSA goes to pyHanko's own."""

    def __init__(self, key: PrivateKey, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._key = key

    def sign_raw(self, data: bytes, digest_algorithm: str) -> bytes:
        mechanism = self.get_signature_mechanism_for_digest(digest_algorithm)
        try:
            name = mechanism.signature_algo
        except ValueError:  # as pyHanko's own sign_raw reads it
            name = mechanism["algorithm"].native
        key = self._key
        if isinstance(key, rsa.RSAPrivateKey) and name == "rsassa_pkcs1v15":
            return key.sign(data, padding.PKCS1v15(), get_pyca_cryptography_hash(digest_algorithm))
        if isinstance(key, rsa.RSAPrivateKey) and name == "rsassa_pss":
            pss, hash_algorithm = process_pss_params(mechanism["parameters"])
            return key.sign(data, pss, hash_algorithm)
        if isinstance(key, ec.EllipticCurvePrivateKey) and name == "ecdsa":
            algorithm = ec.ECDSA(get_pyca_cryptography_hash(digest_algorithm))
            return key.sign(data, algorithm)
        if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey) and name in (
            "ed25519",
            "ed448",
        ):
            return key.sign(data)
        return super().sign_raw(data, digest_algorithm)
