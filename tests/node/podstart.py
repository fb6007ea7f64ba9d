"""A renderer pod's start on the real node, phase by phase, from its creation to its first PDF.

One round: a job waits in a queue of its own; the test creates a bare Pod with the spec the
operator gives a ReportPool's renderers (``reportfarm_operator.children``, the pool's queue
swapped for that one, labels no ReplicaSet selects); a ``kubectl get --watch`` notes when the
kubelet sets Ready; the renderer's own ``start phase`` lines (``reportfarm_renderer.starting``,
wall clock to 10 ms) give the rest. Everything is seconds after the Pod's creation (the create
call returned). The image is on the node already (``imagePullPolicy: Never``): the pull is left
out, and estimated apart (``scripts/bench_pod_start.sh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import statistics
import subprocess
import tarfile
import threading
import time
from typing import Any

import kopf
from reportfarm_operator import children, specs

from tests.node import farm, release
from tests.node import node as node_harness

PHASES = (
    "container_started",
    "process_started",
    "imported",
    "browser_ready",
    "listening",
    "ready",
    "pod_ready",
    "first_receive",
    "first_stored",
)
"""The columns: the renderer's phases, plus ``pod_ready`` (the kubelet's Ready condition)."""
OWNED = ("container_started", "first_stored")
"""The part we own: from the container's start (its PID 1, tini) to the first PDF stored."""


def archive_ref(archive: str) -> str:
    """The image reference an OCI archive of ``scripts/images/build.sh`` names."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None, archive
        index = json.load(member)
    return str(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])


def import_fresh(node: node_harness.Node, archive: str) -> float:
    """Import ``archive`` into the node, first removing it if there; seconds the import took
    (reading the archive, unpacking every layer: what a node does after a pull's download)."""
    ref = archive_ref(archive)
    with contextlib.suppress(node_harness.NodeError):
        node.ctr("images", "rm", "--sync", ref)
    began = time.monotonic()
    node.ctr("images", "import", "--all-platforms", archive)
    return round(time.monotonic() - began, 1)


def pod_manifest(
    image: str, *, name: str, queue: str, browsers: int, cpu: str = "1"
) -> dict[str, Any]:
    """The operator's renderer pod for the tests' pool with ``browsers`` browsers at start and a
    limit of ``cpu`` CPUs, on ``queue``; labelled so that no ReplicaSet adopts it."""
    pool = release.report_pool(
        image, browsersPerPod={"min": browsers, "max": browsers}, queue={
            "name": queue, "connectionSecretRef": {"name": "storage"},
        },
    )  # fmt: skip
    pool["spec"]["resources"]["limits"]["cpu"] = cpu
    pool["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    body = kopf.Body(pool)
    spec = specs.parse(pool["spec"])
    template = copy.deepcopy(children.deployment(body, spec, replicas=1)["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": release.NAMESPACE, "labels": {"podstart": name}},
        "spec": template["spec"],
    }


@dataclasses.dataclass
class Round:
    """One pod's start: phase -> seconds after its creation."""

    pod: str
    phases: dict[str, float]
    create_call_s: float
    """How long the create call itself took (the uncertainty of "created")."""
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    """Phase -> CPU seconds the container had used by then (the renderer's ``cpu_s``)."""

    @property
    def owned_s(self) -> float:
        return self.phases[OWNED[1]] - self.phases[OWNED[0]]

    @property
    def owned_cpu_s(self) -> float | None:
        """The container's CPU from its start to the first PDF stored."""
        return self.cpu.get(OWNED[1])


class _ReadyWatch:
    """``kubectl get pod --watch``: the wall clock at which Ready first read True."""

    def __init__(self, tools: farm.Tools, pod: str) -> None:
        self.ready_at: float | None = None
        jsonpath = '{.status.conditions[?(@.type=="Ready")].status}{"\\n"}'
        self._process = subprocess.Popen(
            [str(tools.plane.bin_dir / "kubectl"), f"--kubeconfig={tools.plane.kubeconfig}",
             "get", "pod", pod, "-n", release.NAMESPACE, "--watch", "-o", f"jsonpath={jsonpath}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.strip() == "True" and self.ready_at is None:
                self.ready_at = time.time()

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


def _phases_from_logs(logs: str) -> tuple[dict[str, float], dict[str, float]]:
    """Phase -> wall clock, and phase -> the container's CPU seconds where the line says."""
    found: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for line in logs.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("message") == "start phase":
            phase = str(record["phase"])
            found.setdefault(phase, float(record["at"]))
            if "cpu_s" in record:
                cpu.setdefault(phase, float(record["cpu_s"]))
    return found, cpu


def run_round(
    tools: farm.Tools, connection: str, image: str, *, name: str, browsers: int = 2,
    cpu: str = "1", timeout: float = 180.0,
) -> Round:  # fmt: skip
    """Start one renderer pod for one waiting job; its phases. Deletes the pod after."""
    data = json.loads((release.ROOT / "examples" / "data" / "achievement.json").read_text())
    queue = name
    job_ids = asyncio.run(farm.submit(connection, queue, release.CONTAINER, "achievement", [data]))
    manifest = pod_manifest(image, name=name, queue=queue, browsers=browsers, cpu=cpu)
    watch: _ReadyWatch | None = None
    try:
        began = time.time()
        tools.kubectl("create", "-f", "-", stdin=json.dumps(manifest))
        created = time.time()
        watch = _ReadyWatch(tools, name)
        outcome = asyncio.run(
            farm.collect(connection, queue, release.CONTAINER, job_ids, timeout=timeout)
        )
        assert outcome.succeeded == 1, (
            outcome,
            tools.kubectl("logs", "-n", release.NAMESPACE, name, check=False),
        )
        deadline = time.monotonic() + 60
        while watch.ready_at is None and time.monotonic() < deadline:
            time.sleep(0.1)
        logs = tools.kubectl("logs", "-n", release.NAMESPACE, name)
    finally:
        if watch is not None:
            watch.stop()
        tools.kubectl("delete", "pod", "-n", release.NAMESPACE, name, "--grace-period=5",
                      "--wait=true", check=False)  # fmt: skip
    marks, cpu = _phases_from_logs(logs)
    if watch.ready_at is not None:
        marks["pod_ready"] = watch.ready_at
    phases = {p: round(marks[p] - created, 3) for p in PHASES if p in marks}
    return Round(pod=name, phases=phases, create_call_s=round(created - began, 3), cpu=cpu)


def table(rounds: list[Round]) -> str:
    """Markdown: each phase's median and range over the rounds (seconds after creation), and the
    container's CPU seconds by then (median, where the renderer logged it)."""
    lines = ["| phase | median s | min-max s | container CPU s |", "|---|---|---|---|"]
    for phase in PHASES:
        values = [r.phases[phase] for r in rounds if phase in r.phases]
        if values:
            lines.append(
                f"| {phase} | {statistics.median(values):.2f} | "
                f"{min(values):.2f}-{max(values):.2f} | {_median_cpu(rounds, phase)} |"
            )
    owned = [r.owned_s for r in rounds]
    lines.append(
        f"| **owned** (container start to first PDF) | {statistics.median(owned):.2f} | "
        f"{min(owned):.2f}-{max(owned):.2f} | {_median_cpu(rounds, OWNED[1])} |"
    )
    return "\n".join(lines)


def _median_cpu(rounds: list[Round], phase: str) -> str:
    values = [r.cpu[phase] for r in rounds if phase in r.cpu]
    return f"{statistics.median(values):.2f}" if values else "-"
