"""Fixtures for finishing: the renderer's (real Azurite, the examples as templates)."""

from __future__ import annotations

from ..renderer.conftest import client, storage, template_dir  # noqa: F401
