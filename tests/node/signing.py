"""A farm that signs everything, on the real node: the month-end e-invoice (the example invoice as
a signed PDF/A-3 Factur-X with a visible stamp, EN 16931's rules checked by the image) or the same
invoice printed plain, sent as a burst then a steady stream to a ReportPool of its own; what the
jobs' records, the pool's status and its pods say of it."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reportfarm_bench import einvoice

from reportfarm import contract, finishing
from reportfarm.client import ReportFarmClient, Submission
from tests.harness import reportpools
from tests.node import farm, release

DATA = json.loads((release.ROOT / "examples" / "data" / "invoice.json").read_text())
XML = (release.ROOT / "examples" / "data" / "invoice.factur-x.xml").read_bytes()
EINVOICE = einvoice.einvoice_finish(author="reportfarm node test")
"""``reportfarm bench einvoice``'s e-invoice kind."""
SIGNING_SECRET = "signing"
BROWSER_CPU = 0.25


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shape:
    """The load one side gets: a burst, then a steady stream."""

    burst: int
    rate: float
    """Jobs per second of the stream."""
    seconds: float
    """How long the stream lasts."""

    @classmethod
    def parse(cls, text: str) -> Shape:
        """``BURST,RATE,SECONDS``."""
        burst, rate, seconds = text.split(",")
        return cls(burst=int(burst), rate=float(rate), seconds=float(seconds))


def pool(name: str, image: str, *, signing: bool, target_wait_s: float) -> dict[str, Any]:
    """1..3 pods of at most 1 CPU, 1..4 browsers of 0.25 CPU each (the print's share)."""
    extra = {"signingSecretRef": {"name": SIGNING_SECRET}} if signing else {}
    manifest = reportpools.report_pool(
        name,
        name,
        image=image,
        imagePullPolicy="Never",
        templates={"configMapName": "report-templates"},
        resources={
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "2Gi"},
        },
        browser={"cpu": f"{int(BROWSER_CPU * 1000)}m", "memory": "400Mi"},
        replicas={"min": 1, "max": 3},
        browsersPerPod={"min": 1, "max": 4},
        target={"queueWaitSeconds": target_wait_s},
        scaleDown={"stabilizationSeconds": 30},
        terminationGracePeriodSeconds=60,
        **extra,
    )
    manifest["metadata"]["namespace"] = release.NAMESPACE
    return manifest


def submission(*, signed: bool) -> Submission:
    if not signed:
        return Submission(template="invoice", data=DATA)
    return Submission(
        template="invoice", data=DATA, finish=EINVOICE, files={finishing.FACTURX_XML_NAME: XML}
    )


def sampler(tools: farm.Tools, name: str, started: float) -> Callable[[], dict[str, Any]]:
    """One reading of the pool's pods and status, ``t`` seconds after ``started``."""
    selector = f"app.kubernetes.io/instance={name}"

    def sample() -> dict[str, Any]:
        pods = tools.get("pods", "-n", release.NAMESPACE, "-l", selector)["items"]
        alive = [p for p in pods if p["status"].get("phase") in ("Pending", "Running")]
        ready = [
            p
            for p in alive
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", [])
            )
        ]
        status = tools.get("reportpools", "-n", release.NAMESPACE, name).get("status") or {}
        last = status.get("lastDecision") or {}
        return {
            "t": round(time.monotonic() - started, 1),
            "pods": len(alive),
            "ready": len(ready),
            "replicas": status.get("replicas"),
            "browsersPerPod": status.get("browsersPerPod"),
            "queueDepth": status.get("queueDepth"),
            "finishCpuSeconds": last.get("finishCpuSeconds"),
            "serviceSeconds": last.get("serviceSeconds"),
            "browserCpu": last.get("browserCpu"),
            "reason": last.get("reason"),
        }

    return sample


async def drive(
    connection: str, queue: str, shape: Shape, *, signed: bool, sample: Callable[[], Any],
    samples: list[Any],
) -> list[str]:  # fmt: skip
    """Send the burst, then the stream at its rate; ``sample()`` every 3 s meanwhile (in a
    thread, so a slow kubectl never delays a submission). Returns the job ids in order."""
    stop = threading.Event()

    def sampling() -> None:
        while not stop.wait(0 if not samples else 3.0):
            samples.append(sample())

    thread = threading.Thread(target=sampling, daemon=True)
    thread.start()
    ids: list[str] = []
    try:
        async with ReportFarmClient(connection, queue=queue, container=release.CONTAINER) as c:
            await c.ensure()
            ids += await c.submit_many([submission(signed=signed)] * shape.burst)
            start, sent = time.monotonic(), 0
            while sent < round(shape.rate * shape.seconds):
                due = start + sent / shape.rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                ids.append(await c.submit(submission(signed=signed)))
                sent += 1
    finally:
        stop.set()
        thread.join()
    return ids


@dataclasses.dataclass
class Side:
    """What one side's jobs and pool did."""

    kind: str
    jobs: int = 0
    succeeded: int = 0
    failed: int = 0
    interrupted: int = 0
    lost: int = 0
    waits: list[float] = dataclasses.field(default_factory=list)
    """Each job's queue wait: submitted -> taken (its end less its receive-to-stored)."""
    stream_waits: list[float] = dataclasses.field(default_factory=list)
    """The waits of the stream's jobs only (after the burst)."""
    samples: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    last_finished: float = 0.0

    def figures(self, *, target_wait_s: float, first_sample_at: float) -> dict[str, Any]:
        waits = sorted(self.waits)
        cuts = _percentiles(waits)
        stream = _percentiles(sorted(self.stream_waits))
        cpus = [float(s["finishCpuSeconds"]) for s in self.samples if s["finishCpuSeconds"]]
        return {
            "kind": self.kind,
            "jobs": self.jobs,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "interrupted": self.interrupted,
            "lost": self.lost,
            "wait p50 s": round(cuts[49], 2),
            "wait p95 s": round(cuts[94], 2),
            "wait max s": round(waits[-1], 2) if waits else None,
            "stream wait p50 s": round(stream[49], 2),
            "stream wait p95 s": round(stream[94], 2),
            "share within target": round(sum(w <= target_wait_s for w in waits) / len(waits), 3)
            if waits
            else None,
            "peak pods": max((s["pods"] for s in self.samples), default=0),
            "peak browsers per pod": max(
                (s["browsersPerPod"] or 0 for s in self.samples), default=0
            ),
            "peak browser cpu": max((float(s["browserCpu"] or 0) for s in self.samples), default=0),
            "finish cpu s (last)": cpus[-1] if cpus else None,
            "peak service s": max(
                (float(s["serviceSeconds"] or 0) for s in self.samples), default=0
            ),
            "pod-seconds": round(pod_seconds(self.samples, until=self.last_finished), 1),
            "seconds": round(self.last_finished - first_sample_at, 1),
        }


def _percentiles(values: list[float]) -> list[float]:
    if len(values) > 1:
        return statistics.quantiles(values, n=100)
    return (values or [float("nan")]) * 99


def pod_seconds(samples: list[dict[str, Any]], *, until: float) -> float:
    """Pods alive (Pending or Running) integrated over the samples' times, to ``until`` (s)."""
    total = 0.0
    for here, after in itertools.pairwise(samples):
        end = min(after["t"], until)
        if end > here["t"]:
            total += here["pods"] * (end - here["t"])
    return total


async def results(connection: str, queue: str, ids: list[str], side: Side, *, started: float,
                  burst: int, timeout: float) -> None:  # fmt: skip
    """Fill ``side`` from the jobs' result records (``started``: time.time() of its t = 0; the
    first ``burst`` ids are the burst's)."""
    async with ReportFarmClient(connection, queue=queue, container=release.CONTAINER) as client:
        records = await client.wait(ids, timeout_s=timeout, poll_s=1.0)
    side.jobs = len(ids)
    for index, record in enumerate(records[job_id] for job_id in ids):
        if record is None:
            side.lost += 1
            continue
        side.succeeded += record.state == "succeeded"
        side.failed += record.state != "succeeded"
        side.interrupted += record.attempts > 1
        if record.submitted_at and record.finished_at:
            taken = record.finished_at - worker_s(record)
            side.waits.append(max(0.0, taken - record.submitted_at))
            if index >= burst:
                side.stream_waits.append(side.waits[-1])
            side.last_finished = max(side.last_finished, record.finished_at - started)


def worker_s(record: contract.ResultRecord) -> float:
    """Receive to stored: the whole job's stage (else the sum of its stages)."""
    stages = record.stages_ms
    whole = stages.get("generation_succeeded")
    return (whole if whole is not None else sum(stages.values())) / 1000


async def one_output(connection: str, queue: str, job_id: str, folder: Path) -> Path:
    async with ReportFarmClient(connection, queue=queue, container=release.CONTAINER) as client:
        (record,) = (await client.wait([job_id], timeout_s=30)).values()
        assert record is not None, job_id
        path = folder / f"{job_id}.pdf"
        path.write_bytes(await client.download(record))
    return path
