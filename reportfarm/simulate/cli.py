"""``reportfarm simulate``: replay a trace through our policy and a KEDA + HPA baseline."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

from rich.console import Console

from reportfarm.simulate import (
    baseline,
    frontier,
    idle,
    metrics,
    plotting,
    reporting,
    running,
    scoring,
    suite,
    traces,
    workload,
)


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
    p.add_argument(
        "--render-median-s",
        type=float,
        default=None,
        help="median render (0.5); with --suite or --idle-frontier, every case's (tails kept)",
    )
    p.add_argument("--render-sigma", type=float, default=None, help="lognormal sigma (0.6)")
    p.add_argument(
        "--target-wait-s", type=float, default=None, help="our ReportPool's accepted wait (5)"
    )
    p.add_argument(
        "--scale-down-window-s",
        type=float,
        default=None,
        help="our ReportPool's scale-down stabilization (60)",
    )
    p.add_argument(
        "--recurring-backlog-hold-s",
        type=float,
        default=None,
        help="our ReportPool's hold of a drained backlog's pods when backlogs recur (0: off)",
    )
    p.add_argument(
        "--drained-backlog-hold-s",
        type=float,
        default=None,
        help="how long a drained backlog's ready pods are kept (5: one tick; 0: let go at the "
        "first drained reading)",
    )
    p.add_argument(
        "--idle-s",
        type=float,
        default=None,
        help="our ReportPool's scaleToZero.idleSeconds (120): zero pods after this long without "
        "work",
    )
    p.add_argument(
        "--baseline",
        default="tuned",
        choices=baseline.PRESETS,
        help="the KEDA + HPA configuration: tuned (default: queueLength = browsers per pod, "
        "polling 5 s, scale-down window 60 s, +20 pods per 15 s), tuned-120 (a 120 s window) or "
        "default (KEDA's and the HPA's defaults)",
    )
    p.add_argument(
        "--blind",
        action="append",
        type=window,
        default=[],
        metavar="FROM-TO",
        help="seconds during which our operator cannot read the renderers' metrics "
        "(repeatable; e.g. 0-3600 for a whole burst run)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="the issue's bar: ours vs tuned and tuned-120, mean of --seeds, on --traces",
    )
    p.add_argument(
        "--frontier",
        action="store_true",
        help="sweep each side's knobs on --traces (seed --seed): p95 wait vs pod-seconds; "
        "--plot writes the frontiers",
    )
    p.add_argument(
        "--suite",
        type=int,
        default=None,
        metavar="N",
        help="N generated load shapes (bursts, small bursts, sustained jumps, ramps, cliffs, "
        "wakes, waves, trickles, heavy tails) against tuned and tuned-120, loop phases redrawn "
        "--phases times; per shape the ratios and the bar; --plot draws their distribution",
    )
    p.add_argument(
        "--idle-frontier",
        action="store_true",
        help="the trickle cases among the suite's first --suite N (default 400, from --first): "
        "both sides' idle timers swept (scaleToZero.idleSeconds, KEDA's cooldownPeriod), and ours "
        "read at KEDA's cost; --plot draws the frontier",
    )
    p.add_argument(
        "--phases", type=int, default=3, metavar="K", help="loop-phase draws per case (3)"
    )
    p.add_argument(
        "--first",
        type=int,
        default=0,
        metavar="I",
        help="--suite runs cases I .. I + N - 1 (default 0; e.g. 200 for a fresh set of cases "
        "no policy change was tried on)",
    )
    p.add_argument(
        "--traces",
        default="burst,month-end,month-end-dense",
        metavar="A,B",
        help="traces for --check and --frontier (default: burst,month-end,month-end-dense)",
    )
    p.add_argument(
        "--seeds", default="0,1,2", metavar="A,B", help="seeds for --check (default 0,1,2)"
    )
    return p


def window(text: str) -> tuple[float, float]:
    """``FROM-TO`` seconds, for ``--blind``."""
    start, sep, end = text.partition("-")
    try:
        pair = (float(start), float(end))
    except ValueError:
        pair = (0.0, -1.0)
    if not sep or pair[0] >= pair[1] or pair[0] < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FROM-TO seconds, FROM < TO")
    return pair


def scenario_from(args: argparse.Namespace) -> running.Scenario:
    scenario = running.Scenario(
        seed=args.seed, baseline_preset=args.baseline, blind=tuple(args.blind)
    )
    pool = {
        "target_wait_s": args.target_wait_s,
        "scale_down_stabilization_s": args.scale_down_window_s,
        "recurring_backlog_hold_s": args.recurring_backlog_hold_s,
        "drained_backlog_hold_s": args.drained_backlog_hold_s,
        "scale_to_zero_idle_s": args.idle_s,
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
    if args.idle_frontier:
        return run_idle(args)
    if args.suite is not None:
        return run_suite(args)
    if args.check or args.frontier:
        return many(args)
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
        plotting.plot(
            runs,
            title=f"{trace.name}: {trace.description}",
            path=args.plot,
            blind=scenario.blind,
        )
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        reporting.print_report(Console(), document)
        if args.plot is not None:
            Console().print(f"plot: {args.plot}")
    return 0


def many(args: argparse.Namespace) -> int:
    """``--check`` or ``--frontier``: several traces (and seeds), one table or plot."""
    names = [name.strip() for name in args.traces.split(",") if name.strip()]
    unknown = [name for name in names if name not in traces.BUILTIN]
    if unknown or not names:
        print(f"reportfarm simulate: unknown traces {unknown}", file=sys.stderr)
        return 2
    scenario = scenario_from(args)
    err = Console(stderr=True)
    if args.check:
        seeds = [int(seed) for seed in args.seeds.split(",")]
        document = scoring.check(names, seeds=seeds, scenario=scenario, progress=err.log)
        if args.json:
            print(json.dumps(document, indent=2))
        else:
            reporting.print_check(Console(), document)
        return 0 if all(entry["met"] for entry in document.values()) else 1
    points = {
        name: frontier.sweep(traces.load(name, seed=args.seed), scenario=scenario, progress=err.log)
        for name in names
    }
    if args.plot is not None:
        plotting.plot_frontiers(points, path=args.plot)
    if args.json:
        print(json.dumps(frontier.document(points), indent=2))
    else:
        reporting.print_frontiers(Console(), frontier.document(points))
    return 0


def run_suite(args: argparse.Namespace) -> int:
    """``--suite N``: the generated shapes; exits 1 if a case misses the bar."""
    if args.suite < 1 or args.phases < 1 or args.first < 0:
        message = "--suite and --phases need a count >= 1, --first an index >= 0"
        print(f"reportfarm simulate: {message}", file=sys.stderr)
        return 2
    rows = suite.run(
        args.suite,
        scenario=scenario_from(args),
        phases=args.phases,
        start=args.first,
        render_median_s=args.render_median_s,
        progress=Console(stderr=True).log,
    )
    if args.plot is not None:
        plotting.plot_suite(rows, path=args.plot)
    if args.json:
        print(json.dumps({"cases": rows, "by_shape": suite.by_shape(rows)}, indent=2))
    else:
        reporting.print_suite(Console(), rows)
    return 0 if all(row["met"] for row in rows) else 1


def run_idle(args: argparse.Namespace) -> int:
    """``--idle-frontier``: the idle timers on the suite's trickle cases."""
    count = 400 if args.suite is None else args.suite
    cases = idle.trickles(count, start=args.first) if count > 0 and args.first >= 0 else []
    if not cases or args.phases < 1:
        message = f"no trickle case among cases {args.first} .. {args.first + count - 1}"
        print(
            f"reportfarm simulate: {message if args.phases >= 1 else '--phases >= 1'}",
            file=sys.stderr,
        )
        return 2
    rows = idle.sweep(
        cases,
        scenario=scenario_from(args),
        phases=args.phases,
        render_median_s=args.render_median_s,
        progress=Console(stderr=True).log,
    )
    by_timer = idle.by_timer(rows)
    document = {
        "cases": len(cases),
        "by_timer": by_timer,
        "matched": idle.matched(rows),
        "rows": rows,
    }
    if args.plot is not None:
        plotting.plot_idle(by_timer, path=args.plot)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        reporting.print_idle(Console(), document)
    return 0
