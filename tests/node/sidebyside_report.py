"""The side by side's report: the runs kept in a folder (``runs.json``), their table and the
replicas-over-time plot, made anew from every run kept there."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from tests.node import sidebyside


def write(out: Path, runs: list[sidebyside.Run]) -> list[sidebyside.Run]:
    """Add ``runs`` to ``out/runs.json`` (runs add up: a few traces or sides at a time fit a
    short slot on a shared node), then write ``table.md`` and ``replicas.png`` from every run
    kept; returns them."""
    out.mkdir(parents=True, exist_ok=True)
    stored = out / "runs.json"
    kept = json.loads(stored.read_text()) if stored.exists() else []
    kept += [{**r.figures(), "replicas": r.replicas, "at": round(time.time())} for r in runs]
    stored.write_text(json.dumps(kept, indent=1))
    every = [sidebyside.Run.from_json(r) for r in kept]
    (out / "table.md").write_text(table(every) + "\n")
    plot(every, str(out / "replicas.png"))
    frontier(every, str(out / "frontier.png"))
    return every


def groups(runs: list[sidebyside.Run]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The runs' figures by (trace, side), in the order first run."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        grouped.setdefault((run.trace, run.side), []).append(run.figures())
    return grouped


def _spread(values: list[float], digits: int) -> str:
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(runs: list[sidebyside.Run]) -> str:
    """A markdown table, a row per (trace, side): the mean over its runs (and their range)."""
    head = (
        "| trace | side | runs | jobs | p50 s | p95 s | p99 s | pod-s | CPU-s requested "
        "| reversals | interrupted / failed / lost |"
    )
    rows = [head, "|" + "---|" * 11]
    for (trace, side), figures in groups(runs).items():
        cells = [
            _spread([f[key] for f in figures if f[key] is not None] or [0.0], digits)
            for key, digits in (
                ("p50_s", 1), ("p95_s", 1), ("p99_s", 1), ("pod_seconds", 0),
                ("cpu_seconds", 0), ("reversals", 1),
            )
        ]  # fmt: skip
        bad = " / ".join(str(sum(f[k] for f in figures)) for k in ("interrupted", "failed", "lost"))
        rows.append(
            f"| {trace} | {side} | {len(figures)} | {figures[0]['jobs']} | {' | '.join(cells)} "
            f"| {bad} |"
        )
    return "\n".join(rows)


def frontier(runs: list[sidebyside.Run], path: str) -> None:
    """Mean p95 vs mean pod-seconds of every side, a panel per trace (the knob sweep)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = groups(runs)
    names = list(dict.fromkeys(trace for trace, _ in grouped))
    figure, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.6), squeeze=False)
    for axis, name in zip(axes[0], names, strict=True):
        for (trace, side), figures in grouped.items():
            if trace != name:
                continue
            x = statistics.fmean(f["pod_seconds"] for f in figures)
            y = statistics.fmean(f["p95_s"] for f in figures)
            axis.scatter([x], [y], marker="o" if side.startswith("ours") else "x")
            axis.annotate(side, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
        axis.set_title(f"{name}: p95 vs pod-seconds")
        axis.set_xlabel("pod-seconds (Ready to deleted)")
        axis.set_ylabel("p95 submit-to-stored, s")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot(runs: list[sidebyside.Run], path: str) -> None:
    """Ready pods over time, a panel per trace, a line per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({run.trace for run in runs}, key=[r.trace for r in runs].index)
    figure, axes = plt.subplots(len(names), 1, figsize=(8, 2.6 * len(names)), squeeze=False)
    for axis, name in zip(axes[:, 0], names, strict=True):
        latest = {r.side: r for r in runs if r.trace == name}  # the last run of each side
        for run in latest.values():
            xs = [t for t, _, _ in run.replicas]
            axis.step(xs, [ready for _, _, ready in run.replicas], where="post", label=run.side)
        axis.set_title(f"{name}: Ready renderer pods")
        axis.set_xlabel("seconds")
        axis.set_ylim(0, sidebyside.MAX_PODS + 0.5)
        axis.legend(loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
