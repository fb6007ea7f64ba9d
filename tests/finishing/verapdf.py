"""veraPDF, the reference PDF/A validator, run on the farm's PDFs (installed by
``scripts/verapdf/install.sh``, which ``scripts/test.sh`` runs).

:func:`validate` says whether each PDF conforms to a PDF/A flavour and, if not, which rules it
breaks (``6.2.4.3-2: DeviceRGB shall only be used if ...``), from veraPDF's JSON report. Tests that
need it carry :data:`needs_verapdf`, which skips them, saying why, only when veraPDF is not
installed.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import javatools

VERAPDF = javatools.Tool("verapdf", "REPORTFARM_VERAPDF", "veraPDF")
"""Its launcher: the one ``REPORTFARM_VERAPDF`` names (scripts/test.sh sets it), else the cached
one of install.sh's version."""

needs_verapdf = VERAPDF.needed()


@dataclasses.dataclass(frozen=True)
class Verdict:
    """veraPDF's word on one PDF."""

    name: str
    profile: str
    compliant: bool
    failures: tuple[str, ...]
    """Each failed rule: ``clause-test: description (N checks; first: message)``."""

    def __str__(self) -> str:
        state = "compliant" if self.compliant else "NOT compliant"
        return "\n  ".join([f"{self.name}: {state} with {self.profile}", *self.failures])


def validate(pdfs: Mapping[str, bytes], flavour: str) -> dict[str, Verdict]:
    """veraPDF's verdict on each PDF (by name) against ``flavour`` (``2b``, ``3b``): one run."""
    found = VERAPDF.require()
    with tempfile.TemporaryDirectory(prefix="verapdf-") as folder:
        paths = {}
        for index, (name, pdf) in enumerate(pdfs.items()):
            paths[name] = Path(folder) / f"{index}.pdf"
            paths[name].write_bytes(pdf)
        run = subprocess.run(
            [str(found), "--flavour", flavour, "--format", "json", "--maxfailuresdisplayed", "1"]
            + [str(path) for path in paths.values()],
            capture_output=True,
            timeout=240,
            check=False,
        )
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"veraPDF gave no JSON report (exit {run.returncode}): "
            f"{run.stderr.decode(errors='replace')[-2000:]}"
        ) from None
    by_file = {Path(job["itemDetails"]["name"]).name: job for job in report["report"]["jobs"]}
    return {name: _verdict(name, by_file[path.name]) for name, path in paths.items()}


def _verdict(name: str, job: dict[str, Any]) -> Verdict:
    results = job.get("validationResult") or []
    if not results:
        raise AssertionError(f"veraPDF did not validate {name}: {job.get('taskException')}")
    result = results[0]
    failures = []
    for rule in result["details"]["ruleSummaries"]:
        if rule.get("ruleStatus") != "FAILED":
            continue
        first = rule["checks"][0]["errorMessage"] if rule.get("checks") else ""
        failures.append(
            f"{rule['clause']}-{rule['testNumber']}: {rule['description']} "
            f"({rule['failedChecks']} checks; first: {first})"
        )
    return Verdict(
        name=name,
        profile=result.get("profileName", "?"),
        compliant=bool(result["compliant"]),
        failures=tuple(failures),
    )
