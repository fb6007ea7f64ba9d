"""``reportfarm bench pages`` in a tiny run (the JSON's shape, whole PDFs, the plot) and its ratios.

A benchmark is a benchmark: no timing is asserted, only that every number is there and that the
ratios compare what they say they compare.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reportfarm_bench import pages_report


def row(
    pages: int, *, s_per_page: float, python: float, driver: float, chromium: float
) -> dict[str, float]:
    return {
        "pages": pages,
        "s_per_page": s_per_page,
        "python_mib": python,
        "driver_mib": driver,
        "chromium_mib": chromium,
    }


def test_ratios_divide_the_larger_size_by_the_smaller_against_their_targets() -> None:
    sizes = {
        "50": row(50, s_per_page=0.1, python=100, driver=200, chromium=600),
        "500": row(500, s_per_page=0.12, python=110, driver=310, chromium=6600),
    }
    found = {r["measure"]: r for r in pages_report.ratios(sizes, [50, 500])}
    assert found["s_per_page"]["value"] == 1.2 and not found["s_per_page"]["met"]
    assert found["worker_mib"]["value"] == 1.4 and found["worker_mib"]["met"]  # (110+310)/300
    assert found["worker_mib"]["target"] == "<= 2"
    assert found["chromium_mib"]["value"] == 11.0 and not found["chromium_mib"]["met"]
    assert found["chromium_mib"]["target"] == "<= 10"  # at most linear: the page ratio


@pytest.mark.chromium
@pytest.mark.azurite
@pytest.mark.slow
def test_a_tiny_run_reports_every_size_whole_with_a_plot(tmp_path: Path) -> None:
    plot = tmp_path / "pages.png"
    command = [
        *(sys.executable, "-m", "reportfarm.cli", "bench", "pages", "--json"),
        *("--pages", "1,3", "--rounds", "1", "--repeat", "1", "--plot", str(plot)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report["sizes"]) == {"1", "3"}
    for size, measured in report["sizes"].items():
        assert measured["pages"] == int(size) and measured["complete"]
        assert measured["python_mib"] > 0 and measured["chromium_mib"] > 0
        assert measured["s_per_page"] > 0 and not measured["streamed"]
    assert [r["sizes"] for r in report["ratios"]] == ["3/1"] * 3
    assert report["parameters"]["render_timeout"] == 180.0
    assert plot.stat().st_size > 0
