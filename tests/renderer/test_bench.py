"""``reportfarm bench strategies`` in a tiny run: the JSON's shape, valid PDFs from every strategy, the plot.

A benchmark is a benchmark: no timing is asserted here, only that every number is there.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import pdf_text

pytestmark = [pytest.mark.chromium, pytest.mark.azurite, pytest.mark.slow]

STRATEGIES = (
    "browser_per_job",
    "context_per_job",
    "reportfarm",
    "site_isolated",
    "ceiling",
    "ceiling_today",
)
RATIOS = (
    "reportfarm_over_context_per_job",
    "end_to_end_over_ceiling",
    "reportfarm_over_site_isolated",
    "burst_p95_over_bound",
    "ceiling_over_today",
)


def positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Path]:
    folder = tmp_path_factory.mktemp("bench")
    command = [
        *(sys.executable, "-m", "reportfarm.cli", "bench", "strategies", "--json"),
        *("--jobs", "4", "--pool-size", "1"),
        *("--plot", str(folder / "plot" / "bench.png"), "--samples", str(folder / "samples")),
    ]
    done = subprocess.run(command, capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return json.loads(done.stdout), folder  # stdout holds the JSON and nothing else


@pytest.mark.timeout(660)
@pytest.mark.parametrize("name", [*STRATEGIES, "end_to_end"])
def test_every_strategy_reports_its_numbers_and_valid_pdfs(
    tiny_run: tuple[dict[str, object], Path], name: str
) -> None:
    report, folder = tiny_run
    row = report[name]
    assert isinstance(row, dict)
    for key in ("pdf_per_s", "p50_ms", "p95_ms"):
        assert positive(row[key]), (key, row)
    assert row["p50_ms"] <= row["p95_ms"]
    assert row["jobs"] == 4
    assert row["valid_pdfs"] == row["pdfs"] >= 4
    text = pdf_text((folder / "samples" / f"{name}.pdf").read_bytes())
    assert "临考词汇突击" in text and "报告" in text


@pytest.mark.timeout(660)
def test_the_end_to_end_entry_has_the_burst_and_a_single_render(
    tiny_run: tuple[dict[str, object], Path],
) -> None:
    report, _ = tiny_run
    end_to_end = report["end_to_end"]
    assert isinstance(end_to_end, dict)
    assert end_to_end["burst"] == 20
    assert positive(end_to_end["single_ms"])
    assert end_to_end["pdfs"] >= 20 + 4  # a burst, the throughput run and the lone jobs
    assert set(end_to_end["stages_p50_ms"]) >= {"render_html", "pdf_generation"}
    # The bound the burst is held to: its jobs at the measured throughput plus a lone job.
    bound = 20 / end_to_end["pdf_per_s"] * 1000 + end_to_end["single_ms"]
    assert report["ratios"]["burst_p95_over_bound"] == round(end_to_end["p95_ms"] / bound, 2)


@pytest.mark.timeout(660)
def test_cpu_per_pdf_is_split_by_process(tiny_run: tuple[dict[str, object], Path]) -> None:
    """Every strategy's PDFs cost Chromium CPU; only the path through the queue costs Azurite's."""
    report, _ = tiny_run
    for name in [*STRATEGIES, "end_to_end"]:
        shares = report[name]["cpu_ms_per_pdf"]
        assert positive(shares["chromium"]) and positive(shares["python"]), (name, shares)
        parts = sum(
            shares[part] for part in ("chromium", "driver", "renderer", "python", "azurite")
        )
        assert math.isclose(shares["total"], parts, abs_tol=0.5), shares
    # end to end runs a renderer process of its own (python is then its client); it idles,
    # polling the empty queue, while the other strategies print, so theirs is not zero
    assert positive(report["end_to_end"]["cpu_ms_per_pdf"]["renderer"])
    assert positive(report["end_to_end"]["cpu_ms_per_pdf"]["azurite"])


@pytest.mark.timeout(660)
def test_ratios_parameters_and_plot(tiny_run: tuple[dict[str, object], Path]) -> None:
    report, folder = tiny_run
    ratios, targets, parameters = report["ratios"], report["targets"], report["parameters"]
    assert isinstance(ratios, dict) and isinstance(targets, dict) and isinstance(parameters, dict)
    assert set(ratios) == set(targets) == set(RATIOS)
    assert all(positive(value) for value in ratios.values()), ratios
    assert all(isinstance(target["met"], bool) for target in targets.values())
    assert parameters["pool_size"] == 1 and parameters["jobs"] == 4
    assert parameters["pages_per_browser"] >= 1
    assert positive(parameters["cpu_count"])
    assert str(parameters["chromium"])[:1].isdigit()
    assert len(parameters["load_before"]) == len(parameters["load_after"]) == 3
    assert (folder / "plot" / "bench.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.timeout(660)
def test_the_finishing_costs_cover_every_option_on_every_template(
    tiny_run: tuple[dict[str, object], Path],
) -> None:
    from reportfarm_bench import finishing

    report, _ = tiny_run
    costs = report["finishing"]
    assert isinstance(costs, dict)
    templates = set(costs["print_ms"])
    assert {"achievement", "outlook", "invoice"} <= templates
    assert all(positive(ms) for ms in costs["print_ms"].values())
    options = costs["options"]
    assert set(options) == {*finishing.PRINT_OPTIONS, *finishing.OPTIONS}
    for name, row in options.items():
        measured = set(row["ms"])
        assert measured == ({"invoice"} if name == "facturx" else templates), name
        assert all(positive(ms) for ms in row["ms"].values()), name
        assert positive(row["median_ratio_to_print"]) and positive(row["median_size_ratio"])
