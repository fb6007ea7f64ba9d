"""Mustang, the ZUGFeRD community's Factur-X validator, run on the farm's e-invoices (installed by
``scripts/mustang/install.sh``, which ``scripts/test.sh`` runs).

It judges the PDF as a whole: PDF/A-3 (its own veraPDF), the Factur-X XMP, the embedded XML
against its profile's XSD and EN 16931's business rules (Schematron), and the invoice's sums.
:func:`validate` gives its overall word, the PDF's and the XML's, with every error and warning
(notices, such as the German XRechnung rules that do not apply to a French invoice, are left
out). Tests that need it carry :data:`needs_mustang`.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tempfile
from pathlib import Path

from lxml import etree

from . import javatools

MUSTANG = javatools.Tool("mustang", "REPORTFARM_MUSTANG", "Mustang")
"""Its launcher: the one ``REPORTFARM_MUSTANG`` names (scripts/test.sh sets it), else the cached
one of install.sh's version."""

needs_mustang = MUSTANG.needed()


@dataclasses.dataclass(frozen=True)
class Verdict:
    valid: bool
    pdf: str
    """The PDF part's status (``valid``, ``invalid``)."""
    xml: str
    """The XML part's status."""
    problems: tuple[str, ...]
    """Each error and warning: ``error: [BR-CO-15] ...``."""

    def __str__(self) -> str:
        head = f"Mustang: {'valid' if self.valid else 'INVALID'} (PDF {self.pdf}, XML {self.xml})"
        return "\n  ".join([head, *self.problems])


def validate(pdf: bytes) -> Verdict:
    found = MUSTANG.require()
    with tempfile.TemporaryDirectory(prefix="mustang-") as folder:
        path = Path(folder) / "invoice.pdf"
        path.write_bytes(pdf)
        run = subprocess.run(
            [str(found), "--action", "validate", "--no-notices", "--source", str(path)],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            timeout=240,
            check=False,
        )
    report = run.stdout[run.stdout.find(b"<validation") :]
    if not report:
        raise AssertionError(
            f"Mustang gave no report (exit {run.returncode}): "
            f"{run.stderr.decode(errors='replace')[-2000:]}"
        )
    root = etree.fromstring(report, etree.XMLParser(recover=True, resolve_entities=False))

    def status(path: str) -> str:
        summary = root.find(path)
        return summary.get("status", "?") if summary is not None else "missing"

    problems = tuple(
        f"{element.tag}: {' '.join((element.text or '').split())}"
        for element in root.iter("error", "warning")
    )
    pdf_status, xml_status = status("pdf/summary"), status("xml/summary")
    # Mustang's overall summary can say valid while its PDF part says invalid (an XMP error):
    # valid here is every part valid, and no error.
    valid = (status("summary"), pdf_status, xml_status) == ("valid",) * 3 and not any(
        problem.startswith("error:") for problem in problems
    )
    return Verdict(valid=valid, pdf=pdf_status, xml=xml_status, problems=problems)
