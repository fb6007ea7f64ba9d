"""``reportfarm bench-gotenberg`` in a tiny run against a real Gotenberg, built from its Go module
(``scripts/gotenberg/build.sh``, cached) and started by the benchmark in its own PID namespace.

``REPORTFARM_GOTENBERG_BIN`` may name a prebuilt binary (e.g. the newest release built from a
source checkout); otherwise the build script builds the newest version the Go module proxy serves.
Skipped, with the reason, only when Gotenberg cannot be built or given a PID namespace here.
A benchmark is a benchmark: no timing is asserted, only that every number is there, that both
sides printed the same pages and text, and that Gotenberg left nothing running.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pypdf
import pytest
from reportfarm_renderer.benchmarking import footprint, sameness

from .conftest import pdf_text

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "gotenberg" / "build.sh"
SIDES = ("gotenberg", "reportfarm", "end_to_end")


def positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def binary() -> Path:
    override = os.environ.get("REPORTFARM_GOTENBERG_BIN")
    if override:
        return Path(override)
    namespace = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False
    )
    if namespace.returncode != 0:
        pytest.skip(f"no PID namespace for Gotenberg here: {namespace.stderr.decode()[-300:]}")
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1500, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"Gotenberg could not be built from the Go module proxy: {done.stderr[-1500:]}")
    return Path(done.stdout.strip().splitlines()[-1]) / "gotenberg"


@pytest.fixture(scope="module")
def tiny_run(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:  # type: ignore[type-arg]
    folder = tmp_path_factory.mktemp("bench-gotenberg")
    command = [
        *(sys.executable, "-m", "reportfarm.cli", "bench-gotenberg", "--json"),
        *("--gotenberg-bin", str(binary), "--jobs", "3", "--pool-size", "1"),
        *("--plot", str(folder / "plot.png"), "--samples", str(folder / "samples")),
    ]
    done = subprocess.run(command, capture_output=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return json.loads(done.stdout), folder


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", SIDES)
def test_every_side_reports_throughput_latency_and_memory(
    tiny_run: tuple[dict, Path], name: str
) -> None:  # type: ignore[type-arg]
    report, _ = tiny_run
    row = report[name]
    for key in ("pdf_per_s", "pdf_per_s_per_core", "p50_ms", "p95_ms", "peak_pss_mib"):
        assert positive(row[key]), (key, row)
    assert row["p50_ms"] <= row["p95_ms"]
    assert row["jobs"] == 3
    assert row["valid_pdfs"] == row["pdfs"] >= 3
    assert row["mib_per_pdf_per_s"] == pytest.approx(
        row["peak_pss_mib"] / row["pdf_per_s"], rel=0.02
    )


@pytest.mark.timeout(1800)
def test_both_sides_print_the_same_pages_and_text(tiny_run: tuple[dict, Path]) -> None:  # type: ignore[type-arg]
    report, folder = tiny_run
    same = report["sameness"]
    assert same["documents"] == report["parameters"]["documents"] >= 2
    assert same["all_same"], same["differences"]
    assert all(ours == theirs >= 1 for ours, theirs in same["pages"])
    for side in ("reportfarm", "gotenberg"):
        text = pdf_text((folder / "samples" / f"{side}.pdf").read_bytes())
        assert "报告" in text


@pytest.mark.timeout(1800)
def test_the_report_names_the_version_the_configuration_and_the_ratios(
    tiny_run: tuple[dict, Path],
) -> None:  # type: ignore[type-arg]
    report, folder = tiny_run
    params = report["parameters"]
    assert params["gotenberg"]["version"].startswith("8.")
    assert "--chromium-restart-after=100" in params["gotenberg"]["flags"]
    assert params["cores"] >= 1 and params["load_before"] and params["load_after"]
    ratios = report["ratios"]
    theirs, ours = report["gotenberg"], report["end_to_end"]
    assert ratios["end_to_end_over_gotenberg_pdf_per_s"] == pytest.approx(
        ours["pdf_per_s"] / theirs["pdf_per_s"], abs=0.02
    )
    assert set(report["targets"]) == {
        "end_to_end_over_gotenberg_pdf_per_s_per_core",
        "end_to_end_over_gotenberg_mib_per_pdf_per_s",
    }
    assert (folder / "plot.png").stat().st_size > 10_000


@pytest.mark.timeout(1800)
def test_gotenberg_and_its_browser_are_gone_after_the_run(
    binary: Path, tiny_run: tuple[dict, Path]
) -> None:  # type: ignore[type-arg]
    path = str(binary)
    left = [pid for pid in footprint.parents() if path in footprint.command_line(pid)]
    assert left == []


@pytest.mark.timeout(1800)
def test_a_pdf_with_an_extra_page_is_not_the_same(tiny_run: tuple[dict, Path]) -> None:  # type: ignore[type-arg]
    _, folder = tiny_run
    original = (folder / "samples" / "gotenberg.pdf").read_bytes()
    writer = pypdf.PdfWriter()
    reader = pypdf.PdfReader(io.BytesIO(original))
    for page in [*reader.pages, reader.pages[0]]:
        writer.add_page(page)
    longer = io.BytesIO()
    writer.write(longer)
    verdict = sameness.compare("doubled", original, longer.getvalue())
    assert not verdict.same_pages and not verdict.same_text and not verdict.same
    assert verdict.first_difference
    assert sameness.compare("itself", original, original).same
