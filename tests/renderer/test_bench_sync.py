"""``reportfarm bench sync``'s arithmetic: ratios against Gotenberg, the targets' verdicts, the
idle farm's request counting from Azurite's debug log, and a process tree's CPU that never goes
back. Cheap (seconds): the benchmark itself starts Azurite, a renderer, a gateway and Gotenberg
(a minute or more here before its first chunk), so it is a command
(README, "The synchronous path"), not a test; the hints it measures are tested for real in
tests/gateway/test_sync_hints.py."""

from __future__ import annotations

import collections
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from reportfarm_bench import (
    bench_sync,
    footprint,
    idling,
    measuring,
    sync_reporting,
    sync_sweep,
    synchronous,
)
from rich.console import Console


def _run(name: str, latencies: list[float], wall_s: float) -> measuring.Run:
    run = measuring.Run(name, latencies_s=latencies, wall_s=wall_s)
    run.valid = len(latencies)
    return run


def _report(ours_s: float, theirs_s: float, *, lone: list[float]) -> dict[str, object]:
    runs = {
        c: {
            "gateway": _run("gateway", [ours_s] * 10, ours_s * 10 / c),
            "gotenberg": _run("gotenberg", [theirs_s] * 10, theirs_s * 10 / c),
        }
        for c in (1, 2, 8)
    }
    cpu_s = {c: {"gateway": 1.0, "gotenberg": 2.0} for c in runs}
    peaks: dict[int, dict[str, object]] = {c: {} for c in runs}
    for c in runs:
        for name, mib in (("gateway", 300), ("gotenberg", 150)):
            peaks[c][name] = _Peak(mib)
    return sync_reporting.build(
        runs=runs,
        cpu_s=cpu_s,
        peaks=peaks,  # type: ignore[arg-type]
        print_upload=lone,
        parameters={},
    )


class _Peak:
    """A stand-in for footprint.Peak: only its peaks are read."""

    def __init__(self, mib: float, alone: float | None = None) -> None:
        self.peak_mib = mib
        self.alone_peak_mib = alone


def test_memory_is_each_side_as_if_alone_where_page_frames_are_readable() -> None:
    """PSS splits the shared Chromium binary's pages between both sides' browsers: the verdict
    reads each tree as if alone, PSS where that cannot be read."""
    report = _report(0.1, 0.2, lone=[0.09] * 10)
    row = report["by_concurrency"]["2"]["gateway"]  # type: ignore[index]
    assert row["peak_mib"] == row["peak_pss_mib"] == 300  # no alone figure: PSS
    runs = {
        2: {
            "gateway": _run("gateway", [0.1] * 10, 0.5),
            "gotenberg": _run("gotenberg", [0.2] * 10, 1.0),
        }
    }
    peaks = {2: {"gateway": _Peak(300, alone=330), "gotenberg": _Peak(150, alone=220)}}
    report = sync_reporting.build(
        runs=runs,
        cpu_s={2: {"gateway": 1.0, "gotenberg": 1.0}},
        peaks=peaks,  # type: ignore[arg-type]
        print_upload=[],
        parameters={},
    )
    rows = report["by_concurrency"]["2"]  # type: ignore[index]
    assert (rows["gateway"]["peak_mib"], rows["gotenberg"]["peak_mib"]) == (330, 220)
    assert report["ratios"]["2"]["gateway/mib_per_pdf_per_s"] == 0.75  # type: ignore[index]


def test_our_side_counts_the_pods_not_the_storage_emulator() -> None:
    parts = {"gateway": 10, "renderer": 11, "azurite": 12}
    assert bench_sync.pod(parts) == {"gateway": 10, "renderer": 11}


def test_twice_as_fast_at_twice_the_memory_meets_the_rate_and_misses_nothing_else() -> None:
    report = _report(0.1, 0.2, lone=[0.09] * 10)
    ratios = report["ratios"]["2"]  # type: ignore[index]
    assert ratios["gateway/pdf_per_s"] == 2.0
    assert ratios["gateway/p50_ms"] == 0.5
    assert ratios["gateway/cpu_ms_per_pdf"] == 0.5
    assert ratios["gateway/mib_per_pdf_per_s"] == 1.0  # 2x the memory, 2x the PDFs/s
    assert report["lone"]["ratio"] == pytest.approx(1.11, abs=0.01)  # type: ignore[index]
    assert sync_reporting.verdicts(report) == {  # type: ignore[arg-type]
        "pdf_per_s_at_2": True,
        "pdf_per_s_at_8": True,
        "p50_at_most": True,
        "mib_per_pdf_per_s_at_most": True,
        "lone_vs_print_and_upload_at_most": True,
    }


def test_as_fast_as_gotenberg_misses_every_ratio_target() -> None:
    report = _report(0.2, 0.2, lone=[0.1] * 10)
    verdicts = sync_reporting.verdicts(report)  # type: ignore[arg-type]
    assert verdicts["pdf_per_s_at_2"] is False and verdicts["pdf_per_s_at_8"] is False
    assert verdicts["p50_at_most"] is False
    assert verdicts["mib_per_pdf_per_s_at_most"] is False  # 2x the memory at the same rate
    assert verdicts["lone_vs_print_and_upload_at_most"] is False  # 2x its print + upload


def test_a_target_not_measured_is_neither_met_nor_missed() -> None:
    report = _report(0.1, 0.2, lone=[])
    assert sync_reporting.verdicts(report)["lone_vs_print_and_upload_at_most"] is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("service", "method", "url", "kind"),
    [
        pytest.param(
            "Queue",
            "GET",
            "http://127.0.0.1/devstoreaccount1/bench-interactive/messages?numofmessages=3",
            "queue GET interactive messages",
            id="receive",
        ),
        pytest.param(
            "Queue",
            "GET",
            "http://127.0.0.1/devstoreaccount1/bench-interactive?comp=metadata",
            "queue GET interactive metadata",
            id="depth",
        ),
        pytest.param(
            "Blob",
            "PUT",
            "http://127.0.0.1/devstoreaccount1/bench/results/job-1.json",
            "blob PUT (farm) results",
            id="record",
        ),
    ],
)
def test_requests_are_counted_by_kind(service: str, method: str, url: str, kind: str) -> None:
    assert idling.kind(service, method, url) == kind


def test_only_requests_past_the_start_are_counted(tmp_path: Path) -> None:
    line = (
        "2026-12-04T16:06:22.299Z id info: QueueStorageContextMiddleware: RequestMethod=GET "
        "RequestURL=http://127.0.0.1/devstoreaccount1/bench-bulk/messages?x=1 RequestHeaders:{}\n"
    )
    log = tmp_path / "debug.log"
    log.write_text(line * 3)
    start = log.stat().st_size
    with log.open("a") as more:
        more.write("2026-12-04T16:06:23Z info: BlobGCManager:markSweep() Got 0 extents.\n")
        more.write(line * 2)
    assert idling.count(log, start=start) == {"queue GET bulk messages": 2}


def test_a_trees_cpu_keeps_what_an_exited_process_spent() -> None:
    """Summing a tree's CPU went negative when a process exited between samples: TreeCpu keeps
    each process at the most it was seen with."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; sum(range(3 * 10**7)); time.sleep(30)"]
    )
    tree = synchronous.TreeCpu({"me": os.getpid()})
    try:
        before = tree.total_s()
        deadline = time.monotonic() + 30
        while tree.seen.get(child.pid, 0.0) < 0.05 and time.monotonic() < deadline:
            time.sleep(0.1)
            tree.total_s()
        spent = tree.seen.get(child.pid, 0.0)
        assert spent >= 0.05  # the child's burst was seen
    finally:
        child.kill()
        child.wait()
    after = tree.total_s()  # the child is gone from /proc now
    assert child.pid not in footprint.descendants(os.getpid(), footprint.parents())
    assert after - before >= spent - 1e-6  # CPU clock ticks of 0.01 s: equal is possible


def test_our_storage_requests_a_pdf_count_each_chunk_and_its_receives(tmp_path: Path) -> None:
    def line(method: str, path: str) -> str:
        return (
            f"2026-12-05T03:00:00Z id info: QueueStorageContextMiddleware: RequestMethod={method} "
            f"RequestURL=http://127.0.0.1/devstoreaccount1/{path} RequestHeaders:{{}}\n"
        )

    requests = bench_sync._Requests(tmp_path, sides=["gateway"])
    log = tmp_path / "gateway" / "azurite-debug.log"
    log.parent.mkdir()
    log.write_text(line("GET", "bench-interactive/messages?numofmessages=3") * 7)  # before
    start = requests.mark("gateway")
    with log.open("a") as chunk:  # two PDFs: three receives, two deletes
        chunk.write(line("GET", "bench-interactive/messages?numofmessages=3") * 2)
        chunk.write(line("GET", "bench/messages?numofmessages=1"))
        chunk.write(line("DELETE", "bench-interactive/messages/m1?popreceipt=x") * 2)
    requests.add(2, "gateway", start=start)
    requests.add(2, "gotenberg", start=0)  # not ours: nothing counted
    assert requests.mark("gotenberg") == 0
    runs = {2: {"gateway": _run("gateway", [0.1, 0.1], 0.2)}}
    report: dict[str, Any] = {"by_concurrency": {"2": {"gateway": {}}}}
    requests.report(report, runs)
    counted = report["by_concurrency"]["2"]["gateway"]["storage_requests_per_pdf"]
    assert (counted["all"], counted["receives"]) == (2.5, 1.5)
    assert counted["queue GET interactive messages"] == 1.0
    assert bench_sync.requests_per_pdf(collections.Counter({"x": 3}), pdfs=0) is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"gotenberg_concurrency": [2, 7]},
            "Gotenberg takes --chromium-max-concurrency 1 to 6, not 7",
        ),
        ({"gotenberg_concurrency": [0]}, "--gotenberg-concurrency and each concurrency >= 1"),
        ({"pages_per_browser": 0}, "--pages-per-browser"),
        ({"gotenberg_concurrency": [2, 4], "idle_s": 60.0}, "--idle-s counts an idle farm once"),
    ],
)
def test_a_size_nobody_can_run_is_refused_before_anything_starts(
    given: dict[str, Any], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gotenberg refuses a concurrency over 6 only once started; the benchmark says so first."""
    code = bench_sync.main(as_json=True, gotenberg_bin=tmp_path / "gotenberg", **given)
    assert code == 2
    assert says in capsys.readouterr().err


def _swept(value: int, ours_s: float, theirs_s: float) -> dict[str, Any]:
    report: dict[str, Any] = _report(ours_s, theirs_s, lone=[0.09] * 10)
    report["parameters"]["gotenberg_concurrency"] = value
    return report


def test_a_sweep_holds_the_targets_against_gotenbergs_best_value() -> None:
    """Twice Gotenberg's PDFs/s at its default concurrency is not twice its best: given 4 lanes
    it serves 0.15 s a request where 2 lanes serve 0.2 s, and the sweep's verdict follows it."""
    reports = [_swept(2, 0.1, 0.2), _swept(4, 0.1, 0.15), _swept(4, 0.1, 0.16), _swept(2, 0.1, 0.2)]
    assert sync_reporting.verdicts(reports[0])["pdf_per_s_at_8"] is True
    sweep = sync_sweep.summarize(reports)
    assert sweep["best"] == {"1": 4, "2": 4, "8": 4}
    cell = sweep["by_concurrency"]["8"]["4"]
    assert cell["runs"] == 2
    assert cell["pdf_per_s"]["min"] == pytest.approx(1.5)
    assert cell["pdf_per_s"]["max"] == pytest.approx(1.6)
    assert sweep["by_concurrency"]["8"]["2"]["pdf_per_s"]["median"] == pytest.approx(2.0)
    assert sweep["verdicts"]["pdf_per_s_at_8"] is False  # 1.55x its best
    assert sweep["verdicts"]["pdf_per_s_at_2"] is True  # 1.5x at least
    assert len(sweep["points"]) == 4 * 3


def test_a_sweep_runs_each_value_in_order_and_shows_plots_and_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[int] = []

    def measure(value: int) -> dict[str, Any]:
        asked.append(value)
        return _swept(value, 0.1, {1: 0.4, 2: 0.2, 4: 0.18}[value])

    console = Console(record=True, width=200, file=io.StringIO())
    plot = tmp_path / "sweep.png"
    code = sync_sweep.main(measure, [1, 2, 4, 2], console=console, as_json=True, plot_path=plot)
    assert asked == [1, 2, 4, 2]
    assert code == 1  # 1.8x at 8 against its best (4), under 2x
    shown = console.export_text()
    assert "2.00* (" not in shown and "1.80*" in shown and "MISSED" in shown
    assert plot.stat().st_size > 10_000
    printed = json.loads(capsys.readouterr().out)
    assert printed["sweep"]["best"]["8"] == 4 and len(printed["runs"]) == 4


def test_a_sweep_holds_the_lone_request_and_skips_a_value_that_printed_nothing() -> None:
    """The lone request does not involve Gotenberg: its target is the median over all runs. A
    value whose runs measured no PDFs/s ratio (a side printed nothing) cannot be the best."""
    slow = _swept(2, 0.1, 0.2)
    slow["lone"]["ratio"] = 1.4
    fast = [_swept(3, 0.1, 0.15), _swept(3, 0.1, 0.15)]
    empty = _swept(6, 0.1, 0.2)
    for report in (*fast, empty):
        report["lone"]["ratio"] = 1.1
    for ratios in empty["ratios"].values():
        ratios["gateway/pdf_per_s"] = None
    sweep = sync_sweep.summarize([slow, *fast, empty])
    assert sweep["best"] == {"1": 3, "2": 3, "8": 3}
    assert sweep["lone_ratio"] == pytest.approx(1.1)
    assert sweep["verdicts"]["lone_vs_print_and_upload_at_most"] is True
    assert set(sweep["verdicts"]) == set(sync_reporting.TARGETS)
    assert sync_sweep.summarize([empty])["best"] == {}
    slow["lone"]["ratio"] = fast[0]["lone"]["ratio"] = 1.5
    verdicts = sync_sweep.summarize([slow, *fast])["verdicts"]
    assert verdicts["lone_vs_print_and_upload_at_most"] is False
