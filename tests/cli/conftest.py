"""Fixtures for command-line tests that need a farm: the renderer's (real Azurite, templates)."""

from __future__ import annotations

from ..renderer.conftest import client, storage, template_dir  # noqa: F401
