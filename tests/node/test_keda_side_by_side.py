"""Our operator beside the real KEDA + HPA on the real node (``tests/node/sidebyside.py``).

In CI, a short check: a 60-job burst to ours and to KEDA at the same time (each on its own
queue, at most 2 pods each so that both fit the node's 2 cores, both scale-down windows 15 s),
from one Ready pod each: every job stored once on both sides, both sides really scaled up (KEDA
through the HPA) and came back to one pod, and the figures (JSON, table, plot) were written.

The whole side by side (four traces, ours, keda-60 and keda-120 one after the other at up to 4
pods each) is ``test_full_side_by_side``, run with ``REPORTFARM_KEDA_FULL=1`` (``scripts/bench_keda.sh``;
``REPORTFARM_KEDA_TRACES`` and ``REPORTFARM_KEDA_SIDES`` pick some, e.g. ``keda-60-q4`` for
another KEDA setting), which adds its runs to ``REPORTFARM_KEDA_OUT`` (default ``out/keda``).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import keda as keda_harness
from tests.node import farm, images, sidebyside, sidebyside_report
from tests.node import node as node_harness

pytestmark = [pytest.mark.keda, pytest.mark.timeout(7200)]

FULL = os.environ.get("REPORTFARM_KEDA_FULL") == "1"
CHECK = sidebyside.Trace("check-burst", ((0.0, 60),))
"""The short check's burst: a backlog that outlasts a pod start on one pod even at full speed
(40 jobs: p95 20-24 s here at load 12, a second pod joining; 60 leave a margin for an idle
machine, where a render is faster)."""
CHECK_LIMITS = sidebyside.Limits(max_pods=sidebyside.MAX_PODS // 2, scale_down_s=15)


@pytest.fixture(scope="module")
def keda(cluster: tuple[farm.Tools, node_harness.Node, str]) -> Iterator[keda_harness.Keda]:
    tools, _, _ = cluster
    with keda_harness.Keda(tools.plane, bin_dir=keda_harness.bin_dir()) as running:
        yield running


def test_short_side_by_side_both_scale_and_lose_nothing(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    keda: keda_harness.Keda,
    tmp_path: Path,
) -> None:
    tools, _, connection = cluster
    runs = check(tools, keda, connection, image=built_images["renderer"].ref, out=tmp_path)
    served_once(runs)
    # KEDA and the HPA were in the loop: they took the Deployment above where it started.
    keda_run = next(r for r in runs if r.side.startswith("keda"))
    assert max(d for _, d, _ in keda_run.replicas) > 1, keda_run.replicas


@pytest.mark.skipif(not FULL, reason="the whole side by side: REPORTFARM_KEDA_FULL=1")
def test_full_side_by_side(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    keda: keda_harness.Keda,
) -> None:
    tools, _, connection = cluster
    served_once(full(tools, keda, connection, image=built_images["renderer"].ref))


def served_once(runs: list[sidebyside.Run]) -> None:
    """Every job stored once on every side (whether a side scaled is the trace's business: on
    small bursts that one pod drains before the HPA's next sync, KEDA never scales)."""
    for run in runs:
        assert (run.lost, run.failed, run.interrupted) == (0, 0, 0), run.figures()
        assert len(run.waits) == run.jobs, run.figures()


def check(
    tools: farm.Tools, keda: keda_harness.Keda, connection: str, *, image: str, out: Path
) -> list[sidebyside.Run]:
    """Both sides at once on the short burst, each until it is back at one pod."""

    def one(side: str) -> sidebyside.Run:
        return sidebyside.run_side(
            tools, keda, connection, side=side, trace=CHECK, image=image, tail=180.0,
            limits=CHECK_LIMITS, settle=True,
        )  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(one, ("ours", "keda-15")))
    print(sidebyside_report.table(runs))
    for run in runs:
        print(json.dumps(run.figures()))
        desired = [d for _, d, _ in run.replicas]
        # Both scaled up (ours: a second pod for a backlog that outlasts a pod start) and back.
        assert max(desired) == CHECK_LIMITS.max_pods, (run.side, run.replicas)
        assert run.replicas[-1][1:] == (1, 1), (run.side, run.replicas)
        assert run.pod_seconds > 0 and run.pod_starts, run.figures()
    sidebyside_report.write(out, runs)
    kept = json.loads((out / "runs.json").read_text())
    assert [r["side"] for r in kept] == ["ours", "keda-15"], kept
    assert (out / "replicas.png").stat().st_size > 0 and "| check-burst | ours |" in (
        out / "table.md"
    ).read_text()
    return runs


def full(
    tools: farm.Tools, keda: keda_harness.Keda, connection: str, *, image: str
) -> list[sidebyside.Run]:
    """The chosen traces and sides one after the other, added to the output folder.
    ``REPORTFARM_KEDA_RUNS`` (``trace:side,...``) names the pairs instead."""
    shapes = sidebyside.traces()
    pairs = [
        tuple(pair.split(":")) for pair in os.environ.get("REPORTFARM_KEDA_RUNS", "").split(",")
    ]
    if pairs == [("",)]:
        chosen = os.environ.get("REPORTFARM_KEDA_TRACES", "burst,jump,small,wake").split(",")
        sides = os.environ.get("REPORTFARM_KEDA_SIDES", "ours,keda-60,keda-120")
        pairs = [(name, side) for name in chosen for side in sidebyside.iter_sides(sides)]
    for name, side in pairs:
        list(sidebyside.iter_sides(side))  # a wrong name fails before any run
        assert name in shapes, f"unknown trace {name!r}: one of {', '.join(shapes)}"
    runs = []
    for name, side in pairs:
        run = sidebyside.run_side(
            tools, keda, connection, side=side, trace=shapes[name], image=image, tail=150.0
        )
        print(json.dumps(run.figures()), flush=True)
        runs.append(run)
        # Stored after each run: a run cut short by a shared node's slot keeps what it has.
        sidebyside_report.write(Path(os.environ.get("REPORTFARM_KEDA_OUT", "out/keda")), [run])
    print(sidebyside_report.table(runs))
    return runs
