"""The benchmark's CPU accounting, on real processes: each component by its command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from reportfarm_bench import cpu

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"


def burn_as(name: str) -> None:
    """A child that burns 0.4 s of CPU with ``name`` as its program (``exec -a``), then exits
    and is reaped by this process."""
    command = f'exec -a {name} "{sys.executable}" -c "$BURN"'
    subprocess.run(["bash", "-c", command], env={"BURN": BURN}, check=True, timeout=60)


@pytest.mark.parametrize(
    ("program", "component"),
    [
        ("chromium", "chromium"),
        ("node-azurite", "azurite"),
        ("node", "driver"),
        ("python3 -m reportfarm.cli worker", "renderer"),
    ],
)
def test_a_live_child_counts_under_its_component(program: str, component: str) -> None:
    # the child runs under a parent of its own, and only that parent's tree is sampled: other
    # tests' processes still alive under pytest (a Playwright driver, an Azurite) are not its
    run_child = "import subprocess, sys; subprocess.run(sys.argv[1:])"
    child = f'exec -a "{program}" "{sys.executable}" -c "$BURN"; sleep 30'
    parent = subprocess.Popen(
        [sys.executable, "-c", run_child, "bash", "-c", child],
        env={"BURN": BURN + "\nimport time; time.sleep(30)"},
        start_new_session=True,
    )
    try:
        before = cpu.sample(parent.pid)
        while cpu.spent(before, cpu.sample(parent.pid))[component] < 0.3:
            assert parent.poll() is None, "the child ended before it burned its CPU"
        others = cpu.spent(before, cpu.sample(parent.pid))
        assert others[component] >= 0.3
        for name in cpu.COMPONENTS:
            if name not in (component, "python"):
                assert others[name] < 0.3, others
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def test_this_process_does_not_count_the_children_it_reaped() -> None:
    before = cpu.sample()
    burn_as("chromium")
    after = cpu.spent(before, cpu.sample())
    assert after["chromium"] == 0.0  # a child of the bench that exited: gone from /proc
    assert after["python"] < 0.3  # and not folded into the renderer's own time


def test_per_pdf_divides_and_totals() -> None:
    spent = {"chromium": 2.0, "driver": 0.1, "renderer": 0.15, "python": 0.3, "azurite": 0.2}
    shares = cpu.per_pdf(spent, 10)
    assert shares == {
        "chromium": 200.0,
        "driver": 10.0,
        "renderer": 15.0,
        "python": 30.0,
        "azurite": 20.0,
        "total": 275.0,
    }
    assert cpu.per_pdf({}, 0) == {}
