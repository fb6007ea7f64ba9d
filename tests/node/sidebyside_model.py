"""The simulator beside the real node: the side by side's traces through ``reportfarm.simulate``
with the node's measured pod start and render times, for both sides, next to the real figures.

``python -m tests.node.sidebyside_model [RUNS.json]`` reads what ``scripts/bench_keda.sh`` stored
(``out/keda/runs.json``), runs the model for every (trace, side) measured there and prints a
markdown table: real (mean over runs) vs model (mean over loop-phase draws) p95 / p99
submit-to-stored, pod-seconds from Ready, and the model's gap in %.

What is matched to the real run: the same arrivals (``sidebyside.traces``, whole seconds), the
same ReportPool read by the operator's own ``specs.pool_spec`` (1..4 pods, 1..2 browsers, the
same target wait, scale-down window and idle time), KEDA's ScaledObject as ``sidebyside`` writes
it (queueLength 2, polling 5 s, +4 pods per 15 s, the window and cooldown), the pods Ready at
second 0, the observation window (trace + tail), the pod start measured on the node (creation to
first render, else to Ready: each run's own) and the time a job holds its slot, measured in the
records' stages (a lognormal through the median and p90 of the stages, the PDF's upload taken
out: the renderer takes its next job while a PDF stores). The model's wait is arrival to render
start; the node's is submit to stored, so the model's figure here is start + slot time + upload
- arrival.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reportfarm_operator import specs

from reportfarm.quantiles import quantile
from reportfarm.simulate import baseline, farm, running, traces, workload
from tests.node import sidebyside

TAIL_S = 150
"""The full side by side's observation tail after the trace (``test_keda_side_by_side``)."""


class AsOnTheNode:
    """A controller as the node's run saw it: the pods of a warm start Ready at second 0 (the
    side by side starts each side at its Ready floor) and pod-seconds counted from each pod's
    Ready to its exit (the simulator's own count starts at creation). ``running.run`` ticks the
    controller every second: a pod gone since the previous second left within it."""

    def __init__(self, controller: running.Controller, *, warm: int, pod_start_s: float) -> None:
        self.controller = controller
        self.name = controller.name
        self.warm = warm
        self.pod_start_s = pod_start_s
        self.ready_at: dict[str, float] = {}
        self.left_at: dict[str, float] = {}
        self._seen: set[str] = set()

    def initial_browsers_per_pod(self) -> int:
        return self.controller.initial_browsers_per_pod()

    def tick(self, now: float, farm: farm.Farm) -> None:
        if now == 0 and self.warm and not farm.pods:
            # A pod at rest runs every browser that fits, on both sides (ours: full pools);
            # the simulator would start it with the fewest and grow it at the first tick.
            farm.browsers_per_pod = sidebyside.BROWSERS
            farm.add_pods(self.warm, now=-self.pod_start_s)
            farm.replica_changes.clear()  # the starting size, not a scale event
        self.observe(now, farm)
        self.controller.tick(now, farm)

    def observe(self, now: float, farm: farm.Farm) -> None:
        present = {pod.name for pod in farm.pods}
        for pod in farm.pods:
            self.ready_at.setdefault(pod.name, pod.ready_at)
        for name in self._seen - present:
            self.left_at.setdefault(name, now)
        self._seen = present

    def ready_pod_seconds(self, end: float) -> float:
        return sum(
            max(0.0, self.left_at.get(name, end) - ready) for name, ready in self.ready_at.items()
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measured:
    """What the model takes from the node's runs of one side."""

    pod_start_s: float
    render: workload.RenderTimes
    """How long a job holds its slot (its service minus the PDF's upload)."""
    upload_s: float = 0.0
    """The upload after the slot is free: added to the model's submit-to-stored."""


def per_second(trace: sidebyside.Trace) -> traces.Trace:
    """The node's trace as the simulator's jobs per second."""
    counts = [0] * (math.floor(trace.duration) + 1)
    for at, count in trace.arrivals:
        counts[math.floor(at)] += count
    return traces.Trace(name=trace.name, arrivals=tuple(counts))


def measured(runs: Sequence[dict[str, Any]], *, default_pod_start_s: float) -> Measured:
    """The pod start (the median of creation to first render where the runs measured it, else
    of creation to Ready) and the render-time lognormal of ``runs``."""
    starts = [s for run in runs for s in run.get("pod_serving_s") or run.get("pod_start_s", [])]
    p50s = [run["service_p50_s"] for run in runs if run.get("service_p50_s")]
    p90s = [run["service_p90_s"] for run in runs if run.get("service_p90_s")]
    uploads = [run["upload_p50_s"] for run in runs if run.get("upload_p50_s") is not None]
    upload = statistics.median(uploads) if uploads else 0.0
    median = (statistics.median(p50s) if p50s else 1.0) - upload
    p90 = (statistics.median(p90s) if p90s else median * 1.5) - upload
    sigma = max(0.05, math.log(p90 / median) / 1.2816)  # 1.2816: the normal's 90th percentile
    return Measured(
        pod_start_s=statistics.median(starts) if starts else default_pod_start_s,
        render=workload.RenderTimes(median_s=median, sigma=sigma),
        upload_s=upload,
    )


def scenario(trace: sidebyside.Trace, side: str, taken: Measured, *, phase: int) -> Any:
    """The simulator's scenario of ``side`` on ``trace`` as the node ran it."""
    pool = sidebyside.pool_spec("queue", "image", from_zero=trace.from_zero)
    spec = specs.pool_spec(pool["spec"])
    grace = float(pool["spec"].get("terminationGracePeriodSeconds", 90))
    keda = None
    if not side.startswith("ours"):  # ours, or ours@POLICY for a run of another policy
        setting = sidebyside.KedaSetting.parse(side)
        keda = baseline.KedaHpaSettings(
            queue_length=setting.queue_length,
            browsers_per_pod=sidebyside.BROWSERS,
            min_replicas=spec.min_replicas,
            max_replicas=sidebyside.MAX_PODS,
            polling_s=5.0,
            cooldown_s=float(setting.window),
            scale_down_window_s=float(setting.window),
            scale_up_percent=0.0,  # the ScaledObject has one Pods policy only
            scale_up_pods=setting.step,
        )
    return running.Scenario(
        spec=spec,
        keda=keda,
        timings=farm.Timings(pod_start_s=taken.pod_start_s, grace_period_s=grace),
        render=taken.render,
        max_tail_s=TAIL_S,
        seed=0,
        phase_seed=phase,
    )


def model(trace: sidebyside.Trace, side: str, taken: Measured, *, phases: int) -> dict[str, float]:
    """The model's figures for ``side`` on ``trace``, the mean over ``phases`` loop draws."""
    rows = []
    for phase in range(phases):
        chosen = scenario(trace, side, taken, phase=phase)
        ours, keda = running.controllers(chosen)
        watched = AsOnTheNode(
            ours if side.startswith("ours") else keda,
            warm=0 if trace.from_zero else 1,
            pod_start_s=taken.pod_start_s,
        )
        run = running.run(per_second(trace), watched, scenario=chosen)
        watched.observe(float(run.end_s), run.farm)
        stored = [
            j.start + j.render_s + taken.upload_s - j.arrival
            for j in run.jobs
            if j.start is not None
        ]
        rows.append(
            {
                "p95_s": quantile(stored, 0.95) or 0.0,
                "p99_s": quantile(stored, 0.99) or 0.0,
                "pod_seconds": watched.ready_pod_seconds(float(run.end_s)),
                "interrupted": float(run.farm.interrupted),
                "lost": float(len(run.jobs) - len(stored)),
            }
        )
    return {key: statistics.fmean(row[key] for row in rows) for key in rows[0]}


def compare(stored: Sequence[dict[str, Any]], *, phases: int = 5) -> list[dict[str, Any]]:
    """Per (trace, side) measured: the real mean and the model's mean over the same runs, each
    run modelled with its own pod start and render time (the machine's load moves both: the
    render median went from ~1 s to ~3 s between runs here). Runs that recorded no render time
    (before ``service_p50_s`` existed) are left out."""
    shapes = sidebyside.traces()
    starts = [s for run in stored for s in run.get("pod_start_s", [])]
    pooled = statistics.median(starts) if starts else 20.0
    rows = []
    modelled = [run for run in stored if run.get("service_p50_s")]
    for name, side in dict.fromkeys((run["trace"], run["side"]) for run in modelled):
        real = [run for run in modelled if (run["trace"], run["side"]) == (name, side)]
        taken = [measured([run], default_pod_start_s=pooled) for run in real]
        simulated = [model(shapes[name], side, one, phases=phases) for one in taken]
        row: dict[str, Any] = {"trace": name, "side": side, "runs": len(real)}
        for key in ("p95_s", "p99_s", "pod_seconds"):
            mean = statistics.fmean(run[key] for run in real)
            guess = statistics.fmean(one[key] for one in simulated)
            row[key] = (mean, guess, (guess - mean) / mean * 100 if mean else 0.0)
        row["pod_start_s"] = statistics.fmean(one.pod_start_s for one in taken)
        row["render_median_s"] = statistics.fmean(one.render.median_s for one in taken)
        rows.append(row)
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        "| trace | side | runs | p95 s real / model (gap) | p99 s real / model (gap) "
        "| pod-s real / model (gap) | pod start, render median s |"
    )
    lines = [head, "|" + "---|" * 7]
    for row in rows:
        cells = [
            f"{real:.1f} / {model:.1f} ({gap:+.0f} %)"
            for real, model, gap in (row[k] for k in ("p95_s", "p99_s", "pod_seconds"))
        ]
        lines.append(
            f"| {row['trace']} | {row['side']} | {row['runs']} | {' | '.join(cells)} "
            f"| {row['pod_start_s']:.1f}, {row['render_median_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", default="out/keda/runs.json")
    parser.add_argument("--phases", type=int, default=5, help="loop-phase draws per figure")
    args = parser.parse_args(argv)
    print(table(compare(json.loads(Path(args.runs).read_text()), phases=args.phases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
