"""Our operator and the real KEDA + HPA side by side on the real node: the same renderer image,
the same pod template, the same arrival trace replayed in real time through Azurite.

- **ours**: a ReportPool, scaled by our operator (installed by the chart, as a user runs it):
  pods and browsers per pod.
- **keda-60 / keda-120**: a renderer Deployment with the pod template our operator would make for
  the same ReportPool (``children.deployment``: same image, resources, probes, grace period and
  drain), a fixed pool of browsers per pod, scaled by a KEDA ScaledObject as a competent user
  would configure it: azure-queue trigger with ``queueLength`` = a pod's browsers,
  ``pollingInterval`` 5 s, the HPA's ``behavior`` with a 60 s (or 120 s) scale-down window and
  +4 pods per 15 s up (the node holds 4), ``cooldownPeriod`` equal to the window for 1 -> 0,
  the ReportPool's minimum (1, or 0 for the wake).

Measured for each run, over the same observation window (the trace plus a tail in which both
sides scale back down): every job's submit-to-stored time from its result record (p50, p95,
p99), pod-seconds from each pod's Ready to its deletion (or the window's end), requested
CPU-seconds (pod-seconds x the pod's CPU request), reversals of the replica count, and jobs
interrupted (delivered more than once), failed and lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import math
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kopf
from reportfarm_operator import children, specs

from reportfarm import quantiles
from reportfarm.client import ReportFarmClient, Submission
from tests.harness import keda as keda_harness
from tests.harness import reportpools
from tests.node import farm, release

SIDES = ("ours", "keda-60", "keda-120")
"""The sides of the full run (``iter_sides`` takes other KEDA settings too)."""
BROWSERS = 2
"""Browsers a pod can hold here (the ReportPool's ``browsersPerPod.max``; KEDA's fixed pool)."""
MAX_PODS = 4
TEMPLATE = "achievement"


@dataclasses.dataclass(frozen=True)
class Trace:
    """Arrivals: (seconds after the start, jobs submitted then)."""

    name: str
    arrivals: tuple[tuple[float, int], ...]
    from_zero: bool = False
    """Both sides start at zero pods (a wake), else at one Ready pod."""

    @property
    def duration(self) -> float:
        return max(at for at, _ in self.arrivals)

    @property
    def jobs(self) -> int:
        return sum(count for _, count in self.arrivals)


def traces(*, seed: int = 0, scale: float = 1.0) -> dict[str, Trace]:
    """The node-sized shapes: a burst, a sustained jump, small bursts, a wake from zero.
    ``scale`` shrinks counts and durations for a short run."""
    rng = random.Random(seed)

    def n(value: float) -> int:
        return max(1, round(value * scale))

    steady, jumped = 0.5, 3.0  # jobs per second before/after the jump
    jump: list[tuple[float, int]] = []
    at = 0.0
    for rate, seconds in ((steady, n(60)), (jumped, n(90)), (steady, n(30))):
        end = at + seconds
        while at < end:
            jump.append((round(at, 2), 1))
            at += rng.expovariate(rate)
    small: list[tuple[float, int]] = []
    at = 0.0
    for _ in range(n(4)):
        small.append((round(at, 2), rng.randint(5, 10)))
        at += rng.uniform(30, 45)
    return {
        "burst": Trace("burst", ((0.0, n(60)),)),
        "jump": Trace("jump", tuple(jump)),
        "small": Trace("small", tuple(small)),
        "wake": Trace("wake", ((0.0, n(40)),), from_zero=True),
    }


@dataclasses.dataclass
class Run:
    """One side on one trace: what it cost and what the jobs waited."""

    side: str
    trace: str
    jobs: int = 0
    waits: list[float] = dataclasses.field(default_factory=list)
    """Submit-to-stored seconds of every stored job."""
    interrupted: int = 0
    failed: int = 0
    lost: int = 0
    pod_seconds: float = 0.0
    cpu_seconds: float = 0.0
    reversals: int = 0
    replicas: list[tuple[float, int, int]] = dataclasses.field(default_factory=list)
    """(seconds, desired replicas, Ready pods) sampled through the window."""
    services: list[float] = dataclasses.field(default_factory=list)
    """Seconds each stored job spent in its stages (load, render, print, store)."""
    uploads: list[float] = dataclasses.field(default_factory=list)
    """Seconds of each stored job's ``storage_upload`` stage: the renderer takes its next job
    while a PDF stores, so a job holds its slot for its service minus this."""
    pod_starts: list[float] = dataclasses.field(default_factory=list)
    """Seconds from each pod's creation to its Ready (the pods that started in the window)."""
    first_renders: dict[str, float] = dataclasses.field(default_factory=dict)
    """Each worker's (pod's) first render start, unix time (its record's end - its stages)."""
    pod_serving: list[float] = dataclasses.field(default_factory=list)
    """Seconds from each pod's creation to its first render: a pod takes jobs before the
    kubelet's readiness probe marks it Ready, so this is the pod start that serves."""
    stored: dict[str, Any] | None = None
    """The figures as stored, for a run read back from ``runs.json``."""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Run:
        """A run as ``figures()`` + ``replicas`` stored it (waits summarised, not kept)."""
        return cls(
            side=body["side"], trace=body["trace"], jobs=body["jobs"],
            waits=[], interrupted=body["interrupted"], failed=body["failed"], lost=body["lost"],
            pod_seconds=body["pod_seconds"], cpu_seconds=body["cpu_seconds"],
            reversals=body["reversals"], replicas=[tuple(r) for r in body["replicas"]],
            stored=body,
        )  # fmt: skip

    def figures(self) -> dict[str, Any]:
        if self.stored is not None:
            return {k: v for k, v in self.stored.items() if k not in ("replicas", "at")}
        return {
            "side": self.side,
            "trace": self.trace,
            "jobs": self.jobs,
            "p50_s": quantiles.quantile(self.waits, 0.5) if self.waits else None,
            "p95_s": quantiles.quantile(self.waits, 0.95) if self.waits else None,
            "p99_s": quantiles.quantile(self.waits, 0.99) if self.waits else None,
            "pod_seconds": round(self.pod_seconds, 1),
            "cpu_seconds": round(self.cpu_seconds, 1),
            "reversals": self.reversals,
            "interrupted": self.interrupted,
            "failed": self.failed,
            "lost": self.lost,
            "service_p50_s": quantiles.quantile(self.services, 0.5) if self.services else None,
            "service_p90_s": quantiles.quantile(self.services, 0.9) if self.services else None,
            "upload_p50_s": quantiles.quantile(self.uploads, 0.5) if self.uploads else None,
            "pod_start_s": sorted(round(s, 1) for s in self.pod_starts),
            "pod_serving_s": sorted(round(s, 1) for s in self.pod_serving),
        }


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limits:
    """What a run may use: the most pods per side and, for a short check, the windows."""

    max_pods: int = MAX_PODS
    """Pods per side (two sides at once on the node: half of :data:`MAX_PODS` each)."""
    scale_down_s: int | None = None
    """Both sides' scale-down window (ours: ``scaleDown.stabilizationSeconds``; KEDA: the HPA's
    window and ``cooldownPeriod``); None: each side's own (ours the test pool's 10 s, keda-N N s)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class KedaSetting:
    """A KEDA side, named ``keda-WINDOW[-qQUEUELENGTH][-upPODS]`` (e.g. keda-60, keda-60-q4)."""

    window: int
    """The HPA's scale-down stabilization window (and ``cooldownPeriod``), seconds."""
    queue_length: int = BROWSERS
    """The azure-queue trigger's ``queueLength`` (a pod's browsers: the competent setting)."""
    step: int = MAX_PODS
    """Pods added per 15 s at most (the HPA's scale-up Pods policy)."""

    @classmethod
    def parse(cls, side: str) -> KedaSetting:
        match = re.fullmatch(r"keda-(\d+)(?:-q(\d+))?(?:-up(\d+))?", side)
        if match is None:
            raise ValueError(f"unknown side {side!r}: ours or keda-WINDOW[-qLENGTH][-upPODS]")
        window, length, step = match.groups()
        return cls(
            window=int(window),
            queue_length=int(length) if length else BROWSERS,
            step=int(step) if step else MAX_PODS,
        )


def pool_spec(
    queue: str, image: str, *, from_zero: bool, limits: Limits = Limits()
) -> dict[str, Any]:
    """The ReportPool both sides are built from (KEDA's side: its pod template)."""
    extra: dict[str, Any] = {}
    if limits.scale_down_s is not None:
        extra["scaleDown"] = {"stabilizationSeconds": limits.scale_down_s}
    pool = release.report_pool(
        image,
        **extra,
        queue={"name": queue, "connectionSecretRef": {"name": "storage"}},
        replicas={"min": 0 if from_zero else 1, "max": limits.max_pods},
        browsersPerPod={"min": 1, "max": BROWSERS},
        scaleToZero={"idleSeconds": 60},
        # A pod's throughput is its CPU limit's, not the node's: four pods of 400m fit this
        # 2-core node, so a pod added is throughput added (as on a cluster with room to grow).
        resources={
            "requests": {"cpu": "400m", "memory": "256Mi"},
            "limits": {"cpu": "400m", "memory": "2Gi"},
        },
        browser={"cpu": "200m", "memory": "512Mi"},
    )
    return pool


def keda_deployment(name: str, pool: dict[str, Any], *, replicas: int) -> dict[str, Any]:
    """The Deployment our operator would make for ``pool``, owned by nobody, with a fixed pool
    of :data:`BROWSERS` browsers per pod."""
    spec = dict(pool["spec"])
    spec["browsersPerPod"] = {"min": BROWSERS, "max": BROWSERS}
    parsed = specs.parse(spec)
    body = kopf.Body({**pool, "metadata": {**pool["metadata"], "name": name, "uid": "none"}})
    manifest = children.deployment(body, parsed, replicas=replicas)
    manifest["metadata"].pop("ownerReferences", None)
    manifest["metadata"]["namespace"] = release.NAMESPACE
    return manifest


def scaled_object(
    name: str, queue: str, *, setting: KedaSetting, min_replicas: int, max_replicas: int = MAX_PODS
) -> list[dict[str, Any]]:
    """KEDA's objects for the Deployment ``name`` (the connection from the farm's Secret); the
    same minimum and maximum as the ReportPool's."""
    window = setting.window
    auth = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": {"name": name, "namespace": release.NAMESPACE},
        "spec": {
            "secretTargetRef": [
                {"parameter": "connection", "name": "storage", "key": "connection-string"}
            ]
        },
    }
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": release.NAMESPACE},
        "spec": {
            "scaleTargetRef": {"name": name},
            "pollingInterval": 5,
            "cooldownPeriod": window,
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleUp": {
                            "stabilizationWindowSeconds": 0,
                            "policies": [
                                {"type": "Pods", "value": setting.step, "periodSeconds": 15}
                            ],
                        },
                        "scaleDown": {
                            "stabilizationWindowSeconds": window,
                            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
                        },
                    }
                }
            },
            "triggers": [
                {
                    "type": "azure-queue",
                    "metadata": {"queueName": queue, "queueLength": str(setting.queue_length)},
                    "authenticationRef": {"name": name},
                }
            ],
        },
    }
    return [auth, scaled]


class Sampler:
    """Every second: the side's desired replicas and its pods' Ready and deletion times."""

    def __init__(
        self, tools: farm.Tools, *, selector: str, deployment: str, pool: str | None = None
    ) -> None:
        self.tools = tools
        self.pool = pool
        self.decisions: list[tuple[float, str]] = []
        """(seconds, the operator's decision message) at each change (ours only)."""
        self.selector = selector
        self.deployment = deployment
        self.start = time.time()
        self.ready_at: dict[str, float] = {}
        self.created_at: dict[str, float] = {}
        self.gone_at: dict[str, float] = {}
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.sample()
            except Exception:  # a slow apiserver answer: the next second samples again
                continue

    def sample(self) -> None:
        plane = self.tools.plane
        namespace = release.NAMESPACE
        now = time.time()
        pods = plane.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={self.selector}"
        )["items"]
        seen = set()
        ready = 0
        for pod in pods:
            name = pod["metadata"]["name"]
            seen.add(name)
            self.created_at.setdefault(name, _stamp(pod["metadata"]["creationTimestamp"]))
            if pod["metadata"].get("deletionTimestamp"):
                self.gone_at.setdefault(name, now)
                continue
            since = _ready_since(pod)
            if since is not None:
                ready += 1
                self.ready_at.setdefault(name, since)
        for name in self.ready_at:
            if name not in seen:
                self.gone_at.setdefault(name, now)
        try:
            found = plane.request(
                "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{self.deployment}"
            )
            desired = int(found["spec"].get("replicas") or 0)
        except OSError:
            desired = 0
        self.samples.append((round(now - self.start, 1), desired, ready))
        if self.pool is not None:
            found = plane.request(
                "GET",
                f"/apis/{reportpools.GROUP}/{reportpools.VERSION}/namespaces/{namespace}/"
                f"{reportpools.PLURAL}/{self.pool}",
            )
            message = str((found.get("status") or {}).get("lastDecision", {}).get("message"))
            if not self.decisions or self.decisions[-1][1] != message:
                self.decisions.append((round(now - self.start, 1), message))

    def created_since_start(self, name: str) -> bool:
        """Whether ``name`` was created after the sampler started. A creationTimestamp holds
        whole seconds (truncated): a pod created 0.3 s after a start at x.6 reads x.0, so the
        start is truncated too (a pod there before it was Ready before it: seconds older)."""
        return self.created_at.get(name, 0.0) >= math.floor(self.start)

    def pod_starts(self) -> list[float]:
        """Creation to Ready of the pods created after the sampler started."""
        return [
            ready - self.created_at[name]
            for name, ready in self.ready_at.items()
            if self.created_since_start(name)
        ]

    def pod_seconds(self, end: float) -> float:
        return sum(
            max(0.0, min(self.gone_at.get(name, end), end) - max(ready, self.start))
            for name, ready in self.ready_at.items()
        )


def _ready_since(pod: dict[str, Any]) -> float | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition["type"] == "Ready" and condition["status"] == "True":
            stamp = condition.get("lastTransitionTime")
            if stamp:
                return _stamp(stamp)
    return None


def _stamp(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def reversals(samples: list[tuple[float, int, int]]) -> int:
    """Changes of direction of the desired replica count."""
    count, direction, last = 0, 0, None
    for _, desired, _ in samples:
        if last is not None and desired != last:
            step = 1 if desired > last else -1
            if direction and step != direction:
                count += 1
            direction = step
        last = desired
    return count


async def replay(connection: str, queue: str, trace: Trace, data: dict[str, Any]) -> list[str]:
    """Submit the trace's arrivals at their times; returns the job ids."""
    ids: list[str] = []
    async with ReportFarmClient(connection, queue=queue, container=release.CONTAINER) as client:
        start = time.monotonic()
        for at, count in trace.arrivals:
            delay = at - (time.monotonic() - start)
            if delay > 0:
                await asyncio.sleep(delay)
            batch = [Submission(template=TEMPLATE, data=data) for _ in range(count)]
            ids += list(await client.submit_many(batch))
    return ids


async def results(connection: str, queue: str, ids: list[str], *, timeout: float) -> Run:
    run = Run(side="", trace="", jobs=len(ids))
    async with ReportFarmClient(connection, queue=queue, container=release.CONTAINER) as client:
        records = await client.wait(ids, timeout_s=timeout, poll_s=1.0)
    for record in records.values():
        if record is None:
            run.lost += 1
            continue
        if record.state != "succeeded":
            run.failed += 1
        if record.attempts > 1:
            run.interrupted += 1
        if record.submitted_at is not None and record.finished_at is not None:
            run.waits.append(record.finished_at - record.submitted_at)
        if record.stages_ms:
            service = sum(record.stages_ms.values()) / 1000
            run.services.append(service)
            run.uploads.append(record.stages_ms.get("storage_upload", 0.0) / 1000)
            if record.worker and record.finished_at is not None:
                began = record.finished_at - service
                run.first_renders[record.worker] = min(
                    began, run.first_renders.get(record.worker, began)
                )
    return run


def cpu_request(pool: dict[str, Any]) -> float:
    value = str(pool["spec"]["resources"]["requests"]["cpu"])
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def iter_sides(sides: str) -> Iterator[str]:
    """The sides named in ``sides`` (comma-separated), each checked."""
    for side in sides.split(","):
        if side != "ours":
            KedaSetting.parse(side)
        yield side


def run_side(
    tools: farm.Tools,
    keda: keda_harness.Keda | None,
    connection: str,
    *,
    side: str,
    trace: Trace,
    image: str,
    tail: float,
    limits: Limits = Limits(),
    settle: bool = False,
) -> Run:
    """Start ``side`` for ``trace`` at its starting size, replay the trace, observe until the
    trace plus ``tail`` seconds have passed and every job ended, then remove the side. With
    ``settle``, the observation ends as soon as every job ended and the side is back at its
    starting size (``tail`` bounds the wait)."""
    name = unique(side.replace("-", ""))
    queue = unique("sbs")
    asyncio.run(farm.submit(connection, queue, release.CONTAINER, TEMPLATE, []))  # the queue
    pool = pool_spec(queue, image, from_zero=trace.from_zero, limits=limits)
    pool["metadata"]["name"] = name
    start_replicas = 0 if trace.from_zero else 1
    if side == "ours":
        tools.apply(pool)
        deployment, selector = f"{name}-renderer", f"app.kubernetes.io/instance={name}"
    else:
        assert keda is not None
        setting = KedaSetting.parse(side)
        if limits.scale_down_s is not None:
            setting = dataclasses.replace(setting, window=limits.scale_down_s)
        manifest = keda_deployment(name, pool, replicas=start_replicas)
        tools.apply(manifest)
        objects = scaled_object(
            manifest["metadata"]["name"], queue, setting=setting,
            min_replicas=start_replicas, max_replicas=limits.max_pods,
        )  # fmt: skip
        for obj in objects:
            tools.apply(obj)
        deployment = manifest["metadata"]["name"]
        selector = f"app.kubernetes.io/instance={name}"
    data = json.loads((release.ROOT / "examples" / "data" / f"{TEMPLATE}.json").read_text())
    try:
        _wait_ready(tools, selector, start_replicas)
        watched = name if side == "ours" else None
        with Sampler(tools, selector=selector, deployment=deployment, pool=watched) as sampler:
            ids = asyncio.run(replay(connection, queue, trace, data))
            run = asyncio.run(results(connection, queue, ids, timeout=trace.duration + 600))
            deadline = sampler.start + trace.duration + tail
            while time.time() < deadline:
                if settle and _settled(sampler.samples, start_replicas):
                    break
                time.sleep(1)
            end = time.time()
        run.side, run.trace = side, trace.name
        run.pod_seconds = sampler.pod_seconds(end)
        run.cpu_seconds = run.pod_seconds * cpu_request(pool)
        run.replicas = sampler.samples
        run.pod_starts = sampler.pod_starts()
        run.pod_serving = [  # a pod idle when Ready started serving then
            min(run.first_renders.get(name, ready), ready) - sampler.created_at[name]
            for name, ready in sampler.ready_at.items()
            if sampler.created_since_start(name)
        ]
        run.reversals = reversals(sampler.samples)
        for at, message in sampler.decisions:  # the operator's reasoning, for the log
            print(f"{side} {trace.name} {at:7.1f}s {message}")
        return run
    finally:
        _remove(tools, side, name, deployment, selector)


def _settled(samples: list[tuple[float, int, int]], replicas: int) -> bool:
    """The side went above ``replicas`` and is back: desired and Ready both ``replicas``."""
    return (
        any(desired > replicas for _, desired, _ in samples)
        and bool(samples)
        and samples[-1][1:] == (replicas, replicas)
    )


def _wait_ready(tools: farm.Tools, selector: str, count: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ready = [p for p in tools.running_pods(release.NAMESPACE, selector) if _ready_since(p)]
        pods = tools.get("pods", "-n", release.NAMESPACE, "-l", selector)["items"]
        if len(ready) == count and len(pods) == count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{selector}: {len(ready)} Ready of {len(pods)}, want {count}")
        time.sleep(1)


def _remove(tools: farm.Tools, side: str, name: str, deployment: str, selector: str) -> None:
    ns = release.NAMESPACE
    if side == "ours":
        tools.kubectl("delete", "reportpool", name, "-n", ns, "--wait=false", check=False)
    else:
        for kind in ("scaledobject", "triggerauthentication"):
            tools.kubectl("delete", kind, deployment, "-n", ns, "--wait=false", check=False)
        tools.kubectl("delete", "deployment", deployment, "-n", ns, "--wait=false", check=False)
    deadline = time.monotonic() + 180
    while tools.get("pods", "-n", ns, "-l", selector)["items"] and time.monotonic() < deadline:
        time.sleep(2)
