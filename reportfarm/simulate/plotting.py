"""A PNG of queue depth, replicas and browsers over time for both strategies (matplotlib, Agg)."""

from __future__ import annotations

import pathlib

from reportfarm.simulate import running

COLORS = {"reportfarm": "tab:blue", "keda_hpa": "tab:orange"}


def plot(runs: list[running.Run], *, title: str, path: pathlib.Path) -> None:
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
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    axes[0].set_title(title)
    axes[-1].set_xlabel("time (min)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
