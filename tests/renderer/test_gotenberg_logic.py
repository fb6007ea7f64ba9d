"""``reportfarm bench gotenberg``'s pure parts: Gotenberg's form fields and flags, the ratios, process trees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reportfarm_bench import bench_gotenberg, footprint, versus
from reportfarm_bench import gotenberg as gotenberging
from rich.console import Console

from reportfarm import contract


def test_our_default_options_become_gotenbergs_a4_without_margins() -> None:
    fields = gotenberging.form(contract.PdfOptions())
    assert fields == {
        "landscape": "false",
        "printBackground": "true",
        "preferCssPageSize": "true",
        "scale": "1",
        "marginTop": "0",
        "marginRight": "0",
        "marginBottom": "0",
        "marginLeft": "0",
        "paperWidth": "8.27in",
        "paperHeight": "11.7in",
    }
    assert gotenberging.header_footer(contract.PdfOptions()) == {}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            contract.PdfOptions(width="210mm", height="99mm", format=None),
            {"paperWidth": "210mm", "paperHeight": "99mm"},
            id="explicit-size-keeps-its-units",
        ),
        pytest.param(
            contract.PdfOptions(format="Letter", landscape=True, scale=0.5),
            {"paperWidth": "8.5in", "paperHeight": "11in", "landscape": "true", "scale": "0.5"},
            id="letter-landscape",
        ),
        pytest.param(
            contract.PdfOptions(margin_top="1cm", print_background=False),
            {"marginTop": "1cm", "printBackground": "false"},
            id="margins-and-background",
        ),
    ],
)
def test_options_map_to_form_fields(options: contract.PdfOptions, expected: dict[str, str]) -> None:
    fields = gotenberging.form(options)
    assert {key: fields[key] for key in expected} == expected


def test_every_paper_format_of_the_contract_has_a_size() -> None:
    assert set(gotenberging.PAPER_INCHES) == set(contract.PAPER_FORMATS)


def test_header_and_footer_are_sent_as_files() -> None:
    options = contract.PdfOptions(
        display_header_footer=True, footer_template='<span class="pageNumber"></span>'
    )
    files = gotenberging.header_footer(options)
    assert set(files) == {"header.html", "footer.html"}
    assert '<span class="pageNumber"></span>' in files["footer.html"]


def test_the_configuration_matches_our_pool_and_never_rejects_the_benchmark() -> None:
    flags = gotenberging.flags(port=3000, concurrency=3, restart_after=100)
    assert "--chromium-max-concurrency=3" in flags
    assert "--chromium-restart-after=100" in flags
    assert "--chromium-max-queue-size=0" in flags
    assert "--chromium-auto-start" in flags


def test_flags_an_older_version_does_not_list_are_left_out() -> None:
    usage = """
      --api-port int                       Set the port (default 3000)
      --chromium-restart-after int         Number of conversions (default 10)
      --pdfengines-merge-engines strings   Set the PDF engines (default [qpdf])
    """
    wanted = gotenberging.flags(port=3000, concurrency=2, restart_after=100)
    assert gotenberging.known(wanted, usage) == [
        "--api-port=3000",
        "--chromium-restart-after=100",
        "--pdfengines-merge-engines=",
    ]


def _row(pdf_per_s: float, p50: float, peak: float | None) -> dict[str, object]:
    row = versus.side(pdf_per_s=pdf_per_s, p50_ms=p50, p95_ms=2 * p50, cores=2, peak_mib=peak)
    return {**row, "jobs": 4, "pdfs": 4, "valid_pdfs": 4, "load1": 1.0}


def test_ratios_are_ours_over_each_gotenberg_side_and_checked_against_the_issue() -> None:
    report = {
        "gotenberg": _row(2.0, 500, 400.0),
        "gotenberg_full": _row(1.0, 1000, 800.0),
        "reportfarm": _row(8.0, 125, 800.0),
        "end_to_end": _row(4.0, 250, 900.0),
    }
    assert report["gotenberg"]["pdf_per_s_per_core"] == 1.0
    assert report["gotenberg"]["mib_per_pdf_per_s"] == 200.0
    assert versus.gotenberg_sides(report) == ["gotenberg", "gotenberg_full"]
    ratios = versus.ratios(report)
    assert ratios["reportfarm_over_gotenberg_pdf_per_s"] == 4.0
    assert ratios["reportfarm_over_gotenberg_p50"] == 0.25
    assert ratios["reportfarm_over_gotenberg_peak_mib"] == 2.0
    assert ratios["end_to_end_over_gotenberg_pdf_per_s_per_core"] == 2.0
    assert ratios["end_to_end_over_gotenberg_mib_per_pdf_per_s"] == 1.12
    assert ratios["reportfarm_over_gotenberg_full_pdf_per_s"] == 8.0
    assert ratios["end_to_end_over_gotenberg_full_pdf_per_s_per_core"] == 4.0
    assert ratios["end_to_end_over_gotenberg_full_mib_per_pdf_per_s"] == 0.28
    targets = versus.targets(ratios, ["gotenberg", "gotenberg_full"])
    assert targets["end_to_end_over_gotenberg_pdf_per_s_per_core"] == {
        "target": ">= 2.5",
        "met": False,
    }
    assert targets["end_to_end_over_gotenberg_mib_per_pdf_per_s"]["met"] is False
    assert targets["end_to_end_over_gotenberg_full_pdf_per_s_per_core"]["met"] is True
    assert targets["end_to_end_over_gotenberg_full_mib_per_pdf_per_s"]["met"] is True


def test_unknown_memory_gives_no_ratio_rather_than_a_wrong_one() -> None:
    report = {
        "gotenberg": _row(2.0, 500, None),
        "reportfarm": _row(8.0, 125, 800.0),
        "end_to_end": _row(4.0, 250, 900.0),
    }
    ratios = versus.ratios(report)
    assert ratios["end_to_end_over_gotenberg_mib_per_pdf_per_s"] is None
    targets = versus.targets(ratios, ["gotenberg"])
    assert targets["end_to_end_over_gotenberg_mib_per_pdf_per_s"]["met"] is None


OURS, SHELL, FULL = "/opt/x/chromium-headless-shell", "/opt/x/shell", "/opt/y/chromium"


def test_by_default_gotenberg_gets_our_chromium_and_the_one_its_image_runs() -> None:
    chosen = gotenberging.choose(["same", "image"], ours=OURS, image=FULL)
    assert [(c.name, c.chromium, c.skipped) for c in chosen] == [
        ("gotenberg", OURS, None),
        ("gotenberg_full", FULL, None),
    ]
    assert "same binary as ours" in chosen[0].which
    assert "image" in chosen[1].which


def test_a_path_is_named_by_whose_chromium_it_is() -> None:
    chosen = gotenberging.choose([FULL, OURS, "/opt/z/chrome"], ours=OURS, image=FULL)
    assert [(c.name, c.chromium) for c in chosen] == [
        ("gotenberg_full", FULL),
        ("gotenberg", OURS),
        ("gotenberg_chrome", "/opt/z/chrome"),
    ]


def test_the_same_binary_twice_is_one_side() -> None:
    chosen = gotenberging.choose(["same", "image", OURS], ours=OURS, image=OURS)
    assert [c.name for c in chosen] == ["gotenberg"]
    assert "Gotenberg's image runs" in chosen[0].which


def test_without_debians_full_chromium_that_side_is_skipped_and_says_why() -> None:
    chosen = gotenberging.choose(["same", "image"], ours=OURS, image=None)
    assert [(c.name, c.chromium) for c in chosen] == [("gotenberg", OURS), ("gotenberg_full", None)]
    assert chosen[0].skipped is None
    assert chosen[1].skipped and "chromium" in chosen[1].skipped


def test_the_chromium_option_takes_words_and_paths() -> None:
    assert bench_gotenberg.chromium_words(None) == ["same", "image"]
    assert bench_gotenberg.chromium_words(" image, /usr/bin/x ,") == ["image", "/usr/bin/x"]


def test_why_gotenberg_exited_is_its_fatal_message() -> None:
    log = "banner\n[SYSTEM] modules: api chromium\n[FATAL] starting chromium: chrome failed\n; raise it\n"
    assert gotenberging.why(log) == "[FATAL] starting chromium: chrome failed ; raise it"
    assert gotenberging.why("no fatal here") == "no fatal here"


def _report(*, failed: bool) -> dict[str, Any]:
    report: dict[str, Any] = {
        "gotenberg": {
            **_row(2.0, 500, 400.0),
            "idle": {"cpu_s": 0.1, "wall_s": 10.0, "cores": 0.01},
        },
        "reportfarm": _row(8.0, 125, 800.0),
        "end_to_end": _row(4.0, 250, 900.0),
    }
    sides = {
        "gotenberg": {
            "chromium_path": OURS,
            "chromium": "Chromium 156",
            "which": "the same binary as ours",
            "status": "ran",
            "reason": None,
            "flags": ["--api-port=1", "--chromium-max-concurrency=2"],
            "unknown_to_this_version": [],
        },
        "gotenberg_full": {
            "chromium_path": FULL,
            "chromium": "Chromium 156",
            "which": "Debian's full chromium, as Gotenberg's image runs it",
            "status": "failed" if failed else "skipped",
            "reason": "chrome failed to start" if failed else "no chromium on PATH",
        },
    }
    report["sides"] = {"gotenberg": "Gotenberg", **versus.OURS}
    report["ratios"] = versus.ratios(report)
    report["targets"] = versus.targets(report["ratios"], ["gotenberg"])
    report["sameness"] = {
        "gotenberg": {
            "documents": 2,
            "same_pages": 2,
            "same_text": 2,
            "all_same": True,
            "pages": [[1, 1], [2, 2]],
            "differences": [],
        }
    }
    report["parameters"] = {
        "pool_size": 2,
        "jobs": 4,
        "rounds": [4],
        "cores": 2,
        "chromium": "Chromium 156",
        "chromium_path": OURS,
        "memory": "PSS",
        "load_before": [1.0],
        "load_after": [1.0],
        "gotenberg": {"version": "8.36.0", "how": "started here", "sides": sides},
    }
    return report


@pytest.mark.parametrize("failed", [True, False])
def test_a_side_that_did_not_run_is_shown_with_why(failed: bool) -> None:
    report = _report(failed=failed)
    console = Console(record=True, width=300)
    versus.show(report, console)
    text = console.export_text()
    reason = "chrome failed to start" if failed else "no chromium on PATH"
    assert ("failed:" if failed else "skipped:") in text and reason in text
    assert f"gotenberg_full's Chromium: {FULL}" in text
    assert "reportfarm / gotenberg " in text and "/ gotenberg_full" not in text
    # a failed side fails the run; one whose Chromium is not installed does not
    assert bench_gotenberg.passed(report) is not failed


def test_descendants_follow_the_whole_tree() -> None:
    tree = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert footprint.descendants(10, tree) == {10, 11, 12, 13}
    assert footprint.children(1, tree) == {10, 20}


def test_this_process_has_a_memory_footprint() -> None:
    tree = footprint.parents()
    assert tree[os.getpid()] == os.getppid()
    peak = footprint.Peak(lambda _tree: {os.getpid()})
    peak.sample()
    assert peak.peak_mib is not None and peak.peak_mib > 1
    if footprint.file_pages({os.getpid()}) is not None:
        assert peak.alone_peak_mib is not None and peak.alone_peak_mib > 1


MAPPER = """
import mmap, sys, time
with open(sys.argv[1], "rb") as f:
    view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    total = sum(view[i] for i in range(0, len(view), 4096))  # every page, in the page table
    print(total, flush=True)
    time.sleep(60)
"""


def test_memory_as_if_alone_ignores_who_else_maps_the_same_file(tmp_path: Path) -> None:
    """PSS halves a shared file's pages when a second process maps them; as if alone it does
    not move (the two sides running one Chromium binary)."""
    if footprint.file_pages({os.getpid()}) is None:
        pytest.skip("page frame numbers are hidden here (no CAP_SYS_ADMIN)")
    data = tmp_path / "shared.bin"
    data.write_bytes(os.urandom(32 * 1024 * 1024))

    def mapper() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-c", MAPPER, str(data)], stdout=subprocess.PIPE
        )
        assert process.stdout is not None and process.stdout.readline()  # mapped and read
        return process

    first = mapper()
    try:
        pss_alone, as_if_alone = footprint.rollup(first.pid)[0], footprint.alone({first.pid})
        second = mapper()
        try:
            pss_shared, still = footprint.rollup(first.pid)[0], footprint.alone({first.pid})
        finally:
            second.kill()
            second.wait()
    finally:
        first.kill()
        first.wait()
    mib = 1024 * 1024
    assert as_if_alone is not None and still is not None
    assert pss_alone - pss_shared > 12 * mib  # half of the 32 MiB file went to the other one
    assert abs(still - as_if_alone) < 4 * mib
    assert as_if_alone > 32 * mib
