#!/usr/bin/env python3
"""Soak with faults: thousands of jobs through a real farm while its parts are killed.

    python scripts/soak.py [--jobs N] [--workers W] [--seconds S] [--seed N] [--json]
                           [--with-operator] [--keep]

What runs, all on loopback:
- Azurite **on disk** (a temporary folder), so a restart keeps the queue and the blobs;
- W ``reportfarm worker`` processes (real Chromium; a short visibility timeout, so a killed job
  comes back within seconds; a browser recycled every few jobs);
- with ``--with-operator``: a Kubernetes control plane (``tests/harness/kube.py``) and
  ``reportfarm operator`` managing a ReportPool whose queue is the soak's queue. Its pods are kwok
  fakes: the operator's decisions do not reach the local workers, so what is checked is the
  operator itself: it survives kill -9, converges (a decision, QueueReachable True) and never
  scales to zero while work is queued, not even while Azurite is down.

Faults, at random (seeded), while the jobs run: ``worker_kill`` (kill -9 of a worker's process
group, then a replacement, as when a container dies), ``chromium_kill`` (SIGKILL of one Chromium
process: a browser or one of its renderer processes), ``azurite_restart`` (stop, a few seconds
down, start on the same ports), ``pool_resize`` (``PUT /pool``) and ``operator_restart`` (kill -9,
start again). ``forced`` kinds are injected once each first: the CI run's guarantee.

At the end: every job has exactly one PDF and one final result record (the blob listing counts
them), none is lost, redeliveries (records with ``attempts`` > 1) are counted and their outputs
checked, no zombie is left among the children of anything started here, no process started here
survives, and the browsers' peak memory (the renderers' gauge, and /proc sampled here) stays under
the recycle cap. Every process started here carries ``REPORTFARM_SOAK_RUN=<run id>`` in its
environment, which is how the scans tell ours from the machine's other processes.
Exit status 1 when a problem is found (lost, failed, duplicate or mismatched outputs, zombies,
leftover processes, an operator that did not converge).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pypdf
from azure.storage.blob.aio import ContainerClient
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from reportfarm import azurite, contract
from reportfarm.client import ReportFarmClient, Submission

ROOT = Path(__file__).resolve().parents[1]
TAG = "REPORTFARM_SOAK_RUN"
FAULT_KINDS = ("worker_kill", "chromium_kill", "azurite_restart", "pool_resize", "operator_restart")
_WEIGHTS = {"chromium_kill": 2, "pool_resize": 2}
"""Relative frequency of the random faults (the others weigh 1)."""
_MARKER = "--reportfarm-worker="
"""The switch every browser of a renderer carries in its command line (see browser.py)."""
MiB = 2**20


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoakConfig:
    jobs: int = 2000
    """Jobs to submit (the example reports of ``examples/data/batch.jsonl``, round robin)."""
    workers: int = 2
    """Worker processes running at any time (a killed one is replaced)."""
    seconds: float = 3600.0
    """Deadline for the whole run; a job without a result by then counts as lost."""
    seed: int = 1
    """Seeds every random choice: the faults, their targets, the PDFs sampled."""
    with_operator: bool = False
    """Also run the operator on a local control plane and restart it as a fault."""
    pool_sizes: tuple[int, int] = (1, 2)
    """Each worker starts with the larger size; a resize picks another size in this range."""
    fault_gap_s: tuple[float, float] = (5.0, 15.0)
    """Seconds between two faults, drawn uniformly."""
    azurite_down_s: tuple[float, float] = (2.0, 5.0)
    """Seconds Azurite stays down on a restart, drawn uniformly."""
    forced: tuple[str, ...] = ()
    """Fault kinds injected once each (in a seeded order) before the random ones."""
    visibility_timeout: int = 10
    """REPORTFARM_VISIBILITY_TIMEOUT: a killed worker's jobs come back after this long."""
    recycle_after_jobs: int = 20
    """REPORTFARM_RECYCLE_AFTER_JOBS: small, so recycling happens many times."""
    recycle_rss_mb: int = 700
    """REPORTFARM_RECYCLE_RSS_MB: the memory cap a browser must stay under."""
    workdir: Path | None = None
    """Logs and Azurite's data; default: a temporary folder, removed after a clean run."""
    keep: bool = False
    """Keep the work folder even after a clean run."""
    progress: bool = True
    """A progress line on stderr every few seconds."""

    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in FAULT_KINDS if self.with_operator or k != "operator_restart")


@dataclasses.dataclass
class SoakReport:
    submitted: int = 0
    stored: int = 0
    """Jobs with a succeeded record whose PDF exists with the recorded size."""
    lost: int = 0
    """Jobs with neither a PDF nor a failed record at the end."""
    failed: int = 0
    failed_reasons: list[str] = dataclasses.field(default_factory=list)
    redelivered: int = 0
    """Jobs whose final record says ``attempts`` > 1 (at-least-once at work)."""
    max_attempts: int = 0
    pdf_blobs: int = 0
    result_blobs: int = 0
    mismatched: int = 0
    """Succeeded records whose PDF is missing, misnamed or not of the recorded size."""
    pdfs_checked: int = 0
    pdfs_invalid: int = 0
    poisoned: int = 0
    left_in_queue: int = 0
    faults: dict[str, int] = dataclasses.field(default_factory=dict)
    fault_log: list[str] = dataclasses.field(default_factory=list)
    fault_errors: list[str] = dataclasses.field(default_factory=list)
    peak_browser_mib: float = 0.0
    """Max of ``reportfarm_browser_memory_bytes{stat="max"}`` over every scrape."""
    peak_browser_proc_mib: float = 0.0
    """Max PSS of one browser's process tree, sampled from /proc here."""
    recycle_cap_mib: float = 0.0
    renderer_counters: dict[str, float] = dataclasses.field(default_factory=dict)
    """Recycles, restarts and job outcomes summed over every worker (killed ones: until their
    last scrape)."""
    workers_started: int = 0
    workers_crashed: list[str] = dataclasses.field(default_factory=list)
    """Workers that exited on their own (not killed by a fault): each replaced."""
    zombies: list[str] = dataclasses.field(default_factory=list)
    """Zombies among our processes' children at the end, the farm still running."""
    zombies_lingering: list[str] = dataclasses.field(default_factory=list)
    """Zombies seen in two samples in a row (2 s apart) during the run: not reaped promptly."""
    strays: list[str] = dataclasses.field(default_factory=list)
    """Our processes no longer under this one while the farm ran: Chromium's crash handler
    (it detaches by design), or orphans of a kill. Reported; a problem only if still alive at
    the end (``leftover``)."""
    leftover: list[str] = dataclasses.field(default_factory=list)
    operator: dict[str, Any] | None = None
    duration_s: float = 0.0
    workdir: str | None = None

    def problems(self) -> list[str]:
        found = []
        checks = {
            "lost jobs": self.lost,
            "failed jobs": self.failed,
            "mismatched outputs": self.mismatched,
            "invalid PDFs": self.pdfs_invalid,
            "duplicate or missing PDFs": abs(self.pdf_blobs - self.submitted),
            "duplicate or missing result records": abs(self.result_blobs - self.submitted),
            "zombies": len(self.zombies),
            "leftover processes": len(self.leftover),
            "workers that exited on their own": len(self.workers_crashed),
            "messages left in the queue": self.left_in_queue,
            "browser memory over the recycle cap": self.peak_browser_mib > self.recycle_cap_mib,
        }
        found += [f"{name}: {count}" for name, count in checks.items() if count]
        if self.operator is not None and not self.operator.get("converged"):
            found.append(f"operator: {self.operator.get('problem')}")
        return found


# -- processes ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    comm: str


def processes() -> dict[int, Proc]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                head, tail = file.read().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        fields = tail.split()
        found[int(entry)] = Proc(int(entry), int(fields[1]), fields[0], head.split("(", 1)[1])
    return found


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return b""


def cmdline(pid: int) -> str:
    return _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")


def is_ours(pid: int, run_id: str) -> bool:
    return f"{TAG}={run_id}".encode() + b"\0" in _read(f"/proc/{pid}/environ")


def descendants(root: int, procs: dict[int, Proc]) -> set[int]:
    children: dict[int, list[int]] = collections.defaultdict(list)
    for proc in procs.values():
        children[proc.ppid].append(proc.pid)
    found, stack = set(), [root]
    while stack:
        found.add(current := stack.pop())
        stack.extend(children.get(current, ()))
    return found


def browsers(root: int, procs: dict[int, Proc]) -> list[int]:
    """The browser processes (the ones carrying the marker) under ``root``."""
    return [pid for pid in descendants(root, procs) if _MARKER in cmdline(pid)]


def tree_pss(root: int, procs: dict[int, Proc]) -> int:
    total = 0
    for pid in descendants(root, procs):
        for line in _read(f"/proc/{pid}/smaps_rollup").decode(errors="replace").splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
    return total


def describe(proc: Proc) -> str:
    return f"pid {proc.pid} {proc.comm} state {proc.state} parent {proc.ppid}"


def zombies(run_id: str) -> list[str]:
    """Zombies whose parent is this process or one we started: a child nobody reaps."""
    return [
        describe(proc)
        for proc in processes().values()
        if proc.state == "Z" and (proc.ppid == os.getpid() or is_ours(proc.ppid, run_id))
    ]


def strays(run_id: str) -> list[str]:
    """Our processes that are no longer descendants of this one (orphans re-parented)."""
    procs = processes()
    mine = descendants(os.getpid(), procs)
    return [
        describe(proc)
        for proc in procs.values()
        if proc.pid not in mine and proc.state != "Z" and is_ours(proc.pid, run_id)
    ]


def leftovers(run_id: str, *, wait_s: float = 15.0) -> list[str]:
    """Our processes still alive once everything was stopped (given ``wait_s`` to exit)."""
    deadline = time.monotonic() + wait_s
    while True:
        procs = processes()
        alive = [
            f"{describe(p)}: {cmdline(p.pid)[:160]}"
            for p in procs.values()
            if p.state != "Z" and p.pid != os.getpid() and is_ours(p.pid, run_id)
        ]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


@contextlib.contextmanager
def tagged(run_id: str) -> Iterator[None]:
    """Children started meanwhile inherit the run's tag (for classes that take no ``env``)."""
    previous = os.environ.get(TAG)
    os.environ[TAG] = run_id
    try:
        yield
    finally:
        if previous is None:
            del os.environ[TAG]
        else:
            os.environ[TAG] = previous


def stop_process(process: subprocess.Popen[bytes], *, grace: float) -> None:
    """SIGTERM to the main process (as Kubernetes sends it), SIGKILL to the group after
    ``grace`` seconds; reaped either way."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# -- the farm ----------------------------------------------------------------------------------


class Worker:
    """One ``reportfarm worker`` process in its own process group, as a pod runs it."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.port = azurite.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.killed = False
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reportfarm.cli", "worker"],
                env={**env, "REPORTFARM_PORT": str(self.port), "REPORTFARM_WORKER_ID": name},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=ROOT,
            )

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """kill -9 of the process group (Playwright's driver dies with it), then reap."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class Farm:
    """Azurite on disk and the worker processes."""

    def __init__(self, config: SoakConfig, workdir: Path, run_id: str) -> None:
        self.config, self.workdir, self.run_id = config, workdir, run_id
        self.data = workdir / "azurite"
        self.azurite = azurite.Azurite(location=self.data)
        self.queue, self.container = "soak", "soak"
        self.workers: list[Worker] = []
        self.started = 0

    def start_azurite(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        for attempt in range(5):
            try:
                with tagged(self.run_id):
                    self.azurite.start()
                return
            except azurite.AzuriteError:
                if attempt == 4:
                    raise
                time.sleep(1)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            TAG: self.run_id,
            "AZURE_STORAGE_CONNECTION_STRING": self.azurite.connection_string,
            "REPORTFARM_QUEUE": self.queue,
            "REPORTFARM_CONTAINER": self.container,
            "REPORTFARM_TEMPLATES": str(ROOT / "examples" / "templates"),
            "REPORTFARM_POOL_SIZE": str(self.config.pool_sizes[1]),
            "REPORTFARM_VISIBILITY_TIMEOUT": str(self.config.visibility_timeout),
            "REPORTFARM_RECYCLE_AFTER_JOBS": str(self.config.recycle_after_jobs),
            "REPORTFARM_RECYCLE_RSS_MB": str(self.config.recycle_rss_mb),
            "REPORTFARM_POLL_MAX_S": "0.5",
            "REPORTFARM_DRAIN_TIMEOUT": "10",
            "REPORTFARM_LOG_FORMAT": "json",
        }

    def start_worker(self) -> Worker:
        self.started += 1
        name = f"w{self.started}"
        worker = Worker(name, self.env(), self.workdir / f"worker-{name}.log")
        self.workers.append(worker)
        return worker

    def live_workers(self) -> list[Worker]:
        return [worker for worker in self.workers if worker.alive]

    def replace_dead(self) -> list[str]:
        """Workers that exited without being killed here (a crash): replaced, and reported."""
        dead = [w for w in self.workers if not w.killed and not w.alive]
        for worker in dead:
            worker.killed = True  # reported once
            self.start_worker()
        return [f"{w.name} exited with {w.process.returncode}" for w in dead]

    def stop_workers(self) -> None:
        for worker in self.workers:
            stop_process(worker.process, grace=30)


# -- the operator (optional) -------------------------------------------------------------------


class OperatorRig:
    """A local control plane, a ReportPool on the soak's queue, and ``reportfarm operator``."""

    NAMESPACE = "soak"
    POOL = "soak"

    def __init__(self, farm: Farm) -> None:
        self.farm = farm
        self.workdir = farm.workdir / "kube"
        self.plane: Any = None
        self.process: subprocess.Popen[bytes] | None = None
        self.restarted_at = 0.0
        self.restarts = 0
        self.observations = 0
        self.violations: list[str] = []
        self.unreachable_seen = 0
        self.ran_pods = False
        """Whether the pool has had pods: an unreadable queue keeps the size, so a pool whose first
        decisions came while the queue was unreadable stays at the 0 it never left."""

    def start(self) -> None:
        if str(ROOT) not in sys.path:  # `python scripts/soak.py`: the test harness is not installed
            sys.path.insert(0, str(ROOT))
        from tests.harness import kube as kube_harness

        bin_dir = kube_harness.bin_dir()
        with tagged(self.farm.run_id):
            self.plane = kube_harness.ControlPlane(bin_dir, workdir=self.workdir).start()
        self.plane.add_node("kwok-soak", cpu="16", memory="64Gi")
        kubectl = [str(bin_dir / "kubectl"), f"--kubeconfig={self.plane.kubeconfig}"]
        crd = ROOT / "crds" / "reportpools.reportfarm.io.yaml"
        for args in (
            ["apply", "--server-side", "-f", str(crd)],
            [
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/reportpools.reportfarm.io",
            ],
        ):
            subprocess.run([*kubectl, *args], check=True, capture_output=True, timeout=120)
        self.plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": self.NAMESPACE}})
        secret = {
            "metadata": {"name": "storage"},
            "stringData": {"connection-string": self.farm.azurite.connection_string},
        }
        self.plane.request("POST", f"/api/v1/namespaces/{self.NAMESPACE}/secrets", secret)
        self._create_pool()
        self.launch()

    def _pool_path(self) -> str:
        return f"/apis/reportfarm.io/v1alpha1/namespaces/{self.NAMESPACE}/reportpools"

    def _create_pool(self) -> None:
        body = {
            "apiVersion": "reportfarm.io/v1alpha1",
            "kind": "ReportPool",
            "metadata": {"name": self.POOL},
            "spec": {
                "queue": {"name": self.farm.queue, "connectionSecretRef": {"name": "storage"}},
                "image": "reportfarm/renderer:soak",
                "templates": {"inline": {"hello.html": "<h1>{{ name }}</h1>"}},
                "replicas": {"min": 0, "max": 4},
                "browsersPerPod": {"min": 1, "max": 2},
                "scaleDown": {"stabilizationSeconds": 10},
                "scaleToZero": {"idleSeconds": 20},
            },
        }
        deadline = time.monotonic() + 30
        while True:  # just after Established, the resource may answer 404 for a moment
            try:
                self.plane.request("POST", self._pool_path(), body)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def launch(self) -> None:
        env = {
            **os.environ,
            TAG: self.farm.run_id,
            "KUBECONFIG": str(self.plane.kubeconfig),
            "REPORTFARM_OPERATOR_METRICS_PORT": "0",
            "REPORTFARM_OPERATOR_HEALTH_PORT": "0",
            "REPORTFARM_OPERATOR_POD_TIMEOUT": "1",
            "REPORTFARM_LOG_FORMAT": "json",
        }
        with (self.farm.workdir / "operator.log").open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reportfarm.cli", "operator", "-n", self.NAMESPACE],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=ROOT,
            )
        self.restarted_at = time.time()

    def restart(self) -> str:
        assert self.process is not None
        pid = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        self.process.wait()
        self.restarts += 1
        self.launch()
        return f"operator pid {pid}"

    def status(self) -> dict[str, Any]:
        pool = self.plane.request("GET", f"{self._pool_path()}/{self.POOL}")
        return dict(pool.get("status") or {})

    def observe(self, pending: int) -> None:
        """One look at the status: scaled to zero while the operator saw work queued, or (from
        pods it had) while the queue was unreadable and work was pending, is a violation."""
        status = self.status()
        if "lastDecision" not in status:
            return
        self.observations += 1
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        reachable = conditions.get("QueueReachable", {}).get("status") == "True"
        self.unreachable_seen += not reachable
        depth = status.get("queueDepth")
        self.ran_pods = self.ran_pods or (status.get("replicas") or 0) > 0
        blind_to_zero = not reachable and pending > 0 and self.ran_pods
        if status.get("replicas") == 0 and ((depth or 0) > 0 or blind_to_zero):
            decision = status["lastDecision"]
            self.violations.append(
                f"replicas 0 at {decision.get('time')} ({decision.get('reason')}): "
                f"queue depth {depth}, {pending} jobs pending"
            )

    def verdict(self, *, timeout: float = 120.0) -> dict[str, Any]:
        """Wait for a decision made after the last restart with the queue reachable."""
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = self.status()
            conditions = {c["type"]: c for c in status.get("conditions") or []}
            decided = status.get("lastDecision", {}).get("time", "")
            fresh = decided >= time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.restarted_at))
            if fresh and conditions.get("QueueReachable", {}).get("status") == "True":
                break
            time.sleep(2)
        else:
            return self._summary(status, problem="no fresh decision with the queue reachable")
        problem = "; ".join(self.violations[:3]) if self.violations else None
        return self._summary(status, problem=problem)

    def _summary(self, status: dict[str, Any], *, problem: str | None) -> dict[str, Any]:
        decision = status.get("lastDecision") or {}
        return {
            "converged": problem is None,
            "problem": problem,
            "restarts": self.restarts,
            "observations": self.observations,
            "observed_queue_unreachable": self.unreachable_seen,
            "scaled_to_zero_with_work": len(self.violations),
            "last_decision": f"{decision.get('reason')}: {decision.get('message')}",
            "replicas": status.get("replicas"),
            "queue_depth": status.get("queueDepth"),
        }

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, grace=20)
        if self.plane is not None:
            self.plane.stop()


# -- faults ------------------------------------------------------------------------------------


class Faults:
    """Injects one fault every few seconds until stopped; a fault in progress always finishes
    (Azurite is never left down)."""

    def __init__(
        self, farm: Farm, config: SoakConfig, rng: random.Random, rig: OperatorRig | None
    ) -> None:
        self.farm, self.config, self.rng, self.rig = farm, config, rng, rig
        self.counts: collections.Counter[str] = collections.Counter()
        self.log: list[str] = []
        self.errors: list[str] = []
        self.started = time.monotonic()
        self.plan = [kind for kind in config.forced if kind in config.kinds()]
        """Forced kinds not injected yet, in a seeded order."""
        rng.shuffle(self.plan)
        self.forced_done = asyncio.Event()
        """Set once every forced kind was injected (at once when none is)."""
        if not self.plan:
            self.forced_done.set()
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        kinds = self.config.kinds()
        plan = self.plan
        weights = [_WEIGHTS.get(kind, 1) for kind in kinds]
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                gap = self.rng.uniform(*self.config.fault_gap_s)
                await asyncio.wait_for(self._stop.wait(), timeout=gap)
            if self._stop.is_set():
                return
            kind = plan.pop(0) if plan else self.rng.choices(kinds, weights)[0]
            try:
                detail = await getattr(self, kind)()
            except Exception as error:
                self.errors.append(f"{kind}: {type(error).__name__}: {error}"[:300])
                detail = None
            if detail is None:
                if kind in self.config.forced and not self.counts[kind]:
                    plan.insert(0, kind)  # no target yet (browsers starting): try again
                continue
            self.counts[kind] += 1
            self.log.append(f"{time.monotonic() - self.started:7.1f}s {kind}: {detail}")
            if not plan:
                self.forced_done.set()

    def _live(self) -> list[Worker]:
        return self.farm.live_workers()

    async def worker_kill(self) -> str | None:
        live = self._live()
        if not live:
            return None
        victim = self.rng.choice(live)
        await asyncio.to_thread(victim.kill)
        replacement = self.farm.start_worker()
        return f"{victim.name} (pid {victim.process.pid}) killed, {replacement.name} started"

    async def chromium_kill(self) -> str | None:
        procs = await asyncio.to_thread(processes)
        found = [pid for worker in self._live() for pid in browsers(worker.process.pid, procs)]
        if not found:
            return None
        browser = self.rng.choice(sorted(found))
        target, what = browser, "browser"
        if self.rng.random() < 0.5:
            renderers = [
                pid for pid in descendants(browser, procs) if "--type=renderer" in cmdline(pid)
            ]
            if renderers:
                target, what = self.rng.choice(sorted(renderers)), "renderer process"
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            return None  # it ended meanwhile (recycled): not a fault injected
        return f"{what} pid {target} (browser {browser})"

    async def azurite_restart(self) -> str:
        down = self.rng.uniform(*self.config.azurite_down_s)
        await asyncio.to_thread(self.farm.azurite.stop)
        await asyncio.sleep(down)
        await asyncio.to_thread(self.farm.start_azurite)
        return f"down {down:.1f} s"

    async def pool_resize(self) -> str | None:
        live = self._live()
        if not live:
            return None
        worker = self.rng.choice(live)
        low, high = self.config.pool_sizes
        timeout = aiohttp.ClientTimeout(total=5)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http:
                async with http.get(f"{worker.url}/pool") as response:
                    size = (await response.json())["size"]
                choices = [n for n in range(low, high + 1) if n != size] or [size]
                wanted = self.rng.choice(choices)
                async with http.put(f"{worker.url}/pool", json={"size": wanted}) as response:
                    response.raise_for_status()
        except (aiohttp.ClientError, TimeoutError):
            return None  # still starting, or draining: not a fault injected
        return f"{worker.name} {size} -> {wanted}"

    async def operator_restart(self) -> str | None:
        if self.rig is None:
            return None
        return await asyncio.to_thread(self.rig.restart)


# -- sampling ----------------------------------------------------------------------------------


class Sampler:
    """Scrapes every live worker's /metrics and the browsers' memory in /proc; looks at the
    operator's status. Counters are kept per worker (a killed one keeps its last scrape)."""

    def __init__(self, farm: Farm, rig: OperatorRig | None, pending: Callable[[], int]) -> None:
        self.farm, self.rig, self.pending = farm, rig, pending
        self.latest: dict[str, dict[str, float]] = {}
        self.peak_gauge = 0.0
        self.peak_proc = 0
        self.lingering: set[str] = set()
        self._zombies: set[str] = set()
        self.crashed: list[str] = []
        self.errors: list[str] = []
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self, every: float = 2.0) -> None:
        timeout = aiohttp.ClientTimeout(total=3)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            while not self._stop.is_set():
                await self.sample(http)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=every)

    async def sample(self, http: aiohttp.ClientSession) -> None:
        self.crashed += self.farm.replace_dead()
        for worker in self.farm.live_workers():
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(f"{worker.url}/metrics") as response:
                    self._read_metrics(worker.name, await response.text())
        self.peak_proc = max(self.peak_proc, await asyncio.to_thread(self._browser_memory))
        seen = set(await asyncio.to_thread(zombies, self.farm.run_id))
        self.lingering |= seen & self._zombies
        self._zombies = seen
        if self.rig is not None:
            try:
                await asyncio.to_thread(self.rig.observe, self.pending())
            except Exception as error:  # the API server is not what the soak tests
                self.errors.append(f"operator status: {error}"[:200])

    def _read_metrics(self, worker: str, text: str) -> None:
        wanted = ("reportfarm_browser_recycles", "reportfarm_browser_restarts", "reportfarm_jobs")
        counters = self.latest.setdefault(worker, {})
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "reportfarm_browser_memory_bytes":
                    if sample.labels.get("stat") == "max":
                        self.peak_gauge = max(self.peak_gauge, sample.value)
                elif family.name in wanted and sample.name.endswith("_total"):
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    counters[f"{family.name}{{{labels}}}"] = sample.value

    def _browser_memory(self) -> int:
        procs = processes()
        sizes = [
            tree_pss(browser, procs)
            for worker in self.farm.live_workers()
            for browser in browsers(worker.process.pid, procs)
        ]
        return max(sizes, default=0)

    def totals(self) -> dict[str, float]:
        summed: collections.Counter[str] = collections.Counter()
        for counters in self.latest.values():
            summed.update(counters)
        return dict(sorted(summed.items()))


# -- the run -----------------------------------------------------------------------------------


def submissions(count: int) -> list[Submission]:
    """``count`` jobs cycling through the example batch (achievement and outlook reports)."""
    lines = (ROOT / "examples" / "data" / "batch.jsonl").read_text(encoding="utf-8").splitlines()
    bodies = [json.loads(line) for line in lines if line.strip()]
    return [
        Submission(
            template=bodies[i % len(bodies)]["template"],
            data=bodies[i % len(bodies)]["data"],
            job_id=f"soak-{i:06d}",
        )
        for i in range(count)
    ]


class Progress:
    def __init__(self, enabled: bool, started: float) -> None:
        self.enabled, self.started, self.last = enabled, started, 0.0

    def say(self, message: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.enabled and (force or now - self.last >= 10):
            self.last = now
            print(f"[soak {now - self.started:6.0f}s] {message}", file=sys.stderr, flush=True)


async def wait_for_results(
    client: ReportFarmClient,
    job_ids: list[str],
    *,
    deadline: float,
    on_count: Callable[[int], None],
) -> set[str]:
    """Poll the result listing (one request, not a read per job) until every job has one."""
    wanted, found = set(job_ids), set[str]()
    while time.monotonic() < deadline:
        try:
            names = await client.blobs.list("results/")
        except Exception:  # Azurite restarting: ask again
            names = None
        if names is not None:
            found = {name.removeprefix("results/").removesuffix(".json") for name in names}
            found &= wanted
            on_count(len(found))
            if found == wanted:
                break
        await asyncio.sleep(2)
    return found


async def wait_for_empty_queues(client: ReportFarmClient, *, deadline: float) -> int:
    """Redeliveries of finished jobs still run; wait until no message is left (visible or not)."""
    left = -1
    while time.monotonic() < deadline:
        try:
            left = sum(status.depth for status in await client.status())
        except Exception:
            left = -1
        if left == 0:
            return 0
        await asyncio.sleep(2)
    return max(left, 0)


async def verify(
    client: ReportFarmClient, farm: Farm, job_ids: list[str], report: SoakReport, rng: random.Random
) -> None:
    """One PDF and one record per job, the PDF of the recorded size; a sample of PDFs parsed."""
    sizes = await _pdf_sizes(farm)
    report.pdf_blobs = len(sizes)
    report.result_blobs = len(await client.blobs.list("results/"))
    semaphore = asyncio.Semaphore(32)

    async def read(job_id: str) -> contract.ResultRecord | None:
        async with semaphore:
            return await client.result(job_id)

    records = await asyncio.gather(*(read(job_id) for job_id in job_ids))
    stored = []
    for job_id, record in zip(job_ids, records, strict=True):
        if record is None:
            continue
        report.max_attempts = max(report.max_attempts, record.attempts)
        report.redelivered += record.attempts > 1
        if record.state == "failed":
            report.failed += 1
            report.failed_reasons.append(f"{job_id}: {record.error}")
            continue
        expected = contract.default_output_blob(job_id)
        if record.output_blob == expected and sizes.get(expected) == record.output_bytes:
            stored.append(record)
        else:
            report.mismatched += 1
    report.stored = len(stored)
    report.lost = report.submitted - report.stored - report.failed
    report.poisoned = sum(status.poison_depth for status in await client.status())
    for record in rng.sample(stored, min(20, len(stored))):
        report.pdfs_checked += 1
        try:
            reader = pypdf.PdfReader(io.BytesIO(await client.download(record)))
            report.pdfs_invalid += len(reader.pages) == 0
        except Exception:
            report.pdfs_invalid += 1


async def _pdf_sizes(farm: Farm) -> dict[str, int]:
    async with ContainerClient.from_connection_string(
        farm.azurite.connection_string, farm.container
    ) as container:
        return {
            blob.name: int(blob.size or 0)
            async for blob in container.list_blobs(name_starts_with="pdf/")
        }


async def run_soak(config: SoakConfig) -> SoakReport:
    """Run the whole soak and return its figures; everything started is stopped."""
    started = time.monotonic()
    workdir = config.workdir or Path(tempfile.mkdtemp(prefix="reportfarm-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    rng = random.Random(config.seed)
    farm = Farm(config, workdir, run_id)
    rig = OperatorRig(farm) if config.with_operator else None
    report = SoakReport(recycle_cap_mib=config.recycle_rss_mb, workdir=str(workdir))
    progress = Progress(config.progress, started)
    try:
        await asyncio.to_thread(farm.start_azurite)
        await _soak(config, farm, rig, rng, report, progress, deadline=started + config.seconds)
    finally:
        await asyncio.to_thread(_stop_all, farm, rig)
    report.leftover = await asyncio.to_thread(leftovers, run_id)
    report.duration_s = round(time.monotonic() - started, 1)
    if not report.problems() and not config.keep and config.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
        report.workdir = None
    return report


def _stop_all(farm: Farm, rig: OperatorRig | None) -> None:
    farm.stop_workers()
    if rig is not None:
        rig.stop()
    farm.azurite.stop()


async def _soak(
    config: SoakConfig,
    farm: Farm,
    rig: OperatorRig | None,
    rng: random.Random,
    report: SoakReport,
    progress: Progress,
    *,
    deadline: float,
) -> None:
    connection = farm.azurite.connection_string
    async with ReportFarmClient(connection, queue=farm.queue, container=farm.container) as client:
        await client.ensure()
        if rig is not None:
            progress.say("starting the control plane and the operator", force=True)
            await asyncio.to_thread(rig.start)
        for _ in range(config.workers):
            farm.start_worker()
        items = submissions(config.jobs)
        job_ids = [str(job_id) for job_id in await client.submit_many(items, concurrency=16)]
        report.submitted = len(job_ids)
        progress.say(f"{len(job_ids)} jobs submitted to {config.workers} workers", force=True)
        done = [0]
        faults = Faults(farm, config, rng, rig)
        sampler = Sampler(farm, rig, lambda: report.submitted - done[0])
        tasks = [asyncio.create_task(faults.run()), asyncio.create_task(sampler.run())]

        def on_count(count: int) -> None:
            done[0] = count
            progress.say(f"results {count}/{len(job_ids)}, faults {dict(faults.counts)}")

        try:
            await wait_for_results(client, job_ids, deadline=deadline, on_count=on_count)
            with contextlib.suppress(TimeoutError):  # every forced kind, even after the jobs
                await asyncio.wait_for(
                    faults.forced_done.wait(), max(0, deadline - time.monotonic())
                )
            faults.stop()
            await tasks[0]
            progress.say("all results in; waiting for the queue to empty", force=True)
            report.left_in_queue = await wait_for_empty_queues(
                client, deadline=max(deadline, time.monotonic() + 120)
            )
            await asyncio.sleep(3)  # let the last kills be reaped before looking for zombies
            report.zombies = await asyncio.to_thread(zombies, farm.run_id)
            report.strays = await asyncio.to_thread(strays, farm.run_id)
            sampler.stop()
            await tasks[1]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if rig is not None:
            report.operator = await asyncio.to_thread(rig.verdict)
        report.faults = {kind: faults.counts[kind] for kind in config.kinds()}
        report.fault_log, report.fault_errors = faults.log, faults.errors + sampler.errors[:5]
        report.peak_browser_mib = round(sampler.peak_gauge / MiB, 1)
        report.peak_browser_proc_mib = round(sampler.peak_proc / MiB, 1)
        report.zombies_lingering = sorted(sampler.lingering)
        report.renderer_counters = sampler.totals()
        report.workers_started = farm.started
        report.workers_crashed = sampler.crashed
        progress.say("verifying every job's PDF and record", force=True)
        await verify(client, farm, job_ids, report, rng)


# -- output ------------------------------------------------------------------------------------


def summary_rows(report: SoakReport) -> list[tuple[str, str]]:
    counters = report.renderer_counters

    def total(prefix: str) -> str:
        parts = {
            key.split("reason=", 1)[1].rstrip("}"): value
            for key, value in counters.items()
            if key.startswith(prefix) and "reason=" in key
        }
        detail = ", ".join(f"{reason} {value:.0f}" for reason, value in parts.items())
        return f"{sum(parts.values()):.0f}" + (f" ({detail})" if detail else "")

    faults = ", ".join(f"{kind} {count}" for kind, count in report.faults.items())
    rows = [
        ("jobs submitted", str(report.submitted)),
        ("stored (one PDF + one succeeded record)", str(report.stored)),
        ("lost", str(report.lost)),
        ("failed", str(report.failed)),
        (
            "redelivered (attempts > 1)",
            f"{report.redelivered} (max attempts {report.max_attempts})",
        ),
        ("PDF blobs / result records", f"{report.pdf_blobs} / {report.result_blobs}"),
        ("mismatched outputs", str(report.mismatched)),
        (
            "PDFs parsed (sample)",
            f"{report.pdfs_checked - report.pdfs_invalid}/{report.pdfs_checked}",
        ),
        ("poison queue", str(report.poisoned)),
        ("faults injected", f"{sum(report.faults.values())}: {faults}"),
        ("worker processes started", str(report.workers_started)),
        ("browser recycles", total("reportfarm_browser_recycles")),
        ("browser restarts", total("reportfarm_browser_restarts")),
        (
            "peak memory per browser",
            f"{report.peak_browser_mib} MiB gauge, {report.peak_browser_proc_mib} MiB /proc "
            f"(cap {report.recycle_cap_mib:.0f} MiB)",
        ),
        ("zombies (at the end / lingering during the run)", _zombie_counts(report)),
        ("orphans while running", _by_command(report.strays)),
        ("leftover processes", str(len(report.leftover))),
        ("duration", f"{report.duration_s:.0f} s"),
    ]
    if report.operator is not None:
        operator = report.operator
        rows.append(
            (
                "operator",
                f"converged {operator['converged']}, restarts {operator['restarts']}, "
                f"scaled to zero with work {operator['scaled_to_zero_with_work']}, "
                f"last decision {operator['last_decision']}",
            )
        )
    return rows


def _zombie_counts(report: SoakReport) -> str:
    return f"{len(report.zombies)} / {len(report.zombies_lingering)}"


def _by_command(lines: list[str]) -> str:
    """``6 (chrome_crashpad 6)``: how many, by command name (the word after the pid)."""
    names = collections.Counter(line.split()[2] for line in lines)
    detail = ", ".join(f"{name} {count}" for name, count in sorted(names.items()))
    return f"{len(lines)}" + (f" ({detail})" if detail else "")


def print_summary(report: SoakReport, console: Console) -> None:
    table = Table(title="reportfarm soak with faults")
    table.add_column("what")
    table.add_column("figure")
    for name, value in summary_rows(report):
        table.add_row(name, value)
    console.print(table)
    for title, lines in (
        ("zombies", report.zombies),
        ("zombies lingering during the run", report.zombies_lingering),
        ("leftover processes", report.leftover),
        ("fault errors", report.fault_errors),
        ("failed jobs", report.failed_reasons[:10]),
    ):
        if lines:
            console.print(f"[bold]{title}[/bold]")
            for line in lines:
                console.print(f"  {line}", markup=False)
    problems = report.problems()
    console.print("[bold red]PROBLEMS[/bold red]: " + "; ".join(problems) if problems else "OK")
    if report.workdir:
        console.print(f"logs and data kept in {report.workdir}", markup=False)


def parse_args(argv: list[str] | None) -> tuple[SoakConfig, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3600.0, help="deadline for the run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    parser.add_argument("--with-operator", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep logs and data after a clean run")
    args = parser.parse_args(argv)
    config = SoakConfig(
        jobs=args.jobs,
        workers=args.workers,
        seconds=args.seconds,
        seed=args.seed,
        with_operator=args.with_operator,
        keep=args.keep,
    )
    return config, args.json


def main(argv: list[str] | None = None) -> int:
    config, as_json = parse_args(argv)
    report = asyncio.run(run_soak(config))
    if report.workdir:  # kept (a problem, or --keep): the figures go with the logs
        figures = json.dumps(dataclasses.asdict(report), indent=2)
        (Path(report.workdir) / "report.json").write_text(figures + "\n")
    if as_json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    else:
        print_summary(report, Console())
    return 1 if report.problems() else 0


if __name__ == "__main__":
    raise SystemExit(main())
