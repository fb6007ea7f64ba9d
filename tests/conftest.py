"""Shared fixtures: a real Azurite for the session, fresh queue and container names per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from reportfarm import azurite

# The machines are noisy (2 cores, builds beside the tests): no wall-clock limits on examples.
settings.register_profile("reportfarm", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("reportfarm")


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[azurite.Azurite]:
    with azurite.Azurite() as server:
        yield server


@pytest.fixture
def storage_names() -> tuple[str, str]:
    """A queue and a container no other test uses (lower-case, as Azure requires)."""
    suffix = uuid.uuid4().hex[:10]
    return f"q{suffix}", f"c{suffix}"
