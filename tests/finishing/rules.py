"""EN 16931's business rules as the tests' renderers use them: the XSLT that
``scripts/en16931/install.sh`` extracts (``scripts/test.sh`` runs it and sets
``REPORTFARM_EN16931_XSLT``), else the one it cached for Mustang's pinned version. A renderer
without them refuses Factur-X invoices (fail closed), so the finishing tests always pass them."""

from __future__ import annotations

import os
from pathlib import Path

from . import javatools

VARIABLE = "REPORTFARM_EN16931_XSLT"
FILE = "EN16931-CII-validation.xslt"


def xslt() -> Path | None:
    if os.environ.get(VARIABLE):
        return Path(os.environ[VARIABLE])
    cache = Path(os.environ.get("REPORTFARM_CACHE") or Path.home() / ".cache" / "reportfarm")
    cached = cache / "en16931" / javatools.pinned_version("mustang") / FILE
    return cached if cached.is_file() else None
