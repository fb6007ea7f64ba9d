"""The operator as an SRE runs it, on the real control plane (kwok pods, a real Azurite).

- **Blind**: kwok pods serve no /metrics (as pods behind a NetworkPolicy or a wrong port): the
  pool's size must stay bounded by what the queue depth asks for, not climb with every pod it
  adds, and the status must say it runs blind and which pods did not answer.
- **Pending pods**: pods that no node can hold are in the status, the REASON column and a
  condition, with the scheduler's reason.
- **Deletable when down**: no finalizer (an old one is removed on upgrade); a pool deleted with
  the operator stopped is gone at once, and so are its children.
- **A queue not created yet** is "waiting for the first job", not an outage.
- **An invalid pool stored before the CRD's rules** gets SpecValid=False and one Warning Event
  naming the field.
- **Logs**: one line per decision, JSON or text as asked, off a terminal.

The operator runs as a process of its own (``reportfarm operator``), as in a pod. Deadlines bound
every wait; no timing is asserted.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from reportfarm_operator import specs

from reportfarm import azurite
from reportfarm.storage.queueing import JobQueue
from tests.harness import polling, pools, reportpools
from tests.harness.operators import ROOT, OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.azurite, pytest.mark.slow]

eventually = functools.partial(polling.eventually, timeout=180.0)

CRD = ROOT / "crds" / "reportpools.reportfarm.io.yaml"
GROUP, VERSION, PLURAL = reportpools.GROUP, reportpools.VERSION, reportpools.PLURAL
POOL = "sre"


def kubectl(kube_bin: Path, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    command = [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig}", *args]
    done = subprocess.run(
        command, check=True, capture_output=True, text=True, timeout=120, input=stdin
    )
    return done.stdout


@pytest.fixture(scope="module")
def crd(kube_bin: Path, kubeconfig_path: Path) -> str:
    kubectl(
        kube_bin, kubeconfig_path, "apply", "--server-side", "--force-conflicts", "-f", str(CRD)
    )
    kubectl(
        kube_bin,
        kubeconfig_path,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/reportpools.reportfarm.io",
    )
    return "reportpools.reportfarm.io"


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient, crd: str) -> Iterator[str]:
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    name = f"rf-sre-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def operators(tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    started: list[OperatorProcess] = []

    def start(
        namespace: str, kubeconfig: Path, *, log_format: str = "text", **env: str
    ) -> OperatorProcess:
        """``env``: REPORTFARM_OPERATOR_* settings of this process."""
        log = tmp_path / f"operator-{len(started)}.log"
        process = OperatorProcess(namespace, kubeconfig, log, log_format=log_format, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.alive:
            process.kill()


def fill(connection: str, queue: str, count: int) -> None:
    async def go() -> None:
        async with JobQueue(connection, queue) as jobs:
            await jobs.ensure()
            for index in range(count):
                await jobs.send(json.dumps({"job": index}))

    asyncio.run(go())


def blind_bound(*, depth: int, target_wait_s: float, fit: int, jobs_per_browser: float) -> int:
    """The most browsers a blind pool may ask for: the depth drained within the accepted wait
    at the policy's default render time (1 s), at a utilization no lower than 50 %, or the floor
    on the depth (a browser per ``jobs_per_browser`` queued jobs) if higher, in full pods of
    ``fit`` browsers. It depends on the depth alone, never on the pods already running."""
    need = max(math.ceil(2 * depth * 1.0 / target_wait_s), math.ceil(depth / jobs_per_browser))
    return fit * math.ceil(need / fit)


@pytest.mark.timeout(900)
def test_blind_renderers_keep_the_size_bounded_by_the_queue_and_say_so(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    kube_bin: Path,
    namespace: str,
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    fill(connection, queue, 20)  # 20 jobs, and nothing drains them (kwok pods render nothing)
    pool = pools.Pool(kube_api, namespace, POOL)
    # The chart example's windows: 30 s target wait, up to 10 pods of 4 browsers.
    pool.create(
        queue,
        connection,
        replicas={"min": 0, "max": 10},
        target={"queueWaitSeconds": 30},
        scaleToZero={"idleSeconds": 600},
    )
    floor = specs.DEFAULTS["target"]["jobsPerBrowser"]  # the default floor: 10 browsers for 20
    bound = blind_bound(depth=20, target_wait_s=30, fit=4, jobs_per_browser=floor)
    operator = operators(namespace, kubeconfig_path, log_format="json")

    eventually(
        "a renderer pod Running (kwok)",
        lambda: any(p.status.phase == "Running" for p in pool.pods()),
        detail=operator.tail,
    )
    blind = eventually(
        "MetricsReadable=False (Blind): the pods serve no /metrics",
        lambda: (
            pool.condition("MetricsReadable").get("reason") == "Blind"
            and pool.condition("MetricsReadable")
        ),
        detail=operator.tail,
    )
    assert "did not answer /metrics" in blind["message"]
    ready = [p.metadata.name for p in pool.pods() if p.status.phase == "Running"]
    assert any(name in blind["message"] for name in ready), (blind, ready)

    # Six decisions after the pods ran (30 s at one tick per 5 s): never past the bound.
    seen: list[tuple[float, int, str]] = []

    def six_decisions() -> bool:
        status = pool.status()
        decided = (status.get("policy") or {}).get("decidedAt")
        desired = int(status.get("desiredBrowsers") or 0)
        if decided is not None and (not seen or seen[-1][0] != decided):
            seen.append((decided, desired, str(status.get("browsers"))))
        assert desired <= bound, (
            f"a blind pool asks for {desired} browsers with 20 jobs queued (bound {bound}); "
            f"decisions so far: {seen}"
        )
        return len(seen) >= 6

    eventually("six decisions while blind", six_decisions, timeout=300, detail=operator.tail)
    assert all(browsers.startswith("?/") for _, _, browsers in seen)  # running: unknown
    # kubectl shows it: BROWSERS running/desired, REASON.
    table = kubectl(kube_bin, kubeconfig_path, "get", "reportpools", "-n", namespace)
    assert "?/" in table, table

    # One INFO line per new decision, as JSON with its inputs (the container format).
    lines = [json.loads(line) for line in operator.log.read_text().splitlines() if line[:1] == "{"]
    decisions = [line for line in lines if "inputs" in line and line.get("pool")]
    assert decisions, operator.tail()
    first = decisions[0]
    assert first["level"] == "INFO"
    assert first["inputs"]["queueDepth"] == 20
    assert {"from", "to", "reason"} <= set(first)


@pytest.mark.timeout(900)
def test_pods_no_node_can_hold_are_in_the_status_the_reason_and_a_condition(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    kube_bin: Path,
    namespace: str,
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],
) -> None:
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    fill(connection, queue, 0)
    pool = pools.Pool(kube_api, namespace, POOL)
    # Three pods of 3 CPUs on two fake nodes of 4 CPUs: one pod can never be scheduled.
    pool.create(
        queue,
        connection,
        replicas={"min": 3, "max": 3},
        resources={
            "requests": {"cpu": "3", "memory": "1Gi"},
            "limits": {"cpu": "3", "memory": "2Gi"},
        },
    )
    operator = operators(namespace, kubeconfig_path)
    stuck = eventually(
        "PodsRunning=False with the scheduler's reason",
        lambda: (
            pool.condition("PodsRunning").get("reason") == "Unschedulable"
            and pool.condition("PodsRunning")
        ),
        detail=operator.tail,
    )
    assert "Insufficient cpu" in stuck["message"], stuck
    status = pool.status()
    assert status["reason"] == "Unschedulable"
    assert pool.condition("Degraded")["status"] == "True"
    pending = [entry for entry in status["pods"] if entry.get("reason") == "Unschedulable"]
    assert len(pending) == 1, status["pods"]
    table = kubectl(kube_bin, kubeconfig_path, "get", "reportpools", "-n", namespace)
    assert "Unschedulable" in table, table
    warnings = [e for e in pool.events() if e.type == "Warning" and e.reason == "Unschedulable"]
    assert warnings, [e.reason for e in pool.events()]


@pytest.mark.timeout(900)
def test_a_pool_is_deleted_with_the_operator_stopped_and_waits_for_its_first_job(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],
) -> None:
    pool = pools.Pool(kube_api, namespace, POOL)
    never_created = f"q{uuid.uuid4().hex[:10]}"
    body = reportpools.report_pool(POOL, never_created)
    # As an earlier operator version left it: its finalizer on the pool.
    body["metadata"]["finalizers"] = ["reportfarm.io/finalizer"]
    pool.core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "storage"},
            "stringData": {"connection-string": azurite_server.connection_string},
        },
    )
    pool.create_body(body)
    operator = operators(namespace, kubeconfig_path)

    # A queue nobody sent to yet: waiting for the first job, not an outage.
    waiting = eventually(
        "QueueReachable=True (QueueNotCreated)",
        lambda: (
            pool.condition("QueueReachable").get("reason") == "QueueNotCreated"
            and pool.condition("QueueReachable")
        ),
        detail=operator.tail,
    )
    assert waiting["status"] == "True"
    assert "waiting for the first job" in waiting["message"]
    assert pool.condition("Degraded")["status"] == "False"
    assert not [e for e in pool.events() if e.type == "Warning"]
    # The old finalizer is removed; the operator adds none.
    eventually(
        "no finalizer on the pool",
        lambda: not ((pool.find() or {}).get("metadata", {}).get("finalizers")),
        detail=operator.tail,
    )
    eventually("the children", lambda: pool.deployment() is not None, detail=operator.tail)

    # The operator is gone (a crash loop, an image it cannot pull, uninstalled first) ...
    operator.kill()
    pool.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, POOL)
    # ... and the pool goes anyway, its children with it (the garbage collector).
    eventually("the pool deleted without the operator", lambda: pool.find() is None, timeout=60)
    eventually("the children deleted", lambda: pool.deployment() is None, timeout=180)


def permissive(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD without its CEL rules: as an older CRD was, which stored pools it now rejects."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "x-kubernetes-validations"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return dict(strip(crd))


@pytest.mark.timeout(900)
def test_an_invalid_pool_stored_before_the_rules_gets_a_condition_and_one_warning(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    kube_bin: Path,
    namespace: str,
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],
) -> None:
    connection = azurite_server.connection_string
    pool = pools.Pool(kube_api, namespace, POOL)
    strict = yaml.safe_load(CRD.read_text())
    apply = ("apply", "--server-side", "--force-conflicts", "-f", "-")
    kubectl(kube_bin, kubeconfig_path, *apply, stdin=json.dumps(permissive(strict)))

    def stored() -> dict[str, object] | None:
        try:
            return pool.create("jobs", connection, browser={"cpu": "0", "memory": "512Mi"})
        except kubernetes.client.ApiException as error:
            if error.status != 422:  # the strict rules still apply for a moment after the apply
                raise
            return None

    try:
        eventually("the API server to serve the CRD without its rules", stored, timeout=60)
    finally:
        kubectl(kube_bin, kubeconfig_path, *apply, stdin=json.dumps(strict))
    operator = operators(namespace, kubeconfig_path)

    invalid = eventually(
        "SpecValid=False naming the field",
        lambda: (
            pool.condition("SpecValid").get("status") == "False" and pool.condition("SpecValid")
        ),
        detail=operator.tail,
    )
    assert invalid["reason"] == "InvalidSpec"
    assert "spec.browser.cpu" in invalid["message"]
    assert pool.status()["reason"] == "InvalidSpec"
    assert pool.condition("Degraded")["reason"] == "InvalidSpec"

    def warned() -> list[Any]:
        return [e for e in pool.events() if e.reason == "InvalidSpec" and e.type == "Warning"]

    (warning,) = eventually("a Warning Event", warned, detail=operator.tail)
    assert "spec.browser.cpu" in warning.message
    # More ticks (a valid pool beside it counts them: every pass ticks both): still one Event,
    # and no traceback every tick in the log.
    start = pool.condition("SpecValid")["lastTransitionTime"]
    witness = pools.Pool(kube_api, namespace, "witness")
    witness.create("jobs", connection)
    decisions: set[float] = set()

    def five_more_ticks() -> bool:
        decided = witness.decided_at()
        if decided is not None:
            decisions.add(decided)
        return len(decisions) >= 5

    eventually("five ticks of the witness pool", five_more_ticks, detail=operator.tail)
    assert pool.condition("SpecValid")["lastTransitionTime"] == start
    assert len(warned()) == 1 and (warned()[0].count or 1) == 1, warned()
    assert "Traceback" not in operator.log.read_text()

    # Fixing the spec clears it.
    fixed = {"spec": {"browser": {"cpu": "500m"}}}
    pool.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, POOL, fixed)
    eventually(
        "SpecValid=True after the fix",
        lambda: pool.condition("SpecValid").get("status") == "True",
        detail=operator.tail,
    )
    eventually("the children after the fix", lambda: pool.deployment() is not None)
