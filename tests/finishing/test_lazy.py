"""A renderer that does not finish or sign never loads the PDF libraries (pikepdf, lxml,
factur-x, pyHanko, fontTools: ~45 MiB of its Python process); the first job that asks for a
stage loads them (the stage tests run every stage through :func:`finishing.plan`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reportfarm_renderer.finishing import keys, signers

HEAVY = ("pikepdf", "lxml", "facturx", "pyhanko", "fontTools")

PROBE = """
import json, sys
from pathlib import Path
import reportfarm_renderer.http, reportfarm_renderer.service
from reportfarm import finishing as contract
from reportfarm_renderer import finishing
from reportfarm_renderer.finishing import keys, signers
before = sorted(name for name in {heavy!r} if name in sys.modules)
signer = signers.load(Path(sys.argv[1]))
planned = [name for name, _ in finishing.plan(contract.Finish.from_dict({{"metadata": {{"title": "t"}}}}))]
after_plan = sorted(name for name in {heavy!r} if name in sys.modules)
print(json.dumps({{"before": before, "signer": signer, "planned": planned, "after_plan": after_plan}}))
"""


def test_the_renderer_starts_without_the_pdf_libraries(tmp_path: Path) -> None:
    probe = PROBE.format(heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen == {
        "before": [],
        "signer": None,
        "planned": ["metadata", "pdfua"],
        "after_plan": [],
    }


def test_a_folder_of_another_shape_is_refused_before_anything_loads(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text("not a Secret of kubernetes.io/tls")
    with pytest.raises(keys.SignerError, match=r"holds key.pem but no tls.key and tls.crt"):
        signers.load(tmp_path)
    assert signers.load(tmp_path / "absent") is None
