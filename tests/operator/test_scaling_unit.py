"""One scaling-loop iteration with fakes for the Kubernetes adapter and the observer.

Pure logic only: what the loop decides, applies (and in which order), writes to the status and
says in Events. The real API server, queue and pods are in tests/kube/test_operator.py.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import kopf
import pytest
from reportfarm_operator import k8s, observing, reporting, scaling

from reportfarm import policy

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
    ) -> None:
        self.depth = depth
        self.loads = dict(loads or {})
        self.resize_error = resize_error
        self.resized: list[tuple[str, int]] = []

    async def queue(self, namespace: str, spec: Mapping[str, Any]) -> observing.QueueReading:
        if self.depth is None:
            return observing.QueueReading(
                depth=None, error="ServiceRequestError: connection refused"
            )
        return observing.QueueReading(depth=self.depth, poison_depth=0)

    async def admin_token(self, namespace: str, spec: Mapping[str, Any]) -> str | None:
        return None

    async def pod_loads(
        self, pods: Mapping[str, tuple[str, str]]
    ) -> dict[str, observing.PodLoad | None]:
        return {name: self.loads.get(name) for name in pods}

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
    loads = {
        "a": observing.PodLoad(size=4, busy=2),
        "b": observing.PodLoad(size=4, busy=0),
        "c": None,  # starting: load unknown, so it is spared
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
    outcome = await tick(body(status), kube, FakeObserver(depth=None))
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
    again = await tick(body(outcome.status), kube, FakeObserver(depth=None), now=NOW + 5)
    assert again.events == []
    assert conditions(again)["QueueReachable"]["lastTransitionTime"] == reporting.timestamp(NOW)
    # And when it comes back, an Event says so.
    back = await tick(body(again.status), kube, FakeObserver(depth=0), now=NOW + 10)
    assert ("Normal", "QueueReachable") in [(e.type, e.reason) for e in back.events]
    assert conditions(back)["QueueReachable"]["lastTransitionTime"] == reporting.timestamp(NOW + 10)


async def test_a_restarted_operator_carries_on_from_the_status() -> None:
    """The scale-down window lives in the status: a new process keeps honouring it."""
    kube = cluster(0)
    burst = await tick(body(), kube, FakeObserver(depth=60))
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
    observation = scaling.observe(
        now=NOW, reading=reading, pods=pods, loads={"a": None, "b": None}, start_size=4
    )
    assert observation.busy_browsers is None  # unknown, the policy estimates it from the depth
    assert observation.browsers_per_pod == 4  # the start size, as no pod answered
    assert observation.ready_replicas == 2
    answered = {"a": observing.PodLoad(size=2, busy=2), "b": observing.PodLoad(size=2, busy=1)}
    observation = scaling.observe(now=NOW, reading=reading, pods=pods, loads=answered, start_size=4)
    assert (observation.busy_browsers, observation.browsers_per_pod) == (3, 2)


async def test_terminating_and_finished_pods_do_not_count() -> None:
    _, terminating = pod("a")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    _, done = pod("b")
    done["status"]["phase"] = "Succeeded"
    _, alive = pod("c")
    assert [p.name for p in scaling.pods_of([terminating, done, alive])] == ["c"]


async def test_a_failed_resize_is_reported_as_degraded() -> None:
    kube = cluster(1, pod("a"))
    observer = FakeObserver(
        depth=4,
        loads={"a": observing.PodLoad(size=1, busy=1)},
        resize_error="HTTP 401: unauthorized",
    )
    status = remembered(replicas=1, browsers_per_pod=1, decided_at=NOW - 5, busy_average=1.0)
    outcome = await tick(body(status, replicas={"min": 1, "max": 5}), kube, observer)
    found = conditions(outcome)
    assert found["Degraded"]["status"] == "True"
    assert found["Degraded"]["reason"] == "PoolResizeFailed"
    assert "401" in found["Degraded"]["message"]
    assert ("Warning", "PoolResizeFailed") in [(e.type, e.reason) for e in outcome.events]


async def test_a_missing_deployment_is_recreated_and_the_tick_skipped() -> None:
    kube = FakeKube()
    status = {"replicas": 3}
    outcome = await scaling.scale(body(status), kube=kube, observer=FakeObserver(depth=5), now=NOW)  # type: ignore[arg-type]
    assert outcome is None
    created = {path: manifest for verb, path, manifest in kube.writes if verb == "CREATE"}
    assert created[DEPLOYMENT]["spec"]["replicas"] == 3  # the last decision, not the minimum


async def test_steady_ticks_keep_condition_transition_times() -> None:
    kube = cluster(1, pod("a"))
    loads = {"a": observing.PodLoad(size=1, busy=0)}
    status = remembered(replicas=1, browsers_per_pod=1, decided_at=NOW - 5, busy_average=0.0)
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


@pytest.mark.parametrize(
    ("spec", "message"),
    [pytest.param({"replicas": {"min": 3, "max": 1}}, "min_replicas", id="min above max")],
)
async def test_an_unusable_spec_is_a_permanent_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(kopf.PermanentError, match=message):
        await tick(body(**spec), cluster(0), FakeObserver(depth=0))


async def test_a_deployment_controlled_by_something_else_is_left_alone() -> None:
    kube = cluster(2)
    kube.objects[DEPLOYMENT]["metadata"]["ownerReferences"] = [
        {"kind": "ReportPool", "name": "other", "uid": "uid-other", "controller": True}
    ]
    with pytest.raises(kopf.PermanentError, match="another controller"):
        await tick(body(), kube, FakeObserver(depth=40))
    assert kube.writes == []
