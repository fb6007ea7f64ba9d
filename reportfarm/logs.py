"""Logging set-up: JSON lines in containers, readable lines on a terminal."""

from __future__ import annotations

import logging
import os
import sys

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

KOPF_EXTRAS = ("k8s_skip", "k8s_ref", "settings")
"""kopf's per-object log extras: objects, not data (its settings cannot even be copied)."""


def configure(*, json_lines: bool | None = None, level: str | None = None) -> None:
    """JSON when asked, or when stderr is not a terminal (a container); REPORTFARM_LOG_LEVEL."""
    if json_lines is None:
        json_lines = os.environ.get("REPORTFARM_LOG_FORMAT", "").lower() == "json" or not (
            sys.stderr.isatty()
        )
    handler = logging.StreamHandler()
    if json_lines:
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                reserved_attrs=[*RESERVED_ATTRS, *KOPF_EXTRAS],
            )
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level or os.environ.get("REPORTFARM_LOG_LEVEL", "INFO").upper())
    for noisy in ("azure", "aiohttp.access", "kopf.objects"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
