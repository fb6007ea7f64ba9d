"""A PNG of queue depth, replicas and browsers over time for both strategies (matplotlib, Agg)."""

from __future__ import annotations

import pathlib
from typing import Any

from reportfarm.simulate import running

COLORS = {"reportfarm": "tab:blue", "keda_hpa": "tab:orange"}


def plot(
    runs: list[running.Run],
    *,
    title: str,
    path: pathlib.Path,
    blind: tuple[tuple[float, float], ...] = (),
) -> None:
    """Queue depth, replicas and ready browsers over time; ``blind`` windows shaded grey."""
    import matplotlib  # an optional dependency (reportfarm[plot]): imported only when plotting

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(3, 1, sharex=True, figsize=(11, 8), constrained_layout=True)
    panels = (
        ("queue depth (approx. count)", lambda run: run.depth),
        ("replicas (pods)", lambda run: run.replicas),
        ("browsers ready", lambda run: run.browsers),
    )
    for axis, (label, series) in zip(axes, panels, strict=True):
        for run in runs:
            minutes = [t / 60 for t in run.times]
            color = COLORS.get(run.strategy)
            axis.plot(minutes, series(run), label=run.strategy, color=color, linewidth=0.9)
        for start, end in blind:
            stop = min(end, max(run.times[-1] for run in runs if run.times))
            axis.axvspan(start / 60, stop / 60, color="grey", alpha=0.15, linewidth=0)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    if blind:
        title += " (grey: our operator blind, no renderer metrics)"
    axes[0].legend(loc="upper right")
    axes[0].set_title(title)
    axes[-1].set_xlabel("time (min)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def plot_frontiers(points_by_trace: dict[str, list[Any]], *, path: pathlib.Path) -> None:
    """One panel per trace: p95 wait vs pod-seconds, every point and each side's frontier."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from reportfarm.simulate import frontier

    count = len(points_by_trace)
    figure, axes = pyplot.subplots(
        1, count, figsize=(5.2 * count, 4.4), constrained_layout=True, squeeze=False
    )
    for axis, (name, points) in zip(axes[0], points_by_trace.items(), strict=True):
        for side in ("keda_hpa", "reportfarm"):
            mine = [p for p in points if p.side == side]
            color = COLORS[side]
            axis.scatter(
                [p.pod_seconds for p in mine],
                [p.p95_wait_s for p in mine],
                color=color,
                alpha=0.35,
                s=16,
            )
            front = frontier.pareto(mine)
            axis.plot(
                [p.pod_seconds for p in front],
                [p.p95_wait_s for p in front],
                color=color,
                marker="o",
                markersize=4,
                label=f"{side} frontier",
            )
        axis.set_title(name)
        axis.set_xlabel("pod-seconds")
        axis.set_ylabel("p95 queue wait (s)")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(loc="upper right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def plot_suite(rows: list[dict[str, Any]], *, path: pathlib.Path) -> None:
    """Each case a dot: our p95 wait and pod-seconds over the better / cheaper tuned preset's,
    coloured by shape; the bar's lines (1.1x wait, 1x cost). Cases where both waits are under
    1 s are drawn hollow (a tie on wait)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(9, 6.5), constrained_layout=True)
    shapes_seen = sorted({row["shape"] for row in rows})
    cmap = pyplot.get_cmap("tab10")
    for number, shape in enumerate(shapes_seen):
        mine = [r for r in rows if r["shape"] == shape and r["p95_ratio"] and r["cost_ratio"]]
        label: str | None = shape
        for hollow in (False, True):
            picked = [r for r in mine if r["both_fast"] is hollow]
            if not picked:
                continue
            axis.scatter(
                [r["cost_ratio"] for r in picked],
                [max(r["p95_ratio"], 0.01) for r in picked],
                s=22,
                label=label,
                facecolors="none" if hollow else cmap(number),
                edgecolors=cmap(number),
                alpha=0.8,
            )
            label = None
    axis.axhline(1.1, color="grey", linestyle="--", linewidth=0.8)
    axis.axvline(1.0, color="grey", linestyle="--", linewidth=0.8)
    axis.set_yscale("log")
    axis.set_xlabel("our pod-seconds / the cheaper tuned preset's")
    axis.set_ylabel("our p95 wait / the better tuned preset's (log)")
    axis.set_title(
        f"{len(rows)} generated cases; the bar: below 1.1 and left of 1.0 (hollow: both p95 < 1 s)"
    )
    axis.grid(alpha=0.3)
    axis.legend(loc="upper right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def plot_idle(by_timer: list[dict[str, Any]], *, path: pathlib.Path) -> None:
    """The idle timer's frontier on trickles: per side, the medians at each timer value (pod-
    seconds over KEDA's at 300 s against mean wait), each point labelled with its value."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(8, 5.5), constrained_layout=True)
    names = {"reportfarm": "ours (scaleToZero.idleSeconds)", "keda_hpa": "KEDA (cooldownPeriod)"}
    for side, label in names.items():
        rows = [r for r in by_timer if r["side"] == side and r["pod_seconds_vs_keda_300"]]
        xs = [r["pod_seconds_vs_keda_300"] for r in rows]
        ys = [r["mean_wait_s"] for r in rows]
        axis.plot(xs, ys, marker="o", label=label)
        for row, x, y in zip(rows, xs, ys, strict=True):
            axis.annotate(
                f"{row['idle_s']:.0f} s",
                (x, y),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=8,
            )
    axis.set_xlabel("pod-seconds / KEDA's at cooldownPeriod 300 s (median over the cases)")
    axis.set_ylabel("mean queue wait (s, median over the cases)")
    axis.set_title("trickles: each side's idle timer swept (lower left is better)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
