"""A renderer pod's start on the real node, per phase, from its creation to its first PDF stored
(``tests/node/podstart.py``).

In CI: one pod (two browsers) for one waiting job: every phase the renderer logs is there, in
order, and the job is stored once. ``scripts/bench_pod_start.sh`` sets
``REPORTFARM_POD_START_ROUNDS=N`` (N pods one after the other) and may name other renderer images
in ``REPORTFARM_POD_START_ARCHIVES`` (OCI archives of ``scripts/images/build.sh``, comma-separated:
each imported fresh, its import timed, rounds interleaved between the images) and other CPU limits
for the pods in ``REPORTFARM_POD_START_CPUS`` (default ``1``, the tests' pool's); it prints a
table per image and limit and, with ``REPORTFARM_POD_START_OUT``, writes the rounds as JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.node import farm, images, podstart
from tests.node import node as node_harness

pytestmark = pytest.mark.timeout(1200)

ROUNDS = int(os.environ.get("REPORTFARM_POD_START_ROUNDS", "1"))
ARCHIVES = [a for a in os.environ.get("REPORTFARM_POD_START_ARCHIVES", "").split(",") if a]
CPUS = os.environ.get("REPORTFARM_POD_START_CPUS", "1").split(",")
"""The pods' CPU limits (comma-separated: each image's rounds at each, interleaved)."""


def test_a_renderer_pod_prints_its_first_pdf_phase_by_phase(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
) -> None:
    tools, node, connection = cluster
    refs = {built_images["renderer"].ref: None}
    imports = {}
    for archive in ARCHIVES:
        imports[podstart.archive_ref(archive)] = podstart.import_fresh(node, archive)
        refs[podstart.archive_ref(archive)] = None
    sides = [(ref, cpu) for ref in refs for cpu in CPUS]
    rounds: dict[tuple[str, str], list[podstart.Round]] = {side: [] for side in sides}
    for i in range(ROUNDS):
        for n, (ref, cpu) in enumerate(sides):
            rounds[ref, cpu].append(
                podstart.run_round(tools, connection, ref, name=f"podstart-{n}-{i}", cpu=cpu)
            )
    for (ref, cpu), done in rounds.items():
        imported = imports.get(ref, "-")
        print(f"\nrenderer image {ref}, limit {cpu} CPU (import into the node: {imported} s)")
        print(podstart.table(done))
        for r in done:
            print(
                json.dumps(
                    {"pod": r.pod, "create_call_s": r.create_call_s, **r.phases, "cpu": r.cpu}
                )
            )
    if out := os.environ.get("REPORTFARM_POD_START_OUT"):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        figures = {
            f"{ref} cpu={cpu}": {"import_s": imports.get(ref), "rounds": [r.__dict__ for r in done]}
            for (ref, cpu), done in rounds.items()
        }
        Path(out).write_text(json.dumps(figures, indent=1))
    for r in [r for done in rounds.values() for r in done]:
        # Every phase was seen (the renderer logged its own; the kubelet set Ready) ...
        assert set(r.phases) == set(podstart.PHASES), r
        # ... in the order a start passes them: the container before the process, the process
        # before its imports, and a PDF only once a browser could print and the job was received.
        order = ["container_started", "process_started", "imported", "browser_ready",
                 "first_receive", "first_stored"]  # fmt: skip
        assert [r.phases[p] for p in order] == sorted(r.phases[p] for p in order), r
        assert r.phases["imported"] <= r.phases["listening"] <= r.phases["first_stored"], r
        assert 0 < r.owned_s, r
        # In the container, the phases marked as they happen carry the container's CPU, which
        # only grows.
        cpu_order = [p for p in order if p in r.cpu]
        assert cpu_order == ["imported", "browser_ready", "first_receive", "first_stored"], r
        assert [r.cpu[p] for p in cpu_order] == sorted(r.cpu[p] for p in cpu_order), r
        assert r.owned_cpu_s is not None and 0 < r.owned_cpu_s, r
