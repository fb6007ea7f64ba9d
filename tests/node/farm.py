"""The pieces of the real-node tests around the node itself: Azurite on the pods' bridge, kubectl
and helm against the test plane, and the job burst with its figures."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reportfarm import azurite, finishing
from reportfarm.client import ReportFarmClient, Submission
from tests.harness import kube as kube_harness
from tests.node import node as node_harness


@contextlib.contextmanager
def bridge_azurite() -> Iterator[str]:
    """Azurite listening on the bridge's address (pods and this machine reach it there);
    yields its connection string."""
    ports = [azurite.free_port() for _ in range(3)]
    args = [azurite.find_executable(), "--silent", "--skipApiVersionCheck", "--loose"]
    args.append("--inMemoryPersistence")
    for service, port in zip(("blob", "queue", "table"), ports, strict=True):
        args += [f"--{service}Host", node_harness.GATEWAY, f"--{service}Port", str(port)]
    log = tempfile.NamedTemporaryFile(prefix="azurite-node-", suffix=".log", delete=False)
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        connection = azurite.connection_string(*ports).replace("127.0.0.1", node_harness.GATEWAY)
        while not _answers(connection):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Azurite on the bridge: {Path(log.name).read_text()}")
            time.sleep(0.2)
        yield connection
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pods' keep-alive connections can hold it up
            process.kill()
            process.wait()


def _answers(connection: str) -> bool:
    async def probe() -> bool:
        async with ReportFarmClient(connection, queue="probe", container="probe") as client:
            await client.ensure()
        return True

    try:
        return asyncio.run(probe())
    except Exception:  # not listening yet
        return False


@dataclasses.dataclass
class Tools:
    """kubectl and helm against the test plane."""

    plane: kube_harness.ControlPlane

    def run(self, tool: str, *args: str, check: bool = True, stdin: str | None = None) -> str:
        done = subprocess.run(
            [str(self.plane.bin_dir / tool), f"--kubeconfig={self.plane.kubeconfig}", *args],
            capture_output=True, text=True, input=stdin, timeout=300,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {done.stderr}")
        return done.stdout

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        return self.run("kubectl", *args, check=check, stdin=stdin)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))

    def running_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        pods = self.get("pods", "-n", namespace, "-l", selector)["items"]
        return [
            p
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]


@dataclasses.dataclass
class Outcome:
    """What happened to every job submitted during a test."""

    submitted: int = 0
    succeeded: int = 0
    redelivered: int = 0
    """Jobs whose result says the queue delivered them more than once (an interrupted render)."""
    redelivered_ids: list[str] = dataclasses.field(default_factory=list)
    failed: int = 0
    missing: int = 0
    """Jobs with no result record when the wait ended (lost)."""
    per_worker: dict[str, int] = dataclasses.field(default_factory=dict)
    finished: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    """(worker, finished_at) of every job that ended."""


async def submit(connection: str, queue: str, container: str, template: str,
                 data: list[dict[str, Any]], *, finish: finishing.Finish | None = None,
                 ) -> list[str]:  # fmt: skip
    async with ReportFarmClient(connection, queue=queue, container=container) as client:
        await client.ensure()
        jobs = [Submission(template=template, data=d, finish=finish) for d in data]
        return list(await client.submit_many(jobs))


async def collect(
    connection: str, queue: str, container: str, job_ids: list[str], *, timeout: float
) -> Outcome:
    outcome = Outcome(submitted=len(job_ids))
    async with ReportFarmClient(connection, queue=queue, container=container) as client:
        results = await client.wait(job_ids, timeout_s=timeout, poll_s=1.0)
    for record in results.values():
        if record is None:
            outcome.missing += 1
            continue
        if record.state == "succeeded":
            outcome.succeeded += 1
        else:
            outcome.failed += 1
        if record.attempts > 1:
            outcome.redelivered += 1
            outcome.redelivered_ids.append(record.job_id)
        worker = record.worker or "?"
        outcome.per_worker[worker] = outcome.per_worker.get(worker, 0) + 1
        if record.finished_at is not None:
            outcome.finished.append((worker, record.finished_at))
    return outcome


@dataclasses.dataclass
class FollowedLogs:
    """The logs of a set of pods, kept though the pods go: see :func:`following_logs`."""

    tools: Tools
    namespace: str
    selectors: tuple[str, ...]
    followed: Path

    def naming(self, names: list[str], *, limit: int = 200) -> str:
        """The lines naming any of ``names`` (at most ``limit``), in the logs followed since the
        start and in those of the pods that match now (started since: not followed)."""
        if not names:
            return ""
        text = self.followed.read_text(errors="replace")
        for selector in self.selectors:
            text += self.tools.kubectl("logs", "-n", self.namespace, "-l", selector, "--prefix",
                                       "--tail=-1", "--max-log-requests=20", check=False)  # fmt: skip
        found = [line for line in text.splitlines() if any(name in line for name in names)]
        return "\n".join(found[:limit])

    def drains(self) -> dict[str, float | None]:
        """Per followed renderer pod that began to drain: seconds from its "draining" line to its
        "drained" line (None: it never logged the end: killed, or still draining)."""
        began: dict[str, float] = {}
        ended: dict[str, float] = {}
        for line in self.followed.read_text(errors="replace").splitlines():
            pod, _, body = line.partition("] ")
            try:
                entry = json.loads(body)
                at = datetime.datetime.fromisoformat(entry["time"]).timestamp()
                message = str(entry["message"])
            except (ValueError, KeyError, TypeError):
                continue
            if message.startswith("draining:"):
                began[pod.lstrip("[")] = at
            elif message.startswith("drained:"):
                ended[pod.lstrip("[")] = at
        return {
            pod: round(ended[pod] - at, 1) if pod in ended else None for pod, at in began.items()
        }


@contextlib.contextmanager
def following_logs(tools: Tools, namespace: str, *selectors: str) -> Iterator[FollowedLogs]:
    """Follow the logs of the pods matching each selector now (``kubectl logs -f``, prefixed with
    the pod's name), into a file that outlives the pods: a drained pod's logs go with it."""
    with tempfile.TemporaryDirectory(prefix="pod-logs-") as folder:
        path = Path(folder) / "logs.txt"
        with path.open("wb") as out:
            kubectl = [
                str(tools.plane.bin_dir / "kubectl"),
                f"--kubeconfig={tools.plane.kubeconfig}",
            ]
            followers = []
            for selector in selectors:
                follow = ["logs", "-f", "-n", namespace, "-l", selector, "--prefix",
                          "--max-log-requests=20", "--tail=-1"]  # fmt: skip
                followers.append(subprocess.Popen([*kubectl, *follow], stdout=out, stderr=out))
            try:
                yield FollowedLogs(tools, namespace, selectors, path)
            finally:
                for follower in followers:
                    follower.terminate()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        follower.wait(timeout=10)


def pod_processes(pod_uid: str) -> dict[int, list[bytes]]:
    """The processes of the pod ``pod_uid`` as this machine sees them (by their cgroup):
    pid -> argv."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"pod{pod_uid}" in (entry / "cgroup").read_text():
                found[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # exited meanwhile
            continue
    return found


def kill_a_browser(pod_uid: str) -> int:
    """SIGKILL one Chromium main process of the pod ``pod_uid``; returns its pid here. Helpers
    carry ``--type=``; the main process does not."""
    for pid, argv in pod_processes(pod_uid).items():
        if b"chrom" in Path(argv[0].decode(errors="replace")).name.encode() and not any(
            arg.startswith(b"--type=") for arg in argv
        ):
            os.kill(pid, signal.SIGKILL)
            return pid
    raise AssertionError(f"no Chromium process in the cgroup of pod {pod_uid}")
