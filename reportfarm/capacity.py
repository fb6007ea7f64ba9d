"""Capacity that counts finishing: how many browsers a pod's CPUs can keep busy when a job needs
CPU besides its print (PDF/A, Factur-X, a signature: ``reportfarm_stage_cpu_seconds`` in the
renderer's finishing processes).

The policy sizes pools in browsers: a busy browser completes a job every ``render_s``. A job that
is also finished needs ``job_cpu_s`` of CPU in its pod end to end (the print's share and the
finishing stages'), so a busy browser's stream of jobs needs ``job_cpu_s / render_s`` cores,
which may be more than the ``browser_cpu`` the spec assumes for a print alone. :func:`sized`
gives the policy a spec whose ``browser_cpu`` is that need, so ``browsers_that_fit`` is what the
pod's CPUs hold, and a farm that signs everything gets more pods of fewer browsers, not browsers
that wait for CPU. Pure, like the policy: the figures come in with the observation.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reportfarm.policy import Observation, PoolSpec


def browser_cpu(*, job_cpu_s: float, render_s: float) -> float:
    """Cores one busy browser's jobs need end to end (print and finishing)."""
    return job_cpu_s / render_s


SIGNING_FINISH_CPU_S = 0.35
"""A job's finishing CPU a pool with a signing key is sized with before its renderers report one
(``PoolSpec.expected_finish_cpu_s``, the ReportPool's ``finishing.expectedCpuSeconds``). High on
purpose: the most the operator read on the real node for signed PDF/A-3 Factur-X invoices with a
visible stamp on a 1-CPU pod (0.35-0.53 s, a stamp in CJK before its face was parsed once per
process; 0.07 s since, docs/benchmarks/einvoice.md). Too high costs a new pool fewer browsers a
pod (and more pods) until its first job's finishing ends, seconds in; too low, browsers that
compete for the CPU with the finishing processes still starting, which is what a signing pool's
first seconds suffered. The renderers' figures replace it: their start-up signature's (a
blank page signed in each finishing process, on the pod's own CPU: 0.05 s on the node's pods)
from the first reading of a pod whose processes are up (``policy.remembered``; a signing pod
is ready only then), a job's finishing CPU from the first job that ended."""


def sized(spec: PoolSpec, observation: Observation, *, render_s: float | None) -> PoolSpec:
    """``spec`` with ``browser_cpu`` raised to what a busy browser's jobs need in CPU when the
    renderers reported it (``observation.job_cpu_s`` or ``finish_cpu_s``), at most the pod's
    CPU (then :func:`service_s` stretches the time a job takes); else ``spec`` as it is."""
    render_s = render_s or spec.default_render_s
    return _raised(spec, _job_cpu_s(spec, observation, render_s=render_s), render_s=render_s)


def expected(spec: PoolSpec) -> PoolSpec:
    """``spec`` as :func:`sized` makes it with the spec's expected finishing CPU and its default
    render time, before anything is measured: what a new pod's pool starts with."""
    finish = spec.expected_finish_cpu_s
    if not finish:
        return spec
    render_s = spec.default_render_s
    return _raised(spec, spec.browser_cpu * render_s + finish, render_s=render_s)


def _raised(spec: PoolSpec, job_cpu_s: float | None, *, render_s: float) -> PoolSpec:
    if job_cpu_s is None or job_cpu_s <= 0 or render_s <= 0:
        return spec
    need = browser_cpu(job_cpu_s=job_cpu_s, render_s=render_s)
    if need <= spec.browser_cpu:
        return spec
    return dataclasses.replace(spec, browser_cpu=min(need, spec.pod_cpu))


def service_s(spec: PoolSpec, observation: Observation, *, render_s: float | None) -> float | None:
    """The time a browser's job holds its share of the pod: ``render_s``, or, when one busy
    browser's jobs need more CPU than the whole pod has, the pod's CPU time per job
    (``job_cpu_s / pod_cpu``): a light print that signs (35 ms to print, 0.35 s of CPU to finish
    on the real node) is done at the pod's CPU rate, not its browser's. ``spec``: before
    :func:`sized`."""
    if render_s is None or render_s <= 0:
        return render_s
    job_cpu_s = _job_cpu_s(spec, observation, render_s=render_s)
    if job_cpu_s is None:
        return render_s
    return max(render_s, job_cpu_s / spec.pod_cpu)


def _job_cpu_s(spec: PoolSpec, observation: Observation, *, render_s: float) -> float | None:
    """The observation's job CPU; else its print at ``spec.browser_cpu`` plus its finishing."""
    if observation.job_cpu_s is not None:
        return observation.job_cpu_s
    if observation.finish_cpu_s is None:
        return None
    return spec.browser_cpu * render_s + observation.finish_cpu_s


JOB_CPU_MIN_JOBS = 20
"""Fewer jobs ended since the last reading than this: a job's finishing CPU comes from the pods'
lifetimes (a new pod's first jobs carry its finishing processes' warm-up: on the real node a few
jobs read 0.06 to 1.4 s a job within 10 s, and the pool's browsers flapped 1 -> 2 -> 1)."""


def finish_cpu_s(
    *,
    recent: tuple[float, float],
    lifetime: tuple[float, float],
    finishing: int = 0,
    signature_cpu_s: float | None = None,
) -> float | None:
    """CPU seconds of a job's finishing stages from the renderers' counters, each a pair (CPU
    seconds, jobs ended) summed over the pods read: over the last interval when
    ``JOB_CPU_MIN_JOBS`` jobs ended in it, else over the pods' lifetimes. Per job ended, not per
    render: a job's finishing ends after its render (seconds after it in a burst, the jobs
    waiting for a finishing process), so per render a signing farm's first seconds read 0 and
    were sized as a printing one's.

    Before any job ended: while ``finishing`` jobs are in the pods' finishing processes, the
    CPU their start-up signature took (``signature_cpu_s``, the renderers' measure, a lower
    bound of a signing job's), so a signing farm's first burst is not sized as a printing one's
    for the seconds until its first job is stored; else None. The operator and the simulator
    both read it so."""
    for (cpu, jobs), least in ((recent, JOB_CPU_MIN_JOBS), (lifetime, 1)):
        if jobs >= least:
            return float(cpu / jobs)
    if finishing > 0 and signature_cpu_s:
        return float(signature_cpu_s)
    return None


def busy_browsers(*, size: int, busy: int, finishing: int) -> int:
    """Browsers a pod's jobs hold: those printing (``busy``) and those in its finishing
    processes (out of their browsers, still on the pod's CPU), at most its pool's ``size``
    (never fewer than it said printing)."""
    return min(max(size, busy), busy + finishing)


def job_cpu_s(*, print_cpu_s: float, finish_cpu_s: float, jobs: float) -> float | None:
    """CPU seconds per job end to end, from counters over an interval: the print's CPU (the
    browsers' and the renderer's) and the finishing stages' (``reportfarm_stage_cpu_seconds``),
    over the jobs completed; None without jobs."""
    if jobs <= 0:
        return None
    return (print_cpu_s + finish_cpu_s) / jobs
