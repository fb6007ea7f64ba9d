"""Fixtures of the finishing tests: the renderer's (a real renderer on Azurite and Chromium) and a
throwaway PKI for signing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..renderer.conftest import client, storage, template_dir, worker_process  # noqa: F401
from .keys import Pki


@pytest.fixture(scope="session")
def pki() -> Pki:
    return Pki.make()


@pytest.fixture
def signing_dir(tmp_path: Path, pki: Pki) -> Path:
    """The farm's signing Secret, mounted: tls.crt (signer + intermediate), tls.key, ca.crt."""
    return pki.write(tmp_path / "signing")
