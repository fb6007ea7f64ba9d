"""The comparison as data (for ``--json``) and as a rich table (for people)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from reportfarm.simulate import latencies, running, traces

ROWS = (
    ("p50_wait_s", "p50 queue wait (s)"),
    ("p95_wait_s", "p95 queue wait (s)"),
    ("p99_wait_s", "p99 queue wait (s)"),
    ("max_wait_s", "max queue wait (s)"),
    ("pod_seconds", "pod-seconds (cost)"),
    ("cpu_seconds", "requested CPU-seconds"),
    ("peak_replicas", "peak replicas"),
    ("scale_events", "scale events (replicas)"),
    ("reversals", "direction reversals (replicas)"),
    ("pool_resizes", "pool resizes (browsers/pod)"),
    ("interrupted_jobs", "interrupted jobs"),
    ("jobs_completed", "jobs completed"),
)


def parameters(scenario: running.Scenario) -> dict[str, Any]:
    spec, timings, render = scenario.spec, scenario.timings, scenario.render
    keda = running.keda_settings(scenario)
    return {
        "seed": scenario.seed,
        "pod": {
            "cpu_limit": spec.pod_cpu,
            "memory_limit_mib": spec.pod_memory_mib,
            "browser_cpu": spec.browser_cpu,
            "browser_memory_mib": spec.browser_memory_mib,
            "browsers_that_fit": spec.browsers_that_fit,
            "replicas": [spec.min_replicas, spec.max_replicas],
        },
        "cluster": {**dataclasses.asdict(timings), "measured": latencies.SOURCE},
        "render": {**dataclasses.asdict(render), "mean_s": round(render.mean_s, 3)},
        "reportfarm": {
            **dataclasses.asdict(spec),
            "interval_s": scenario.policy_interval_s,
            "blind": [list(window) for window in scenario.blind],
        },
        "keda_hpa": {
            "preset": None if scenario.keda is not None else scenario.baseline_preset,
            **dataclasses.asdict(keda),
        },
    }


def comparison(ours: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    cost = ours["pod_seconds"] / base["pod_seconds"] if base["pod_seconds"] else 0.0
    wait = ours["p95_wait_s"] / base["p95_wait_s"] if base["p95_wait_s"] else None
    return {
        "pod_seconds_ratio": round(cost, 3),
        "pod_seconds_saved": round(1 - cost, 3),
        "p95_wait_ratio": None if wait is None else round(wait, 3),
        "dominates": ours["p95_wait_s"] <= base["p95_wait_s"]
        and ours["pod_seconds"] <= base["pod_seconds"],
    }


def report(
    trace: traces.Trace, scenario: running.Scenario, summaries: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The ``--json`` document: trace, parameters, one summary per strategy, the comparison."""
    return {
        "trace": {
            "name": trace.name,
            "description": trace.description,
            "duration_s": trace.duration_s,
            "jobs": trace.jobs,
        },
        "parameters": parameters(scenario),
        **summaries,
        "comparison": comparison(summaries["reportfarm"], summaries["keda_hpa"]),
    }


def print_report(console: Console, document: dict[str, Any]) -> None:
    trace, params = document["trace"], document["parameters"]
    pod, cluster, render = params["pod"], params["cluster"], params["render"]
    ours, keda = params["reportfarm"], params["keda_hpa"]
    console.print(
        f"[bold]trace[/] {trace['name']}: {trace['description']} "
        f"({trace['jobs']} jobs, {trace['duration_s']} s, seed {params['seed']})\n"
        f"[bold]pod[/] {pod['cpu_limit']} CPU / {pod['memory_limit_mib']:.0f} MiB, browser "
        f"{pod['browser_cpu']} CPU / {pod['browser_memory_mib']:.0f} MiB -> "
        f"{pod['browsers_that_fit']} browsers fit; replicas {pod['replicas'][0]}..."
        f"{pod['replicas'][1]}; pod start {cluster['pod_start_s']:.0f} s; grace period "
        f"{cluster['grace_period_s']:.0f} s (both drain); render lognormal median "
        f"{render['median_s']} s, sigma {render['sigma']} (mean {render['mean_s']} s)\n"
        f"[bold]reportfarm[/] every {ours['interval_s']:.0f} s: target wait "
        f"{ours['target_wait_s']:.0f} s, utilization {ours['target_utilization']}, browsers "
        f"{ours['min_browsers_per_pod']}..{pod['browsers_that_fit']}/pod (pool resize "
        f"{cluster['resize_delay_s']:.0f} s), scale-down window "
        f"{ours['scale_down_stabilization_s']:.0f} s, tolerance {ours['tolerance']}, zero after "
        f"{ours['scale_to_zero_idle_s']:.0f} s idle; drains the idlest pods"
        + (f"; metrics unreadable during {ours['blind']} s" if ours["blind"] else "")
        + f"\n[bold]keda_hpa[/] ({keda['preset'] or 'custom'}) queueLength "
        f"{keda['queue_length']}, {keda['browsers_per_pod']} browsers/pod (fixed), poll "
        f"{keda['polling_s']:.0f} s, sync {keda['sync_s']:.0f} s, tolerance {keda['tolerance']}, "
        f"scale-down window {keda['scale_down_window_s']:.0f} s, scale-up "
        f"max(+{keda['scale_up_percent']:.0f} %, +{keda['scale_up_pods']}) per "
        f"{keda['scale_up_period_s']:.0f} s, cooldown {keda['cooldown_s']:.0f} s; ReplicaSet "
        "victims (not ready, then newest), which drain"
    )
    table = Table(box=box.SIMPLE_HEAVY)
    table.add_column("metric")
    for name in ("reportfarm", "keda_hpa", "ours / baseline"):
        table.add_column(name, justify="right")
    for key, label in ROWS:
        mine, theirs = document["reportfarm"][key], document["keda_hpa"][key]
        ratio = f"{mine / theirs:.2f}" if theirs else "-"
        table.add_row(label, f"{mine:,}", f"{theirs:,}", ratio)
    console.print(table)
    verdict = document["comparison"]
    mark = "[green]yes[/]" if verdict["dominates"] else "[yellow]no[/]"
    console.print(
        f"pod-seconds ratio {verdict['pod_seconds_ratio']}; p95 wait ratio "
        f"{verdict['p95_wait_ratio']}; no worse on both: {mark}"
    )


def print_check(console: Console, document: dict[str, Any]) -> None:
    """``--check``: per trace, the mean figures of each side, then the bar's conditions."""
    table = Table(box=box.SIMPLE_HEAVY, title="ours vs KEDA + HPA tuned (mean of the seeds)")
    for column in ("trace", "side", "p95 wait (s)", "pod-s", "CPU-s", "reversals", "interrupted"):
        table.add_column(column, justify="left" if column in ("trace", "side") else "right")
    for name, entry in document.items():
        for side, means in entry["mean"].items():
            table.add_row(
                name if side == "reportfarm" else "",
                side,
                f"{means['p95_wait_s']:.2f}",
                f"{means['pod_seconds']:,.0f}",
                f"{means['cpu_seconds']:,.0f}",
                f"{means['reversals']:.1f}",
                f"{means['interrupted_jobs']:.0f}",
                end_section=side == "tuned-120",
            )
    console.print(table)
    for name, entry in document.items():
        checks = "; ".join(
            f"{label}: {'[green]yes[/]' if ok else '[red]no[/]'}"
            for label, ok in entry["checks"].items()
        )
        verdict = "[green]met[/]" if entry["met"] else "[red]not met[/]"
        console.print(f"[bold]{name}[/] {verdict} ({checks})")


def print_frontiers(console: Console, document: dict[str, Any]) -> None:
    """``--frontier``: each side's Pareto points per trace."""
    for name, sides in document.items():
        table = Table(box=box.SIMPLE_HEAVY, title=f"{name}: Pareto frontiers")
        for column in ("side", "p95 wait (s)", "pod-s", "knobs"):
            table.add_column(column)
        for side, entry in sides.items():
            for point in entry["frontier"]:
                knobs = ", ".join(f"{key}={value}" for key, value in point["knobs"].items())
                table.add_row(
                    side, f"{point['p95_wait_s']:.2f}", f"{point['pod_seconds']:,.0f}", knobs
                )
        console.print(table)


def print_suite(console: Console, rows: list[dict[str, Any]]) -> None:
    """``--suite``: per shape, the cases that meet the bar and the ratios' median and worst."""
    from reportfarm.simulate import suite

    table = Table(
        box=box.SIMPLE_HEAVY,
        title="ours vs the better / cheaper of KEDA tuned (60 s) and tuned-120, per case the mean "
        "of the phase draws",
    )
    columns = ("shape", "cases", "met", "wait ok", "cost ok", "p95 ratio med / worst")
    for column in (*columns, "pod-s ratio med / worst", "reversals ours / tuned"):
        table.add_column(column, justify="left" if column == "shape" else "right")
    for shape, entry in suite.by_shape(rows).items():

        def pair(key: str, entry: dict[str, Any] = entry) -> str:
            median, worst = entry[f"{key}_median"], entry[f"{key}_worst"]
            return "-" if median is None else f"{median:.2f} / {worst:.2f}"

        table.add_row(
            shape,
            str(entry["cases"]),
            str(entry["met"]),
            str(entry["wait_met"]),
            str(entry["cost_met"]),
            pair("p95_ratio"),
            pair("cost_ratio"),
            f"{entry['reversals_ours']:.1f} / {entry['reversals_tuned']:.1f}",
        )
    console.print(table)
    missed = [row for row in rows if not row["met"]]
    console.print(f"{len(rows) - len(missed)} of {len(rows)} cases meet the bar")
    for row in missed:
        means = row["mean"]
        failed = ", ".join(name for name, ok in row["checks"].items() if not ok)
        waits = " / ".join(f"{means[side]['p95_wait_s']:.2f}" for side in suite.SIDES)
        costs = " / ".join(f"{means[side]['pod_seconds']:,.0f}" for side in suite.SIDES)
        console.print(
            f"  case {row['index']} {row['shape']} ({row['description']}): {failed}; p95 "
            f"{waits} s, pod-s {costs} (ours / tuned / tuned-120)"
        )


def print_idle(console: Console, document: dict[str, Any]) -> None:
    """``--idle-frontier``: each side's timer values, then ours read at KEDA's cost."""
    table = Table(
        box=box.SIMPLE_HEAVY,
        title=f"trickles ({document['cases']} cases): each side's idle timer swept, medians over "
        "the cases",
    )
    for column in ("side", "idle timer (s)", "pod-s / KEDA at 300 s", "mean wait (s)", "cold"):
        table.add_column(column, justify="left" if column == "side" else "right")
    for row in document["by_timer"]:
        cost = row["pod_seconds_vs_keda_300"]
        table.add_row(
            "ours" if row["side"] == "reportfarm" else "KEDA (cooldownPeriod)",
            f"{row['idle_s']:.0f}",
            "-" if cost is None else f"{cost:.2f}",
            f"{row['mean_wait_s']:.1f}",
            f"{row['cold_share']:.0%}",
        )
    console.print(table)
    matched = Table(
        box=box.SIMPLE_HEAVY,
        title="at KEDA's cost: our timer chosen to cost what KEDA's costs, per case",
    )
    columns = ("KEDA cooldown (s)", "cases matched", "KEDA cheaper than any of ours")
    for column in (
        *columns,
        "our mean wait / KEDA's (median)",
        "ours waits less",
        "cold ours / KEDA",
    ):
        matched.add_column(column, justify="right")
    for row in document["matched"]:
        ratio, cold = row["mean_wait_ratio_median"], row["cold_share_median"]
        matched.add_row(
            f"{row['keda_cooldown_s']:.0f}",
            f"{row['matched']} of {row['cases']}",
            str(row["keda_cheaper_than_any_of_ours"]),
            "-" if ratio is None else f"{ratio:.2f}",
            str(row["ours_waits_less"]),
            "-"
            if cold["reportfarm"] is None
            else f"{cold['reportfarm']:.0%} / {cold['keda_hpa']:.0%}",
        )
    console.print(matched)
