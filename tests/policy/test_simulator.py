"""The simulator: invariants of both strategies, the baseline's mechanics, the CLI's outputs."""

from __future__ import annotations

import json
import pathlib
import random
from typing import Any

import pytest

from reportfarm.simulate import baseline, cli, farm, metrics, running, traces, workload


@pytest.fixture(scope="module")
def burst_runs() -> dict[str, running.Run]:
    trace = traces.load("burst")
    return {run.strategy: run for run in running.compare(trace, scenario=running.Scenario())}


@pytest.mark.parametrize("strategy", ["reportfarm", "keda_hpa"])
def test_every_job_completes(burst_runs: dict[str, running.Run], strategy: str) -> None:
    run = burst_runs[strategy]
    assert all(job.start is not None for job in run.jobs)
    assert all(job.start >= job.arrival for job in run.jobs if job.start is not None)
    assert not run.farm.queue
    assert metrics.summarize(run)["jobs_completed"] == traces.load("burst").jobs


def test_our_strategy_never_interrupts_a_job(burst_runs: dict[str, running.Run]) -> None:
    run = burst_runs["reportfarm"]
    assert run.farm.interrupted == 0
    assert all(job.interruptions == 0 for job in run.jobs)


def test_the_baseline_interrupts_jobs_on_the_burst_trace(
    burst_runs: dict[str, running.Run],
) -> None:
    run = burst_runs["keda_hpa"]
    assert run.farm.interrupted > 0
    assert sum(job.interruptions for job in run.jobs) == run.farm.interrupted


@pytest.mark.parametrize("strategy", ["reportfarm", "keda_hpa"])
def test_replicas_stay_within_the_limits(burst_runs: dict[str, running.Run], strategy: str) -> None:
    run = burst_runs[strategy]
    assert max(run.replicas) <= 20
    assert max(run.browsers) <= 20 * 4
    assert run.replicas[-1] == 0  # both end at zero once idle


@pytest.mark.parametrize("name", ["burst", "month-end"])
def test_the_issue_target_holds(name: str) -> None:
    """Done-when of the issue, on the default seed: p95 <= baseline, >= 30 % cheaper, 0 lost."""
    trace = traces.load(name)
    runs = running.compare(trace, scenario=running.Scenario())
    ours, base = (metrics.summarize(run) for run in runs)
    assert ours["p95_wait_s"] <= base["p95_wait_s"]
    assert ours["pod_seconds"] <= 0.7 * base["pod_seconds"]
    assert ours["interrupted_jobs"] == 0


def make_farm(pods: int, *, queued: int) -> farm.Farm:
    cluster = farm.Farm(timings=farm.Timings(), browsers_per_pod=4, rng=random.Random(0))
    cluster.add_pods(pods, now=-100.0)
    for i in range(queued):  # already visible, in order: a valid heap
        job = workload.Job(arrival=-1.0, render_s=1000.0)
        cluster.queue.append((job.visible_at, i, job))
    return cluster


def running_job(cluster: farm.Farm) -> workload.Job:
    (job,) = [slot.job for pod in cluster.pods for slot in pod.slots if slot.job is not None]
    return job


def test_hpa_scale_up_is_limited_to_double_or_four_pods_per_period() -> None:
    cluster = make_farm(1, queued=1000)
    hpa = baseline.KedaHpaController(
        settings=baseline.KedaHpaSettings(queue_length=4), rng=random.Random(0)
    )
    seen = []
    for t in range(0, 60, 15):
        hpa.tick(float(t), cluster)
        seen.append(cluster.replicas)
    assert seen == [5, 10, 20, 20]


def test_hpa_holds_the_highest_recommendation_for_the_window() -> None:
    cluster = make_farm(10, queued=40)  # 40 messages / queueLength 4 -> 10 pods
    settings = baseline.KedaHpaSettings(queue_length=4, cooldown_s=10_000)  # no 1 -> 0 here
    hpa = baseline.KedaHpaController(settings=settings, rng=random.Random(0))
    hpa.tick(0.0, cluster)
    cluster.queue.clear()  # the queue empties: the recommendation drops to the minimum
    for t in range(15, 300, 15):
        hpa.tick(float(t), cluster)
        assert cluster.replicas == 10, t
    hpa.tick(300.0, cluster)
    assert cluster.replicas == 1


def test_hpa_ignores_changes_within_the_tolerance() -> None:
    cluster = make_farm(10, queued=43)  # ratio 43 / 40 = 1.075: within 0.1
    hpa = baseline.KedaHpaController(
        settings=baseline.KedaHpaSettings(queue_length=4), rng=random.Random(0)
    )
    hpa.tick(0.0, cluster)
    assert cluster.replicas == 10


def test_killing_a_busy_pod_returns_its_job_after_the_visibility_timeout() -> None:
    cluster = make_farm(1, queued=1)
    cluster.step(0.0, arrivals=[])
    job = running_job(cluster)
    assert job.start == 0.0
    cluster.kill([cluster.pods[0].name], now=5.0)
    assert cluster.interrupted == 1
    assert job.start is None and job.visible_at == 35.0
    assert cluster.approximate_count(6.0) == 1  # invisible, still counted


def test_draining_a_busy_pod_lets_its_job_finish() -> None:
    cluster = make_farm(1, queued=1)
    cluster.step(0.0, arrivals=[])
    cluster.drain([cluster.pods[0].name], now=5.0)
    assert cluster.interrupted == 0
    assert cluster.replicas == 0 and len(cluster.pods) == 1  # still finishing its render
    cluster.step(1000.0, arrivals=[])
    assert not cluster.pods
    assert cluster.pod_seconds == pytest.approx(1100.0)


def test_reversals_count_direction_changes() -> None:
    assert metrics.reversals([(0, 0, 1), (1, 1, 5), (2, 5, 2), (3, 2, 4), (4, 4, 0)]) == 3


def test_percentile_interpolates() -> None:
    assert metrics.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert metrics.percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    assert metrics.percentile([], 95) == 0.0


def test_csv_trace(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("# a comment\nt_s,arrivals\n3,5\n0,2\n3,1\n")
    trace = traces.load(str(path))
    assert trace.arrivals == (2, 0, 0, 6)
    assert trace.name == "mine"


def test_csv_trace_needs_its_header(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("second,count\n0,1\n")
    with pytest.raises(ValueError, match="t_s,arrivals"):
        traces.load(str(path))


def test_builtin_traces_are_reproducible() -> None:
    for name in traces.BUILTIN:
        assert traces.load(name, seed=3) == traces.load(name, seed=3)
    assert traces.load("burst", seed=1) != traces.load("burst", seed=2)


def test_cli_json_shape(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    path = tmp_path / "small.csv"
    path.write_text("t_s,arrivals\n" + "".join(f"{t},{3 if t % 60 else 200}\n" for t in range(300)))
    assert cli.main(["--trace", str(path), "--json", "--seed", "1"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    for strategy in ("reportfarm", "keda_hpa"):
        summary = document[strategy]
        for key in ("p95_wait_s", "pod_seconds", "interrupted_jobs", "reversals"):
            assert isinstance(summary[key], int | float), key
        assert summary["jobs_completed"] == document["trace"]["jobs"]
    assert document["parameters"]["pod"]["browsers_that_fit"] == 4
    assert set(document["comparison"]) >= {"pod_seconds_saved", "p95_wait_ratio", "target_met"}


def test_cli_table_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text("t_s,arrivals\n0,50\n30,5\n")
    plot = tmp_path / "out" / "plot.png"
    assert cli.main(["--trace", str(trace), "--plot", str(plot)]) == 0
    assert "p95 queue wait" in capsys.readouterr().out
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_cli_rejects_an_unknown_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--trace", "nope"]) == 2
    assert "unknown trace" in capsys.readouterr().err
