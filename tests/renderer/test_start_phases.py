"""A renderer's start, phase by phase (``reportfarm_renderer.starting``): ``reportfarm worker`` as a
process, with a job waiting before it starts, logs each phase once, in order, and its first PDF
stored; the pool's first browser prints while the others launch."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from reportfarm_renderer import cpus as cgroup
from reportfarm_renderer import launching, starting

from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from tests.renderer.conftest import WorkerProcess, job_result_ok

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


def _phases(log: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("message") == starting.LOG_MESSAGE]


@pytest.mark.parametrize("cpus", [1, 2])
async def test_a_worker_logs_its_start_phase_by_phase_up_to_its_first_pdf(
    cpus: int,
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    worker_process: type[WorkerProcess],
    tmp_path: Path,
) -> None:
    """On one CPU the renderer imports, then launches; on two (and no quota below that) its first
    browser launches while the rest imports (``reportfarm_renderer.launching``)."""
    if len(os.sched_getaffinity(0)) < cpus:
        pytest.skip(f"needs {cpus} CPUs")
    job_id = await client.submit(Submission(template="plain", data={"name": "start"}))
    log = tmp_path / "worker.log"
    before = time.time()
    affinity = set(sorted(os.sched_getaffinity(0))[:cpus])
    worker = worker_process(storage, template_dir, log, affinity=affinity, REPORTFARM_POOL_SIZE="2")
    results = await client.wait([job_id], timeout_s=120, poll_s=0.2)
    assert job_result_ok(results[job_id])
    # The result record is written before the worker logs the job done: wait for that line.
    deadline = time.monotonic() + 30
    while "first_stored" not in [p["phase"] for p in _phases(log)]:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        await asyncio.sleep(0.05)
    after = time.time()
    worker.stop()

    phases = _phases(log)
    names = [str(p["phase"]) for p in phases]
    # Not in a container (the test's process is not PID 1's child): no container_started.
    assert "container_started" not in names
    assert sorted(names) == sorted(set(starting.PHASES) - {"container_started"}), names
    at = {str(p["phase"]): float(p["at"]) for p in phases}  # type: ignore[arg-type]
    since = {str(p["phase"]): float(p["since_start_s"]) for p in phases}  # type: ignore[arg-type]
    # The process started after the test launched it (to the kernel's 10 ms tick) and every
    # phase lies between that and the job's result.
    assert before - 0.05 <= at["process_started"] <= at["imported"], at
    assert max(at.values()) <= after, at
    assert since["process_started"] == 0.0
    order = ["process_started", "imported", "browser_ready", "ready", "first_receive",
             "first_stored"]  # fmt: skip
    assert [at[p] for p in order] == sorted(at[p] for p in order), at
    # The first browser printed while the second launched: the pool said so when it started.
    lines = log.read_text()
    assert "first browser ready, 1 more launching" in lines
    overlapped = "the first browser launches while the renderer imports" in lines
    in_turn = "the renderer imports, then its first browser launches" in lines
    # The worker's CPUs: those it may run on, bounded by a quota (a CI runner's container).
    theirs = min(cpus, cgroup.quota() or cpus)
    expected = theirs >= launching.OVERLAP_CPUS
    assert (overlapped, in_turn) == (expected, not expected)


def test_a_process_start_comes_from_the_kernel_not_from_the_clock_now() -> None:
    ours = starting.started_at()
    assert ours is not None
    # This test process started before now, and not before the machine booted.
    assert ours < time.time()
    assert time.time() - ours < time.clock_gettime(time.CLOCK_BOOTTIME) + 1
    assert starting.started_at(os.getpid()) == pytest.approx(ours, abs=0.02)
    assert starting.started_at(2**22 + 7) is None  # no such process


def test_a_phase_counts_once() -> None:
    timeline = starting.Timeline(process_started=100.0)
    timeline.mark("ready", at=101.5)
    timeline.mark("ready", at=109.0)
    timeline.mark("first_receive", at=102.25)
    assert timeline.since_start() == {"ready": 1.5, "first_receive": 2.25}


def test_a_containers_cpu_is_read_from_its_cgroup_v2_or_v1(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
    assert cgroup.used_s(v2) == pytest.approx(1.234567)
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "cpuacct.usage").write_text("2500000000\n")
    assert cgroup.used_s(v1) == pytest.approx(2.5)
    # cgroup v1 with the cpu and cpuacct controllers mounted apart: the accounting is cpuacct's.
    split = tmp_path / "v1-split"
    (split / "cpu").mkdir(parents=True)
    (split / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (split / "cpuacct").mkdir()
    (split / "cpuacct" / "cpuacct.usage").write_text("750000000\n")
    assert cgroup.used_s(split) == pytest.approx(0.75)
    # A cgroup v2 without CPU accounting (no usage line), or nothing mounted: unknown, not 0.
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "cpu.stat").write_text("nr_periods 0\n")
    assert cgroup.used_s(tmp_path / "bare") is None
    assert cgroup.used_s(tmp_path / "nothing") is None


def test_a_phase_marked_now_carries_the_containers_cpu_and_one_from_the_past_does_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    readings = iter([0.75, 1.5])
    timeline = starting.Timeline(process_started=time.time(), cpu=lambda: next(readings))
    with caplog.at_level("INFO", logger=starting.__name__):
        timeline.mark("container_started", at=timeline.process_started - 0.4)
        timeline.mark("imported")
        timeline.mark("browser_ready")
    lines = {r.phase: r.__dict__ for r in caplog.records}  # type: ignore[attr-defined]
    assert "cpu_s" not in lines["container_started"]
    assert [lines["imported"]["cpu_s"], lines["browser_ready"]["cpu_s"]] == [0.75, 1.5]
    # Outside a container nothing reads it, and the lines say nothing about CPU.
    caplog.clear()
    with caplog.at_level("INFO", logger=starting.__name__):
        starting.Timeline.from_now().mark("ready")
    assert "cpu_s" not in caplog.records[0].__dict__
