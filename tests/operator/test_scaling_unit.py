"""One scaling-loop iteration with fakes for the Kubernetes adapter and the observer.

Pure logic only: what the loop decides, applies (and in which order), writes to the status and
says in Events. The real API server, queue and pods are in tests/kube/test_operator.py.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import kopf
import pytest
from reportfarm_operator import handlers, k8s, observing, reporting, scaling, specs

from reportfarm import capacity, policy

NOW = 1_800_000_000.0
NS, NAME = "billing", "invoices"
DEPLOYMENT = k8s.object_path("apps/v1", "Deployment", NS, f"{NAME}-renderer")
SPEC: dict[str, Any] = {
    "queue": {"name": "reports", "connectionSecretRef": {"name": "storage"}},
    "image": "renderer:1",
    "templates": {"configMapName": "report-templates"},
    "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
    "browser": {"cpu": "500m", "memory": "512Mi"},  # 4 browsers fit a pod
    "replicas": {"min": 0, "max": 5},
    "browsersPerPod": {"min": 1, "max": 4},
    "target": {"queueWaitSeconds": 5},
    "scaleDown": {"stabilizationSeconds": 60},
    "scaleToZero": {"idleSeconds": 300},
}


class FakeKube:
    """Objects by path; every write recorded in order."""

    def __init__(self, objects: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.objects = {path: copy.deepcopy(obj) for path, obj in (objects or {}).items()}
        self.writes: list[tuple[str, str, Any]] = []

    async def get(self, path: str) -> dict[str, Any] | None:
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None

    async def list(self, path: str, *, label_selector: Mapping[str, str]) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for key, obj in sorted(self.objects.items())
            if key.startswith(f"{path}/")
            and label_selector.items() <= obj["metadata"].get("labels", {}).items()
        ]

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("PATCH", path, copy.deepcopy(patch)))
        if path not in self.objects:
            raise k8s.KubeError(404, "not found", reason="NotFound")
        _merge(self.objects[path], patch)
        return copy.deepcopy(self.objects[path])

    async def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        path = k8s.manifest_path(manifest)
        self.writes.append(("CREATE", path, copy.deepcopy(manifest)))
        self.objects[path] = {**copy.deepcopy(dict(manifest)), "status": {}}
        return copy.deepcopy(self.objects[path])

    async def delete(self, path: str) -> None:
        self.writes.append(("DELETE", path, None))
        self.objects.pop(path, None)


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeObserver:
    def __init__(
        self,
        *,
        depth: int | None,
        loads: Mapping[str, observing.PodLoad | None] | None = None,
        resize_error: str | None = None,
        missing: bool = False,
    ) -> None:
        self.depth = depth
        self.missing = missing
        self.loads = dict(loads or {})
        self.resize_error = resize_error
        self.resized: list[tuple[str, int]] = []

    async def queue(self, namespace: str, queue: specs.QueueSpec) -> observing.QueueReading:
        if self.missing:
            return observing.QueueReading(
                depth=0, poison_depth=0, missing_lanes=("q", "q-interactive")
            )
        if self.depth is None:
            return observing.QueueReading(
                depth=None, error="ServiceRequestError: connection refused"
            )
        return observing.QueueReading(depth=self.depth, poison_depth=0)

    async def admin_token(self, namespace: str, spec: specs.ReportPoolSpec) -> str | None:
        return None

    async def pod_loads(
        self, pods: Mapping[str, tuple[str, str]]
    ) -> dict[str, observing.PodLoad | str]:
        return {name: self.loads.get(name) or "timed out" for name in pods}

    async def resize(self, ip: str, size: int, *, token: str | None) -> str | None:
        self.resized.append((ip, size))
        return self.resize_error


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{NAME}-renderer", "namespace": NS},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def pod(name: str, *, ready: bool = True, ip: str | None = None) -> tuple[str, dict[str, Any]]:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/component": "renderer", "reportfarm.io/pool": NAME},
        },
        "status": {
            "phase": "Running",
            "podIP": ip or f"10.0.0.{sum(map(ord, name)) % 250}",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    return k8s.object_path("v1", "Pod", NS, name), manifest


def cluster(replicas: int, *pods: tuple[str, dict[str, Any]]) -> FakeKube:
    return FakeKube({DEPLOYMENT: deployment(replicas), **dict(pods)})


def body(status: Mapping[str, Any] | None = None, **spec: Any) -> kopf.Body:
    raw = {
        "apiVersion": "reportfarm.io/v1alpha1",
        "kind": "ReportPool",
        "metadata": {"name": NAME, "namespace": NS, "uid": "uid-pool", "generation": 2},
        "spec": {**SPEC, **spec},
        "status": dict(status or {}),
    }
    return kopf.Body(raw)


def remembered(**state: Any) -> dict[str, Any]:
    """A status holding the policy's memory from an earlier tick."""
    return {"policy": policy.State(**state).to_dict()}


async def tick(
    pool: kopf.Body, kube: FakeKube, observer: FakeObserver, *, now: float = NOW
) -> scaling.Outcome:
    outcome = await scaling.scale(pool, kube=kube, observer=observer, now=now)  # type: ignore[arg-type]
    assert outcome is not None
    return outcome


def conditions(outcome: scaling.Outcome) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in outcome.status["conditions"]}


def replica_patches(kube: FakeKube) -> list[int]:
    return [w[2]["spec"]["replicas"] for w in kube.writes if w[1] == DEPLOYMENT]


async def test_a_burst_wakes_the_pool_from_zero_and_says_why() -> None:
    kube = cluster(0)
    outcome = await tick(body(), kube, FakeObserver(depth=40))
    decision = outcome.decision
    assert decision.reason is policy.Reason.WAKE_FROM_ZERO
    assert replica_patches(kube) == [decision.replicas] and decision.replicas >= 2
    assert outcome.status["replicas"] == decision.replicas
    assert outcome.status["browsersPerPod"] == decision.browsers_per_pod
    assert outcome.status["queueDepth"] == 40
    assert outcome.status["lastDecision"]["reason"] == "WakeFromZero"
    assert outcome.status["lastScaleTime"] == reporting.timestamp(NOW)
    assert outcome.status["policy"]["lastWorkAt"] == NOW
    assert [(e.type, e.reason) for e in outcome.events] == [("Normal", "WakeFromZero")]
    found = conditions(outcome)
    assert found["QueueReachable"]["status"] == "True"
    assert found["Scaling"]["status"] == "True"
    assert found["Scaling"]["reason"] == "ScalingUp"
    assert found["Ready"]["status"] == "False"  # no pod can render yet


async def test_the_pool_grows_inside_running_pods_before_adding_pods() -> None:
    kube = cluster(1, pod("a"))
    loads = {"a": observing.PodLoad(size=1, busy=1)}
    observer = FakeObserver(depth=4, loads=loads)
    status = remembered(replicas=1, browsers_per_pod=1, decided_at=NOW - 5, busy_average=1.0)
    outcome = await tick(body(status, replicas={"min": 1, "max": 5}), kube, observer)
    assert outcome.decision.reason is policy.Reason.POOL_GROW
    assert observer.resized == [
        (kube.objects[pod("a")[0]]["status"]["podIP"], outcome.decision.browsers_per_pod)
    ]
    assert outcome.decision.browsers_per_pod > 1
    assert replica_patches(kube) == []  # no cold start
    assert [e.reason for e in outcome.events] == ["PoolGrow"]


async def test_before_lowering_replicas_the_idlest_pods_are_marked_for_deletion() -> None:
    kube = cluster(3, pod("a"), pod("b"), pod("c", ready=False))
    loads: dict[str, observing.PodLoad | str] = {
        "a": observing.PodLoad(size=4, busy=2),
        "b": observing.PodLoad(size=4, busy=0),
        "c": "timed out",  # starting: load unknown, so it is spared
    }
    status = remembered(
        replicas=3, browsers_per_pod=4, decided_at=NOW - 5, busy_average=2.0, last_work_at=NOW
    )
    outcome = await tick(body(status), kube, FakeObserver(depth=0, loads=loads))
    assert outcome.decision.reason is policy.Reason.SCALE_DOWN
    paths = [w[1] for w in kube.writes]
    assert paths[-1] == DEPLOYMENT  # replicas go down last
    costs = {
        path.rsplit("/", 1)[1]: patch["metadata"]["annotations"][scaling.DELETION_COST]
        for _, path, patch in kube.writes[:-1]
    }
    assert costs == {"b": "0", "a": "1", "c": "2"}  # the idlest is deleted first
    assert replica_patches(kube) == [outcome.decision.replicas]
    assert [e.reason for e in outcome.events] == ["ScaleDown"]


async def test_an_unchanged_deletion_cost_is_not_patched_again() -> None:
    path, marked = pod("a")
    marked["metadata"]["annotations"] = {scaling.DELETION_COST: "0"}
    kube = cluster(2, (path, marked), pod("b"))
    loads = {"a": observing.PodLoad(size=4, busy=0), "b": observing.PodLoad(size=4, busy=1)}
    status = remembered(replicas=2, browsers_per_pod=4, decided_at=NOW - 5, busy_average=1.0)
    await tick(
        body(status, replicas={"min": 1, "max": 5}), kube, FakeObserver(depth=0, loads=loads)
    )
    patched_pods = [w[1].rsplit("/", 1)[1] for w in kube.writes if "/pods/" in w[1]]
    assert patched_pods == ["b"]


async def test_an_unreadable_queue_keeps_the_size_and_never_scales_to_zero() -> None:
    kube = cluster(2, pod("a"), pod("b"))
    status = remembered(replicas=2, browsers_per_pod=3, decided_at=NOW - 5, last_work_at=NOW - 3600)
    loads = {name: observing.PodLoad(size=3, busy=0) for name in ("a", "b")}
    outcome = await tick(body(status), kube, FakeObserver(depth=None, loads=loads))
    assert outcome.decision.reason is policy.Reason.QUEUE_UNREADABLE
    assert (outcome.decision.replicas, outcome.decision.browsers_per_pod) == (2, 3)
    assert replica_patches(kube) == []
    found = conditions(outcome)
    assert found["QueueReachable"]["status"] == "False"
    assert "connection refused" in found["QueueReachable"]["message"]
    assert found["Degraded"]["reason"] == "QueueUnreadable"
    assert outcome.status["queueDepth"] is None  # unknown, not zero
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "QueueUnreadable")]

    # The next tick, still unreadable: the same condition, no second warning.
    again = await tick(
        body(outcome.status), kube, FakeObserver(depth=None, loads=loads), now=NOW + 5
    )
    assert again.events == []
    assert conditions(again)["QueueReachable"]["lastTransitionTime"] == reporting.timestamp(NOW)
    # And when it comes back, an Event says so.
    back = await tick(body(again.status), kube, FakeObserver(depth=0, loads=loads), now=NOW + 10)
    assert ("Normal", "QueueReachable") in [(e.type, e.reason) for e in back.events]
    assert conditions(back)["QueueReachable"]["lastTransitionTime"] == reporting.timestamp(NOW + 10)


async def test_a_restarted_operator_carries_on_from_the_status() -> None:
    """The scale-down window (of the steady need) lives in the status: a new process keeps
    honouring it."""
    kube = cluster(2, pod("a"), pod("b"))
    busy = {name: observing.PodLoad(size=4, busy=4) for name in ("a", "b")}
    burst = await tick(body(), kube, FakeObserver(depth=8, loads=busy))
    peak = burst.decision.replicas
    kube.objects[DEPLOYMENT] = deployment(peak)
    # A new operator (new fakes, nothing in memory) sees an empty queue 20 s later.
    carried = await tick(body(burst.status), cluster(peak), FakeObserver(depth=0), now=NOW + 20)
    assert carried.decision.reason is policy.Reason.STABILIZING
    assert carried.decision.replicas == peak
    # Without that memory, the same observation would scale down at once.
    forgetful = await tick(body(), cluster(peak), FakeObserver(depth=0), now=NOW + 20)
    assert forgetful.decision.replicas < peak


async def test_unreachable_renderers_leave_the_queue_depth_to_decide() -> None:
    pods = [scaling.pods_of([pod(n)[1]])[0] for n in ("a", "b")]
    reading = observing.QueueReading(depth=10)
    silent = {"a": "timed out", "b": "ClientConnectorError: connection refused"}
    observation = scaling.observe(now=NOW, reading=reading, pods=pods, loads=silent, start_size=4)
    assert observation.busy_browsers is None  # unknown, the policy estimates it from the depth
    assert observation.browsers_per_pod == 4  # the start size, as no pod answered
    assert observation.ready_replicas == 2
    answered = {"a": observing.PodLoad(size=2, busy=2), "b": observing.PodLoad(size=2, busy=1)}
    observation = scaling.observe(now=NOW, reading=reading, pods=pods, loads=answered, start_size=4)
    assert (observation.busy_browsers, observation.browsers_per_pod) == (3, 2)


def test_completed_renders_are_the_interval_counts_of_pods_read_before() -> None:
    pods = [scaling.pods_of([pod(n)[1]])[0] for n in ("a", "b")]
    reading = observing.QueueReading(depth=10)
    loads = {
        "a": observing.PodLoad(size=4, busy=4, renders=7, render_seconds=3.5),
        "b": observing.PodLoad(size=4, busy=4, renders=5, render_seconds=2.5),
    }
    seen = scaling.observe(now=NOW, reading=reading, pods=pods, loads=loads, start_size=4)
    assert seen.completed == 12
    loads["b"] = observing.PodLoad(size=4, busy=1, renders=900, first_reading=True)
    seen = scaling.observe(now=NOW, reading=reading, pods=pods, loads=loads, start_size=4)
    assert seen.completed is None  # b's 900 is its lifetime, not the last tick's


def test_the_pods_start_up_signature_reaches_the_observation() -> None:
    """The most any pod that answered measured (a pod that says 0 has no key or no process up
    yet), whether or not a job is in finishing: the policy decides what it stands in for."""
    pods = [scaling.pods_of([pod(n)[1]])[0] for n in ("a", "b")]
    reading = observing.QueueReading(depth=20)
    loads: dict[str, observing.PodLoad | str] = {
        "a": observing.PodLoad(size=1, busy=0, signature_cpu_s=0.05),
        "b": observing.PodLoad(size=1, busy=0, signature_cpu_s=0.06),
    }
    seen = scaling.observe(now=NOW, reading=reading, pods=pods, loads=loads, start_size=1)
    assert seen.signature_cpu_s == 0.06 and seen.finish_cpu_s is None
    loads = {"a": observing.PodLoad(size=1, busy=0), "b": "connection refused"}
    seen = scaling.observe(now=NOW, reading=reading, pods=pods, loads=loads, start_size=1)
    assert seen.signature_cpu_s is None


def test_jobs_in_finishing_keep_their_pods_busy() -> None:
    """A signing farm's jobs leave their browsers after a 35 ms print and sign for ~0.3 s in a
    finishing process: the pods read busy by them (up to their pool's size), for the sizing and
    for the choice of which pod to let go; on the real node the policy read 0 busy while 36 jobs
    waited and cancelled two starting pods."""
    pods = [scaling.pods_of([pod(n)[1]])[0] for n in ("a", "b")]
    loads = {
        "a": observing.PodLoad(size=4, busy=0, finishing=2),
        "b": observing.PodLoad(size=1, busy=1, finishing=2),
    }
    seen = scaling.observe(
        now=NOW, reading=observing.QueueReading(depth=36), pods=pods, loads=loads, start_size=4
    )
    assert seen.busy_browsers == 2 + 1
    busy, _ = scaling.busy_and_ages(pods, loads)
    assert busy == {"a": 2, "b": 1}


def test_the_finishing_cpu_reaches_the_observation_and_raises_the_browsers_cpu() -> None:
    """Finishing that takes more CPU than the spec's browser share makes the policy size pods
    by the job's CPU: fewer browsers per pod than by browsers alone."""
    pods = [scaling.pods_of([pod(n)[1]])[0] for n in ("a", "b")]
    reading = observing.QueueReading(depth=40)
    loads = {
        n: observing.PodLoad(
            size=4, busy=4, renders=10, render_seconds=5.0, finish_cpu_seconds=f, jobs_ended=10
        )
        for n, f in (("a", 4.0), ("b", 6.0))
    }
    seen = scaling.observe(now=NOW, reading=reading, pods=pods, loads=loads, start_size=4)
    assert seen.finish_cpu_s == pytest.approx(0.5)  # 10 s over 20 jobs
    spec = policy.PoolSpec(max_browsers_per_pod=4, pod_cpu=2.0, browser_cpu=0.5)
    # 0.5 s at 0.5 cores printing and 0.5 s finishing, every 0.5 s: 1.5 cores a busy browser.
    assert capacity.sized(spec, seen, render_s=0.5).browser_cpu == pytest.approx(1.5)
    plain = dataclasses.replace(seen, finish_cpu_s=None)
    assert policy.decide(seen, spec).browsers_per_pod < policy.decide(plain, spec).browsers_per_pod


async def test_terminating_and_finished_pods_do_not_count() -> None:
    _, terminating = pod("a")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    _, done = pod("b")
    done["status"]["phase"] = "Succeeded"
    _, alive = pod("c")
    assert [p.name for p in scaling.pods_of([terminating, done, alive])] == ["c"]


async def test_a_failed_resize_is_a_warning_with_the_pod_and_no_resize_is_claimed() -> None:
    kube = cluster(1, pod("a"))
    observer = FakeObserver(
        depth=4,
        loads={"a": observing.PodLoad(size=1, busy=1)},
        resize_error="HTTP 401: unauthorized",
    )
    status = remembered(replicas=1, browsers_per_pod=1, decided_at=NOW - 5, busy_average=1.0)
    outcome = await tick(body(status, replicas={"min": 1, "max": 5}), kube, observer)
    assert outcome.decision is not None and outcome.decision.browsers_per_pod > 1
    found = conditions(outcome)
    assert found["Degraded"]["status"] == "True"
    assert found["Degraded"]["reason"] == "PoolResizeFailed"
    assert "HTTP 401: unauthorized: a" in found["Degraded"]["message"]
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "PoolResizeFailed")]
    assert "HTTP 401: unauthorized: a" in outcome.events[0].message
    # What runs is what the pod said, not what was asked.
    assert outcome.status["pods"] == [
        {"name": "a", "phase": "Running", "ready": True, "poolSize": 1, "busy": 1}
    ]
    assert outcome.status["browsers"] == f"1/{outcome.decision.browsers_per_pod}"
    assert outcome.status["currentBrowsersPerPod"] == 1
    assert found["Scaling"]["reason"] == "ResizingPools"
    assert outcome.status["reason"] == "PoolResizeFailed"  # the REASON column


async def test_blind_renderers_give_unknown_busy_and_a_condition_naming_them() -> None:
    kube = cluster(2, pod("a"), pod("b"))
    status = remembered(replicas=2, browsers_per_pod=4, decided_at=NOW - 5, busy_average=1.0)
    loads: dict[str, observing.PodLoad | str] = {"a": observing.PodLoad(size=4, busy=1)}
    outcome = await tick(body(status), kube, FakeObserver(depth=3, loads=loads))
    found = conditions(outcome)
    assert found["MetricsReadable"]["status"] == "False"
    assert found["MetricsReadable"]["reason"] == "Blind"
    assert "(timed out: b)" in found["MetricsReadable"]["message"]
    assert ": a" not in found["MetricsReadable"]["message"]
    assert outcome.status["browsers"].startswith("?/")  # running browsers unknown
    assert outcome.status["runningBrowsers"] is None
    assert {"name": "b", "phase": "Running", "ready": True, "metrics": "timed out"} in (
        outcome.status["pods"]
    )
    assert found["Scaling"]["reason"] != "Stable"  # nothing verified
    assert ("Warning", "Blind") in [(e.type, e.reason) for e in outcome.events]
    again = await tick(body(outcome.status), kube, FakeObserver(depth=3, loads=loads), now=NOW + 5)
    assert ("Warning", "Blind") not in [(e.type, e.reason) for e in again.events]


async def test_an_unschedulable_pod_is_in_the_status_the_reason_and_degraded() -> None:
    path, stuck = pod("c", ready=False)
    stuck["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 Insufficient cpu.",
            }
        ],
    }
    kube = cluster(2, pod("a"), (path, stuck))
    loads = {"a": observing.PodLoad(size=4, busy=4)}
    status = remembered(replicas=2, browsers_per_pod=4, decided_at=NOW - 5, busy_average=4.0)
    outcome = await tick(body(status), kube, FakeObserver(depth=6, loads=loads))
    found = conditions(outcome)
    assert found["PodsRunning"]["status"] == "False"
    assert found["PodsRunning"]["reason"] == "Unschedulable"
    assert "Insufficient cpu" in found["PodsRunning"]["message"]
    assert found["Degraded"]["status"] == "True"
    assert found["Degraded"]["reason"] == "Unschedulable"
    assert outcome.status["reason"] == "Unschedulable"
    assert "Insufficient cpu" in outcome.status["message"]
    listed = {entry["name"]: entry for entry in outcome.status["pods"]}
    assert listed["c"]["reason"] == "Unschedulable"
    assert ("Warning", "Unschedulable") in [(e.type, e.reason) for e in outcome.events]


async def test_a_queue_not_created_yet_is_waiting_for_the_first_job() -> None:
    outcome = await tick(body(), cluster(0), FakeObserver(depth=None, missing=True))
    found = conditions(outcome)
    assert found["QueueReachable"]["status"] == "True"
    assert found["QueueReachable"]["reason"] == "QueueNotCreated"
    assert "waiting for the first job" in found["QueueReachable"]["message"]
    assert found["Degraded"]["status"] == "False"
    assert outcome.events == []
    assert outcome.status["queueDepth"] == 0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"browser": {"cpu": "0", "memory": "512Mi"}}, "spec.browser.cpu", id="zero"),
        pytest.param(
            {"browser": {"cpu": "-1", "memory": "512Mi"}}, "spec.browser.cpu", id="negative"
        ),
        pytest.param(
            {"resources": {"requests": {"cpu": "3", "memory": "1Gi"}, "limits": {"cpu": "2"}}},
            "spec.resources.requests.cpu",
            id="request above limit",
        ),
        pytest.param({"resources": {}}, "spec.resources.limits.cpu", id="no resources"),
        pytest.param({"replicas": {"min": 15}}, "spec.replicas.min", id="min above default max"),
        # Fields the CRD requires, absent from an object stored without them: parsed once, the
        # same permanent InvalidSpec (no KeyError retried forever further down).
        pytest.param({"image": None}, "spec.image", id="no image"),
        pytest.param(
            {"queue": {"connectionSecretRef": {"name": "s"}}}, "spec.queue.name", id="no queue name"
        ),
        pytest.param({"queue": {"name": "jobs"}}, "spec.queue", id="no way to sign in"),
    ],
)
async def test_an_unusable_spec_keeps_the_size_and_says_which_field(
    spec: dict[str, Any], field: str
) -> None:
    kube = cluster(2)
    outcome = await tick(
        body(remembered(replicas=2, browsers_per_pod=2), **spec), kube, FakeObserver(depth=9)
    )
    assert outcome.decision is None
    assert kube.writes == []  # nothing scaled
    found = conditions(outcome)
    assert found["SpecValid"]["status"] == "False"
    assert found["SpecValid"]["reason"] == "InvalidSpec"
    assert field in found["SpecValid"]["message"]
    assert outcome.status["reason"] == "InvalidSpec"
    assert "replicas" not in outcome.status  # the last decision stays as it was
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "InvalidSpec")]
    assert field in outcome.events[0].message
    # Once said, not repeated every tick.
    status = {**remembered(replicas=2, browsers_per_pod=2), **outcome.status}
    again = await tick(body(status, **spec), kube, FakeObserver(depth=9), now=NOW + 5)
    assert again.events == []


async def test_browsers_that_do_not_fit_are_adjusted_and_said() -> None:
    outcome = await tick(
        body(browsersPerPod={"min": 6, "max": 8}), cluster(0), FakeObserver(depth=0)
    )
    found = conditions(outcome)
    assert found["SpecValid"]["status"] == "False"
    assert found["SpecValid"]["reason"] == "SpecAdjusted"
    assert "spec.browsersPerPod.min" in found["SpecValid"]["message"]
    assert ("Warning", "SpecAdjusted") in [(e.type, e.reason) for e in outcome.events]


async def test_each_new_decision_is_one_info_line_with_its_inputs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG", logger="reportfarm_operator.scaling")
    first = await tick(body(), cluster(0), FakeObserver(depth=40))
    lines = [r for r in caplog.records if r.name == "reportfarm_operator.scaling"]
    assert [r.levelname for r in lines] == ["INFO"]
    record = lines[0]
    assert record.reason == "WakeFromZero"  # type: ignore[attr-defined]
    assert record.inputs["queueDepth"] == 40  # type: ignore[attr-defined]
    assert record.inputs["busyBrowsers"] == 0  # type: ignore[attr-defined]
    assert record.to["replicas"] == first.status["replicas"]  # type: ignore[attr-defined]
    assert "-> " in record.getMessage() and "WakeFromZero" in record.getMessage()
    caplog.clear()
    second = await tick(
        body(first.status),
        cluster(first.status["replicas"]),
        FakeObserver(depth=40),
        now=NOW + 5,
    )
    assert second.decision is not None
    same = second.status["lastDecision"] | {"time": None} == first.status["lastDecision"] | {
        "time": None,
        "message": second.decision.message,
    }
    (line,) = [r for r in caplog.records if r.name == "reportfarm_operator.scaling"]
    assert line.levelname == ("DEBUG" if same else "INFO")


async def test_a_missing_deployment_is_recreated_and_the_tick_skipped() -> None:
    kube = FakeKube()
    status = {"replicas": 3}
    outcome = await scaling.scale(body(status), kube=kube, observer=FakeObserver(depth=5), now=NOW)  # type: ignore[arg-type]
    assert outcome is None
    created = {path: manifest for verb, path, manifest in kube.writes if verb == "CREATE"}
    assert created[DEPLOYMENT]["spec"]["replicas"] == 3  # the last decision, not the minimum


async def test_steady_ticks_keep_condition_transition_times() -> None:
    kube = cluster(1, pod("a"))
    loads = {"a": observing.PodLoad(size=4, busy=0)}  # full pools: 2 CPU / 0.5 per browser
    status = remembered(replicas=1, browsers_per_pod=4, decided_at=NOW - 5, busy_average=0.0)
    first = await tick(
        body(status, replicas={"min": 1, "max": 5}), kube, FakeObserver(depth=0, loads=loads)
    )
    second = await tick(
        body(first.status, replicas={"min": 1, "max": 5}),
        kube,
        FakeObserver(depth=0, loads=loads),
        now=NOW + 5,
    )
    assert second.decision.reason is policy.Reason.STEADY
    assert second.events == []
    assert second.status["lastScaleTime"] == first.status["lastScaleTime"]
    for kind, condition in conditions(second).items():
        assert condition["lastTransitionTime"] == conditions(first)[kind]["lastTransitionTime"], (
            kind
        )
    assert conditions(second)["Scaling"]["status"] == "False"
    assert conditions(second)["Ready"]["status"] == "True"


async def test_a_deployment_controlled_by_something_else_is_left_alone() -> None:
    kube = cluster(2)
    kube.objects[DEPLOYMENT]["metadata"]["ownerReferences"] = [
        {"kind": "ReportPool", "name": "other", "uid": "uid-other", "controller": True}
    ]
    with pytest.raises(kopf.PermanentError, match="another controller"):
        await tick(body(), kube, FakeObserver(depth=40))
    assert kube.writes == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"image": None}, "spec.image", id="no image"),
        pytest.param({"browser": {"cpu": "0", "memory": "512Mi"}}, "spec.browser.cpu", id="zero"),
    ],
)
async def test_reconciling_an_unusable_spec_is_permanent_before_any_call(
    spec: dict[str, Any], field: str
) -> None:
    """The create/update/resume path parses the same way: a permanent error (kopf does not
    retry it, and posts it as an Event on the pool), raised before the API is reached (the
    operator has no runtime here: reaching it would be a temporary error instead)."""
    with pytest.raises(kopf.PermanentError, match=f"invalid spec: {field}"):
        await handlers.reconcile(body=body(**spec), memo=kopf.Memo(), logger=logging.getLogger())


async def test_a_signing_pool_wakes_with_the_finishing_cpu_it_remembers() -> None:
    """A pool at zero, which read 1.2 s of finishing CPU a job in its last burst: the wake is
    sized for it (2 cores a busy browser: 1 browser a pod) though no job has ended since, the
    status says what it sized with, and the memory is written back."""
    status = remembered(replicas=0, browsers_per_pod=1, render_s=0.5, finish_cpu_s=1.2)
    outcome = await tick(body(status), cluster(0), FakeObserver(depth=40))
    assert outcome.decision.reason is policy.Reason.WAKE_FROM_ZERO
    assert outcome.decision.browsers_per_pod == 1, outcome.decision.message
    assert outcome.status["lastDecision"]["finishCpuSeconds"] == 1.2
    assert outcome.status["lastDecision"]["browserCpu"] == 2.0
    assert outcome.status["policy"]["knownFinishCpuSeconds"] == 1.2
    plain = await tick(body(), cluster(0), FakeObserver(depth=40))
    assert plain.decision.browsers_per_pod == 4  # not remembered: sized by browsers
