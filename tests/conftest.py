"""Shared fixtures: a real Azurite for the session, fresh queue and container names per test."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from reportfarm import azurite

# The machines are noisy (2 cores, builds beside the tests): no wall-clock limits on examples.
settings.register_profile("reportfarm", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("reportfarm")


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that configures logging in-process (``reportfarm.logs.configure``: a handler on the
    stderr pytest captured for that test) leaves the root logger as it found it, so later tests
    never write to a closed capture ("--- Logging error ---" in the output)."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        # only what configure() adds: pytest's own capture handlers come and go per phase
        if type(handler) is logging.StreamHandler and handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[azurite.Azurite]:
    with azurite.Azurite() as server:
        yield server


@pytest.fixture
def storage_names() -> tuple[str, str]:
    """A queue and a container no other test uses (lower-case, as Azure requires)."""
    suffix = uuid.uuid4().hex[:10]
    return f"q{suffix}", f"c{suffix}"
