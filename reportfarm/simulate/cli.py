"""``reportfarm simulate``: replay a trace through our policy and a KEDA + HPA baseline."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

from rich.console import Console

from reportfarm.simulate import metrics, plotting, reporting, running, traces, workload


def parser() -> argparse.ArgumentParser:
    known = ", ".join(traces.BUILTIN)
    p = argparse.ArgumentParser(
        prog="reportfarm simulate",
        description="Replay an arrival trace through reportfarm's scaling policy and through a "
        "KEDA + HPA baseline on the same simulated cluster; compare waits, cost and lost work.",
    )
    p.add_argument(
        "--trace",
        default="burst",
        metavar="NAME|FILE.csv",
        help=f"a built-in trace ({known}) or a CSV with columns t_s,arrivals (default: burst)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON only")
    p.add_argument("--plot", type=pathlib.Path, metavar="PATH", help="write a PNG plot here")
    p.add_argument("--seed", type=int, default=0, help="seed for traces, jobs and loops")
    p.add_argument("--pod-start-s", type=float, default=None, help="pod start time (20)")
    p.add_argument("--render-median-s", type=float, default=None, help="median render (0.5)")
    p.add_argument("--render-sigma", type=float, default=None, help="lognormal sigma (0.6)")
    p.add_argument(
        "--target-wait-s", type=float, default=None, help="our ReportPool's accepted wait (5)"
    )
    p.add_argument(
        "--scale-down-window-s",
        type=float,
        default=None,
        help="our ReportPool's scale-down stabilization (60); the baseline keeps 300",
    )
    return p


def scenario_from(args: argparse.Namespace) -> running.Scenario:
    scenario = running.Scenario(seed=args.seed)
    pool = {
        "target_wait_s": args.target_wait_s,
        "scale_down_stabilization_s": args.scale_down_window_s,
    }
    pool_changes = {key: value for key, value in pool.items() if value is not None}
    if pool_changes:
        spec = dataclasses.replace(scenario.spec, **pool_changes)
        scenario = dataclasses.replace(scenario, spec=spec)
    if args.pod_start_s is not None:
        timings = dataclasses.replace(scenario.timings, pod_start_s=args.pod_start_s)
        scenario = dataclasses.replace(scenario, timings=timings)
    render = {"median_s": args.render_median_s, "sigma": args.render_sigma}
    changes = {key: value for key, value in render.items() if value is not None}
    if changes:
        scenario = dataclasses.replace(
            scenario, render=dataclasses.replace(workload.RenderTimes(), **changes)
        )
    return scenario


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        trace = traces.load(args.trace, seed=args.seed)
    except (ValueError, OSError) as error:
        print(f"reportfarm simulate: {error}", file=sys.stderr)
        return 2
    scenario = scenario_from(args)
    runs = running.compare(trace, scenario=scenario)
    summaries = {run.strategy: metrics.summarize(run) for run in runs}
    document = reporting.report(trace, scenario, summaries)
    if args.plot is not None:
        plotting.plot(runs, title=f"{trace.name}: {trace.description}", path=args.plot)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        reporting.print_report(Console(), document)
        if args.plot is not None:
            Console().print(f"plot: {args.plot}")
    return 0
