"""PAdES B-T: with a timestamp authority named, every signature carries an RFC 3161 signature
timestamp from it, which pyHanko's validator checks (trusting the test root, which issued the
TSA's certificate); without one, B-B. An authority that does not answer makes the job temporary
(delivered again), never a signature without the timestamp asked for, and never stops the start."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pikepdf
import pytest
from pyhanko.sign.validation import validate_pdf_signature
from reportfarm_renderer import finishing
from reportfarm_renderer.finishing import signing

from reportfarm import outcomes
from reportfarm.finishing import Finish, Signature

from . import tsa
from .keys import Pki, signatures


@pytest.fixture(scope="module")
def authority(pki: Pki) -> Iterator[tsa.Authority]:
    with tsa.running(pki) as running:
        yield running


def document() -> bytes:
    made = pikepdf.new()
    made.add_blank_page(page_size=(595, 842))
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def sign(signer: signing.Signer, wanted: Signature) -> bytes:
    inputs = finishing.Inputs(job_id="j1", finish=Finish(sign=wanted), signer=signer)
    return finishing.run_stage("sign", finishing.plan(inputs.finish)[0][1], document(), inputs)


@pytest.mark.parametrize("visible", [False, True])
def test_a_signature_with_an_authority_named_carries_a_timestamp_pyhanko_validates(
    pki: Pki, authority: tsa.Authority, tmp_path: Path, visible: bool
) -> None:
    signer = signing.Signer.load(pki.write(tmp_path), timestamp_url=authority.url)
    assert signer is not None
    before = authority.tokens
    pdf = sign(signer, Signature(visible=visible, reason="Freigegeben — Łódź"))
    # from this authority (pyHanko asks once more for a signer's first, to size the signature)
    assert authority.tokens in (before + 1, before + 2)
    [signature] = signatures(pdf)
    status = validate_pdf_signature(signature, pki.context(), ts_validation_context=pki.context())
    assert status.bottom_line, status.pretty_print_details()
    assert status.timestamp_validity is not None
    assert status.timestamp_validity.intact and status.timestamp_validity.valid
    assert status.timestamp_validity.trusted, status.timestamp_validity
    assert status.timestamp_validity.timestamp is not None


def test_without_an_authority_the_signature_is_b_b(pki: Pki, tmp_path: Path) -> None:
    signer = signing.Signer.load(pki.write(tmp_path))
    assert signer is not None and signer.timestamper is None
    [signature] = signatures(sign(signer, Signature()))
    status = validate_pdf_signature(signature, pki.context())
    assert status.bottom_line and status.timestamp_validity is None


def test_an_authority_that_does_not_answer_makes_the_job_temporary_not_unstamped(
    pki: Pki, authority: tsa.Authority, tmp_path: Path
) -> None:
    authority.down = True
    try:
        signer = signing.Signer.load(pki.write(tmp_path), timestamp_url=authority.url)
        assert signer is not None  # the start goes on (the authority is only logged)
        with pytest.raises(outcomes.TemporaryError, match=r"timestamp authority .* did not answer"):
            sign(signer, Signature())
    finally:
        authority.down = False
