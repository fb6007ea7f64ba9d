"""The soak with faults, CI-sized: ``scripts/soak.py``'s own functions with small numbers.

150 jobs through 2 real worker processes (real Chromium, Azurite on disk) while every kind of
fault is injected at least once (forced, in a seeded order; random ones follow): kill -9 of a
worker's process group, SIGKILL of a Chromium process, an Azurite restart, a pool resize and a
kill -9 of the operator, which runs on a local control plane against the soak's queue. Nothing is
lost, every job has one PDF and one record, no zombie or process is left behind, the browsers stay
under the recycle cap. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.chromium,
    pytest.mark.azurite,
    pytest.mark.kube,
]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"
JOBS = 150


def load_soak() -> ModuleType:
    """The script as a module (``scripts/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("reportfarm_soak", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(900)
def test_a_soak_with_every_kind_of_fault_loses_nothing() -> None:
    soak = load_soak()
    config = soak.SoakConfig(
        jobs=JOBS,
        workers=2,
        seconds=600,
        seed=6,
        with_operator=True,
        forced=soak.FAULT_KINDS,
        fault_gap_s=(2.0, 4.0),
        recycle_after_jobs=10,
        progress=False,  # logs and Azurite's data: a temporary folder, kept only on a problem
    )
    report = asyncio.run(soak.run_soak(config))
    figures = json.dumps(dataclasses.asdict(report), indent=1, default=str)

    assert report.submitted == JOBS
    assert report.lost == 0, figures
    assert report.failed == 0, figures
    assert report.stored == JOBS, figures
    # One PDF and one record per job: the listings hold no more, no less.
    assert (report.pdf_blobs, report.result_blobs) == (JOBS, JOBS), figures
    assert report.mismatched == 0 and report.pdfs_invalid == 0, figures
    assert report.left_in_queue == 0 and report.poisoned == 0, figures
    assert report.zombies == [], figures
    assert report.leftover == [], figures
    assert {kind: count > 0 for kind, count in report.faults.items()} == dict.fromkeys(
        soak.FAULT_KINDS, True
    ), figures
    # Recycling happened, and the browsers stayed under the cap.
    recycles = sum(
        value
        for key, value in report.renderer_counters.items()
        if key.startswith("reportfarm_browser_recycles")
    )
    assert recycles > 0, figures
    assert 0 < report.peak_browser_mib <= report.recycle_cap_mib, figures
    assert report.operator is not None and report.operator["converged"], figures
    assert report.operator["scaled_to_zero_with_work"] == 0, figures
    assert report.problems() == [], figures
