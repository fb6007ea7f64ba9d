"""bench-gotenberg's pure parts: Gotenberg's form fields and flags, the ratios, process trees."""

from __future__ import annotations

import os

import pytest
from reportfarm_renderer.benchmarking import footprint, versus
from reportfarm_renderer.benchmarking import gotenberg as gotenberging

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
    return versus.side(pdf_per_s=pdf_per_s, p50_ms=p50, p95_ms=2 * p50, cores=2, peak_mib=peak)


def test_ratios_are_ours_over_gotenbergs_and_checked_against_the_issue() -> None:
    report = {
        "gotenberg": _row(2.0, 500, 400.0),
        "reportfarm": _row(8.0, 125, 800.0),
        "end_to_end": _row(4.0, 250, 900.0),
    }
    assert report["gotenberg"]["pdf_per_s_per_core"] == 1.0
    assert report["gotenberg"]["mib_per_pdf_per_s"] == 200.0
    ratios = versus.ratios(report)
    assert ratios["reportfarm_over_gotenberg_pdf_per_s"] == 4.0
    assert ratios["reportfarm_over_gotenberg_p50"] == 0.25
    assert ratios["reportfarm_over_gotenberg_peak_mib"] == 2.0
    assert ratios["end_to_end_over_gotenberg_pdf_per_s_per_core"] == 2.0
    assert ratios["end_to_end_over_gotenberg_mib_per_pdf_per_s"] == 1.12
    targets = versus.targets(ratios)
    assert targets["end_to_end_over_gotenberg_pdf_per_s_per_core"] == {
        "target": ">= 2.5",
        "met": False,
    }
    assert targets["end_to_end_over_gotenberg_mib_per_pdf_per_s"]["met"] is False


def test_unknown_memory_gives_no_ratio_rather_than_a_wrong_one() -> None:
    report = {
        "gotenberg": _row(2.0, 500, None),
        "reportfarm": _row(8.0, 125, 800.0),
        "end_to_end": _row(4.0, 250, 900.0),
    }
    ratios = versus.ratios(report)
    assert ratios["end_to_end_over_gotenberg_mib_per_pdf_per_s"] is None
    assert versus.targets(ratios)["end_to_end_over_gotenberg_mib_per_pdf_per_s"]["met"] is None


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
