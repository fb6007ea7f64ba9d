"""Our operator beside the real KEDA + HPA on the real node (``tests/node/sidebyside.py``).

In CI: a short burst, ours and KEDA with a 60 s window, each from one Ready pod: every job stored
once on both sides, KEDA's HPA really scaled the Deployment, and the figures printed. The whole
side by side (four traces, ours, keda-60 and keda-120) is the same test with
``REPORTFARM_KEDA_FULL=1`` (``scripts/bench_keda.sh``; ``REPORTFARM_KEDA_TRACES`` picks some of
them), which also writes the table, the JSON and the plot to ``REPORTFARM_KEDA_OUT`` (default
``out/keda``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import keda as keda_harness
from tests.node import farm, images, sidebyside
from tests.node import node as node_harness

pytestmark = [pytest.mark.keda, pytest.mark.timeout(7200)]

FULL = os.environ.get("REPORTFARM_KEDA_FULL") == "1"


@pytest.fixture(scope="module")
def keda(cluster: tuple[farm.Tools, node_harness.Node, str]) -> Iterator[keda_harness.Keda]:
    tools, _, _ = cluster
    with keda_harness.Keda(tools.plane, bin_dir=keda_harness.bin_dir()) as running:
        yield running


def test_our_operator_beside_the_real_keda_on_the_real_node(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    keda: keda_harness.Keda,
) -> None:
    tools, _, connection = cluster
    if FULL:
        chosen = os.environ.get("REPORTFARM_KEDA_TRACES", "burst,jump,small,wake").split(",")
        traces = [sidebyside.traces()[name] for name in chosen]
        sides, tail = list(sidebyside.iter_sides("ours,keda-60,keda-120")), 150.0
    else:
        traces = [sidebyside.traces(scale=0.5)["burst"]]
        sides, tail = ["ours", "keda-60"], 75.0
    runs = []
    for trace in traces:
        for side in sides:
            run = sidebyside.run_side(
                tools, keda, connection, side=side, trace=trace,
                image=built_images["renderer"].ref, tail=tail,
            )  # fmt: skip
            print(json.dumps(run.figures()))
            runs.append(run)
    print(sidebyside.table(runs))
    if FULL:
        out = Path(os.environ.get("REPORTFARM_KEDA_OUT", "out/keda"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "runs.json").write_text(
            json.dumps([{**r.figures(), "replicas": r.replicas} for r in runs], indent=1)
        )
        (out / "table.md").write_text(sidebyside.table(runs) + "\n")
        sidebyside.plot(runs, str(out / "replicas.png"))
    for run in runs:
        assert (run.lost, run.failed, run.interrupted) == (0, 0, 0), run.figures()
        assert len(run.waits) == run.jobs, run.figures()
    keda_runs = [r for r in runs if r.side.startswith("keda")]
    # KEDA and the HPA were in the loop: they took the Deployment above where it started.
    assert all(max(d for _, d, _ in r.replicas) > 1 for r in keda_runs), [
        r.replicas for r in keda_runs
    ]
