"""``reportfarm bench gotenberg`` in a tiny run against a real Gotenberg, built from its Go module
(``scripts/gotenberg/build.sh``, cached) and started by the benchmark in its own PID namespace,
once per Chromium it is given: ``gotenberg`` (the same binary as ours) and ``gotenberg_full``
(Debian's full ``chromium``, as Gotenberg's image runs it; only where that is installed and is
not already ours). A second tiny run gives one Gotenberg a binary that is not Chromium: that side
fails, says why, and the other still runs.

``REPORTFARM_GOTENBERG_BIN`` may name a prebuilt binary (e.g. the newest release built from a
source checkout); otherwise the build script builds the newest version the Go module proxy serves.
Skipped, with the reason, only when Gotenberg cannot be built or given a PID namespace here.
A benchmark is a benchmark: no timing is asserted, only that every number is there, that every
side printed the same pages and text, and that Gotenberg left nothing running.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pypdf
import pytest
from reportfarm_bench import footprint, sameness

from .conftest import pdf_text

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "gotenberg" / "build.sh"
SIDES = ("gotenberg", "gotenberg_full", "reportfarm", "end_to_end")


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


def bench(binary: Path, folder: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    command = [
        *(sys.executable, "-m", "reportfarm.cli", "bench", "gotenberg", "--json"),
        *("--gotenberg-bin", str(binary), "--plot", str(folder / "plot.png")),
        *("--samples", str(folder / "samples"), *extra),
    ]
    return subprocess.run(command, capture_output=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def tiny_run(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:  # type: ignore[type-arg]
    folder = tmp_path_factory.mktemp("bench-gotenberg")
    done = bench(binary, folder, "--jobs", "3", "--pool-size", "1")
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return json.loads(done.stdout), folder


def gotenberg_sides(report: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return report["parameters"]["gotenberg"]["sides"]  # type: ignore[no-any-return]


def full_chromium_side_expected(report: dict) -> bool:  # type: ignore[type-arg]
    """Debian's full chromium is installed and is not the Chromium our pool ran."""
    full = shutil.which("chromium")
    ours = report["parameters"]["chromium_path"]
    return full is not None and os.path.realpath(full) != os.path.realpath(ours)


def ran(report: dict, name: str) -> None:  # type: ignore[type-arg]
    if name == "gotenberg_full" and not full_chromium_side_expected(report):
        pytest.skip("Debian's full chromium is not installed here, or it is our Chromium")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", SIDES)
def test_every_side_reports_throughput_latency_and_memory(
    tiny_run: tuple[dict, Path], name: str
) -> None:  # type: ignore[type-arg]
    report, _ = tiny_run
    ran(report, name)
    row = report[name]
    for key in ("pdf_per_s", "pdf_per_s_per_core", "p50_ms", "p95_ms", "peak_pss_mib"):
        assert positive(row[key]), (key, row)
    assert row["p50_ms"] <= row["p95_ms"]
    assert row["jobs"] == 3
    assert row["valid_pdfs"] == row["pdfs"] >= 3
    assert row["mib_per_pdf_per_s"] == pytest.approx(
        row["peak_pss_mib"] / row["pdf_per_s"], rel=0.02
    )
    if footprint.file_pages({os.getpid()}) is not None:  # page frames readable: as if alone too
        assert positive(row["peak_alone_mib"]), row
        assert row["alone_mib_per_pdf_per_s"] == pytest.approx(
            row["peak_alone_mib"] / row["pdf_per_s"], rel=0.02
        )
    if name == "end_to_end":  # the renderer process's tree, while it printed
        assert positive(row["cpu_ms_per_pdf"]), row
    if name.startswith("gotenberg"):
        assert positive(row["cpu_ms_per_pdf"]), row
        idle = row["idle"]  # what its tree spent while the other sides printed: reported
        assert idle["cpu_s"] >= 0 and positive(idle["wall_s"]) and idle["cores"] >= 0


@pytest.mark.timeout(1800)
def test_each_gotenberg_side_ran_the_chromium_it_was_given(tiny_run: tuple[dict, Path]) -> None:  # type: ignore[type-arg]
    report, _ = tiny_run
    sides = gotenberg_sides(report)
    ours = report["parameters"]["chromium_path"]
    assert sides["gotenberg"]["status"] == "ran"
    assert sides["gotenberg"]["chromium_path"] == ours
    assert sides["gotenberg"]["chromium"] == report["parameters"]["chromium"]
    assert "same binary as ours" in sides["gotenberg"]["which"]
    if full_chromium_side_expected(report):
        full = sides["gotenberg_full"]
        assert full["status"] == "ran", full
        assert full["chromium_path"] == shutil.which("chromium")
        assert full["chromium"].startswith("Chromium ")
        assert "image" in full["which"]
        assert sides["gotenberg"]["url"] != full["url"]  # a Gotenberg each
    else:
        assert sides.get("gotenberg_full", {"status": "skipped"})["status"] == "skipped"


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", ["gotenberg", "gotenberg_full"])
def test_every_gotenberg_side_prints_the_same_pages_and_text_as_ours(
    tiny_run: tuple[dict, Path], name: str
) -> None:  # type: ignore[type-arg]
    report, folder = tiny_run
    ran(report, name)
    same = report["sameness"][name]
    assert same["documents"] == report["parameters"]["documents"] >= 2
    assert same["all_same"], same["differences"]
    assert all(ours == theirs >= 1 for ours, theirs in same["pages"])
    for side in ("reportfarm", name):
        text = pdf_text((folder / "samples" / f"{side}.pdf").read_bytes())
        assert "报告" in text


@pytest.mark.timeout(1800)
def test_the_report_names_the_version_the_configuration_and_the_ratios(
    tiny_run: tuple[dict, Path],
) -> None:  # type: ignore[type-arg]
    report, folder = tiny_run
    params = report["parameters"]
    assert params["gotenberg"]["version"].startswith("8.")
    theirs = [name for name, about in gotenberg_sides(report).items() if about["status"] == "ran"]
    for name in theirs:
        assert "--chromium-restart-after=100" in gotenberg_sides(report)[name]["flags"]
    assert params["cores"] >= 1 and params["load_before"] and params["load_after"]
    ratios = report["ratios"]
    for name in theirs:
        assert ratios[f"end_to_end_over_{name}_pdf_per_s"] == pytest.approx(
            report["end_to_end"]["pdf_per_s"] / report[name]["pdf_per_s"], abs=0.02
        )
    assert set(report["targets"]) == {
        f"end_to_end_over_{name}_{measure}"
        for name in theirs
        for measure in ("pdf_per_s_per_core", "mib_per_pdf_per_s", "alone_mib_per_pdf_per_s")
    }
    assert (folder / "plot.png").stat().st_size > 10_000


@pytest.fixture(scope="module")
def not_a_chromium(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict]:  # type: ignore[type-arg]
    folder = tmp_path_factory.mktemp("bench-gotenberg-false")
    false = shutil.which("false")
    assert false is not None
    done = bench(
        binary, folder, "--jobs", "2", "--pool-size", "1", "--gotenberg-chromium", f"same,{false}"
    )
    assert done.stdout, done.stderr.decode(errors="replace")[-3000:]
    return done.returncode, json.loads(done.stdout)


@pytest.mark.timeout(1800)
def test_gotenberg_and_its_browser_are_gone_after_the_runs(
    binary: Path,
    tiny_run: tuple[dict, Path],  # type: ignore[type-arg]
    not_a_chromium: tuple[int, dict],  # type: ignore[type-arg]
) -> None:
    path = str(binary)
    left = [pid for pid in footprint.parents() if path in footprint.command_line(pid)]
    assert left == []


@pytest.mark.timeout(1800)
def test_a_chromium_gotenberg_cannot_run_fails_its_side_and_says_why(
    not_a_chromium: tuple[int, dict],  # type: ignore[type-arg]
) -> None:
    returncode, report = not_a_chromium
    assert returncode == 1  # a side that could not run is no comparison
    sides = gotenberg_sides(report)
    assert sides["gotenberg_false"]["status"] == "failed"
    assert "chrome failed to start" in sides["gotenberg_false"]["reason"]
    assert "gotenberg_false" not in report and "gotenberg_false" not in report["sameness"]
    assert sides["gotenberg"]["status"] == "ran"  # the other side still ran, and fully
    assert report["gotenberg"]["valid_pdfs"] == report["gotenberg"]["pdfs"] >= 2
    assert report["sameness"]["gotenberg"]["all_same"]


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
