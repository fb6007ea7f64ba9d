"""``reportfarm bench pod`` in a tiny run: the ceiling and the real renderer process print on the
pod's CPUs only, the client and Azurite on the others, and both sides report their CPU by
process. No timing is asserted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reportfarm_bench import end_to_end, pod

TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to split")


def positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@TWO_CPUS
@pytest.mark.chromium
@pytest.mark.azurite
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_run_prints_both_sides_on_the_pods_cpus_only(tmp_path: Path) -> None:
    plot = tmp_path / "pod.png"
    command = [
        *(sys.executable, "-m", "reportfarm.cli", "bench", "pod", "--json", "--jobs", "6"),
        *("--pod-cpus", "1", "--plot", str(plot)),
    ]
    done = subprocess.run(command, capture_output=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    report = json.loads(done.stdout)
    params = report["parameters"]
    allowed = sorted(os.sched_getaffinity(0))
    assert params["pod_cpus"] == allowed[-1:] and params["other_cpus"] == allowed[:-1]
    assert params["processes_off_the_pod"] == []
    for side in ("ceiling", "end_to_end"):
        row = report[side]
        assert row["jobs"] == 6 and row["valid_pdfs"] == row["pdfs"] >= 6, row
        assert positive(row["pdf_per_s"]), row
        # both trees were found and measured: Chromium, the Playwright driver and Python
        for component in ("chromium", "driver", "python"):
            assert positive(row["cpu_ms_per_pdf"][component]), (side, row["cpu_ms_per_pdf"])
    outside = report["end_to_end"]["outside_cpu_ms_per_pdf"]
    assert positive(outside["client"]) and positive(outside["azurite"]), outside
    assert set(report["end_to_end"]["stages_p50_ms"]) >= {"render_html", "storage_upload"}
    ratio = report["ratios"]["end_to_end_over_ceiling"]
    assert positive(ratio)
    assert report["targets"]["end_to_end_over_ceiling"]["met"] is (ratio >= 0.95)
    assert plot.stat().st_size > 10_000


def test_the_pod_takes_the_last_cpus_and_leaves_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3})
    assert pod.split_cpus(None) == ([2, 3], [0, 1])
    assert pod.split_cpus(1) == ([3], [0, 1, 2])
    assert pod.split_cpus(3) == ([1, 2, 3], [0])
    for wrong in (0, 4):
        with pytest.raises(ValueError, match="--pod-cpus must be 1 to 3"):
            pod.split_cpus(wrong)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {5})
    with pytest.raises(ValueError, match="at least 2 CPUs"):
        pod.split_cpus(None)


def test_a_pinned_command_runs_its_module_on_those_cpus_only() -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    command = pod.pinned([cpu], "reportfarm_bench.pod", "affinity")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [cpu]


def test_bad_options_are_refused_before_anything_starts() -> None:
    command = [sys.executable, "-m", "reportfarm.cli", "bench", "pod", "--pod-cpus", "99"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--pod-cpus must be 1 to" in done.stderr or "at least 2 CPUs" in done.stderr


def test_the_renderer_process_keeps_no_local_setting_but_the_chromium_binary() -> None:
    local = {
        "PATH": "/usr/bin",
        "REPORTFARM_RECYCLE_AFTER_JOBS": "1",  # left in a shell: would skew the figures
        "REPORTFARM_POOL_SIZE": "9",
        "REPORTFARM_CHROMIUM_PATH": "/opt/chromium",
        "AZURE_STORAGE_ACCOUNT_URL": "https://someone.blob.core.windows.net",
    }
    env = end_to_end.worker_environment(
        "UseDevelopmentStorage=true", pool_size=2, port=1234, base=local
    )
    assert env["PATH"] == "/usr/bin" and env["REPORTFARM_CHROMIUM_PATH"] == "/opt/chromium"
    assert "REPORTFARM_RECYCLE_AFTER_JOBS" not in env and "AZURE_STORAGE_ACCOUNT_URL" not in env
    assert env["REPORTFARM_POOL_SIZE"] == "2" and env["REPORTFARM_PORT"] == "1234"
    assert env["AZURE_STORAGE_CONNECTION_STRING"] == "UseDevelopmentStorage=true"
