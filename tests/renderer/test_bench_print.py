"""``reportfarm bench print`` in a tiny run: every variant's numbers are there, the reference is
today's print path, and bad options are refused. No timing is asserted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reportfarm_bench import printing
from reportfarm_renderer import browser


def positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.mark.chromium
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_sweep_reports_every_variant_against_today(tmp_path: Path) -> None:
    command = [
        *(sys.executable, "-m", "reportfarm.cli", "bench", "print", "--json", "--jobs", "3"),
        *("--shapes", "1x2", "--flags", "in-process-gpu", "--loading", "domcontentloaded"),
        *("--plot", str(tmp_path / "print.png")),
    ]
    done = subprocess.run(command, capture_output=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    report = json.loads(done.stdout)
    rows = report["variants"]
    full, shell = browser.full_chromium(), browser.system_chromium()
    both = full is not None and shell is not None and full != shell
    assert list(rows) == [
        "today",
        "production",
        "production, screen shown",
        *(["today +headless-shell"] if both else []),
        "shape 1x2",
        "2x1 +in-process-gpu",
        "2x1 domcontentloaded",
    ]
    paths = report["parameters"]["chromium_paths"]
    if both:
        # today's print path ran the full Chromium; everything else the headless shell.
        assert paths["today"] == full
        assert {paths[name] for name in rows if name != "today"} == {shell}
    assert rows["today"]["shape"] == "2x1" and rows["today"]["over_today"] == 1.0
    assert rows["shape 1x2"]["lanes"] == 2 and rows["2x1 +in-process-gpu"]["args"] == [
        "--in-process-gpu"
    ]
    assert rows["2x1 domcontentloaded"]["wait_until"] == "domcontentloaded"
    # production hides each document from the screen, as the renderer's warm page does
    assert [name for name, row in rows.items() if row["hide_screen"]] == ["production"]
    for row in rows.values():
        for key in ("pdf_per_s", "peak_mib", "pdf_per_s_per_gib", "cpu_ms_per_pdf", "over_today"):
            assert positive(row[key]), (key, row)
        if os.geteuid() == 0:  # page frames, for memory as if alone, need CAP_SYS_ADMIN
            for key in ("alone_peak_mib", "pdf_per_s_per_gib_alone", "per_gib_alone_over_today"):
                assert positive(row[key]), (key, row)
        assert row["valid_pdfs"] == row["pdfs"] == 3
    assert len(report["parameters"]["load_before"]) == 3
    assert (tmp_path / "print.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("text", "shape"),
    [("2x1", (2, 1)), ("1X3", (1, 3)), (" 4x2 ", (4, 2))],
)
def test_shapes_are_browsers_by_pages(text: str, shape: tuple[int, int]) -> None:
    assert printing.parse_shape(text) == shape


@pytest.mark.parametrize("text", ["2", "0x1", "1x0", "ax2", "2x", "-1x2"])
def test_a_bad_shape_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="BROWSERSxPAGES"):
        printing.parse_shape(text)


def test_an_unknown_flag_or_wait_is_refused_before_anything_starts() -> None:
    for option in (["--flags", "no-such-flag"], ["--shapes", "2y1"], ["--loading", "idle"]):
        command = [sys.executable, "-m", "reportfarm.cli", "bench", "print", *option]
        done = subprocess.run(command, capture_output=True, timeout=60, check=False)
        assert done.returncode == 2, (option, done.stderr)
        assert b"reportfarm bench print:" in done.stderr
