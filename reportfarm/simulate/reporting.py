"""The comparison as data (for ``--json``) and as a rich table (for people)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from reportfarm.simulate import baseline, running, traces

TARGET_SAVING = 0.30
"""The issue's bar: at least 30 % fewer pod-seconds, p95 wait no worse, no interrupted job."""

ROWS = (
    ("p50_wait_s", "p50 queue wait (s)"),
    ("p95_wait_s", "p95 queue wait (s)"),
    ("p99_wait_s", "p99 queue wait (s)"),
    ("max_wait_s", "max queue wait (s)"),
    ("pod_seconds", "pod-seconds (cost)"),
    ("peak_replicas", "peak replicas"),
    ("scale_events", "scale events (replicas)"),
    ("reversals", "direction reversals (replicas)"),
    ("pool_resizes", "pool resizes (browsers/pod)"),
    ("interrupted_jobs", "interrupted jobs"),
    ("jobs_completed", "jobs completed"),
)


def parameters(scenario: running.Scenario) -> dict[str, Any]:
    spec, timings, render = scenario.spec, scenario.timings, scenario.render
    keda = baseline.KedaHpaSettings(queue_length=spec.browsers_that_fit)
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
        "cluster": dataclasses.asdict(timings),
        "render": {**dataclasses.asdict(render), "mean_s": round(render.mean_s, 3)},
        "reportfarm": {**dataclasses.asdict(spec), "interval_s": scenario.policy_interval_s},
        "keda_hpa": {
            **dataclasses.asdict(keda),
            "browsers_per_pod": spec.browsers_that_fit,
            "min_replicas": spec.min_replicas,
            "max_replicas": spec.max_replicas,
        },
    }


def comparison(ours: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    cost = ours["pod_seconds"] / base["pod_seconds"] if base["pod_seconds"] else 0.0
    wait = ours["p95_wait_s"] / base["p95_wait_s"] if base["p95_wait_s"] else None
    met = ours["p95_wait_s"] <= base["p95_wait_s"] and 1 - cost >= TARGET_SAVING
    return {
        "pod_seconds_ratio": round(cost, 3),
        "pod_seconds_saved": round(1 - cost, 3),
        "p95_wait_ratio": None if wait is None else round(wait, 3),
        "target_met": met and ours["interrupted_jobs"] == 0,
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
        f"{pod['replicas'][1]}; pod start {cluster['pod_start_s']:.0f} s; visibility timeout "
        f"{cluster['visibility_timeout_s']:.0f} s; render lognormal median "
        f"{render['median_s']} s, sigma {render['sigma']} (mean {render['mean_s']} s)\n"
        f"[bold]reportfarm[/] every {ours['interval_s']:.0f} s: target wait "
        f"{ours['target_wait_s']:.0f} s, utilization {ours['target_utilization']}, browsers "
        f"{ours['min_browsers_per_pod']}..{pod['browsers_that_fit']}/pod (pool resize "
        f"{cluster['resize_delay_s']:.0f} s), scale-down window "
        f"{ours['scale_down_stabilization_s']:.0f} s, tolerance {ours['tolerance']}, zero after "
        f"{ours['scale_to_zero_idle_s']:.0f} s idle; drains the idlest pods\n"
        f"[bold]keda_hpa[/] queueLength {keda['queue_length']} = browsers/pod (fixed), poll "
        f"{keda['polling_s']:.0f} s, sync {keda['sync_s']:.0f} s, tolerance {keda['tolerance']}, "
        f"scale-down window {keda['scale_down_stabilization_s']:.0f} s, scale-up "
        f"max(+{keda['scale_up_percent']:.0f} %, +{keda['scale_up_pods']}) per "
        f"{keda['scale_period_s']:.0f} s, cooldown {keda['cooldown_s']:.0f} s; kills pods"
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
    mark = "[green]met[/]" if verdict["target_met"] else "[yellow]not met[/]"
    console.print(
        f"pod-seconds saved: {verdict['pod_seconds_saved']:.0%}; p95 wait ratio: "
        f"{verdict['p95_wait_ratio']}; target (p95 <= baseline, >= {TARGET_SAVING:.0%} fewer "
        f"pod-seconds, 0 interrupted): {mark}"
    )
