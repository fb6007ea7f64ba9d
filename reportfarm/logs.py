"""Logging set-up: JSON lines in containers, readable lines on a terminal."""

from __future__ import annotations

import logging
import os
import sys

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

FORMAT_VAR = "REPORTFARM_LOG_FORMAT"
"""``json`` or ``text`` (see :func:`configure`)."""

KOPF_EXTRAS = ("k8s_skip", "k8s_ref", "settings")
"""kopf's per-object log extras: objects, not data (its settings cannot even be copied)."""


def worth_logging(count: int) -> bool:
    """Whether the ``count``-th of a repeated warning is logged: the 1st, 10th and 100th, then
    every 1000th (no flood, and a problem that goes on is never silent)."""
    return count in (1, 10, 100) or (count > 0 and count % 1000 == 0)


def configure(*, json_lines: bool | None = None, level: str | None = None) -> None:
    """REPORTFARM_LOG_FORMAT: ``json`` or ``text``; unset: JSON when stderr is not a terminal
    (a container), text on a terminal. REPORTFARM_LOG_LEVEL: the level (INFO)."""
    if json_lines is None:
        chosen = os.environ.get(FORMAT_VAR, "").strip().lower()
        json_lines = chosen == "json" if chosen in ("json", "text") else not sys.stderr.isatty()
    handler = logging.StreamHandler()
    if json_lines:
        handler.setFormatter(
            JsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                # RFC 3339 in UTC with its zone (2026-12-04T04:56:59.762000+00:00), not asctime's
                # local "2026-12-04 04:56:59,762" without one.
                timestamp="time",
                rename_fields={"levelname": "level", "name": "logger"},
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
