"""The operator under faults, against a real API server, controller-manager and Azurite.

The operator runs as a real process (``python -m reportfarm.cli operator --namespace NS``), so it
can be killed with SIGKILL like a pod. The faults:

- **The API server unreachable**: the operator talks to the API server through a TCP forwarder on
  loopback (``ApiProxy``); pausing it cuts every connection and resets every new one, a real
  outage of a real server. The operator keeps running, and converges once the server is back.
- **The queue unreachable**: an Azurite started for the test (data on disk) is stopped: the
  status says ``QueueReachable=False``, the size is kept (never zero on an error), then recovers.
- **Contradictory limits**: the CRD's CEL rules reject them at the API server, on update too
  (creation is covered by tests/kube/test_operator.py), so the operator never sees them.
- **Operator killed in the middle of a scale-down** (inside the stabilization window): the new
  process continues from the status-held window: no jump, no zero while the queue has work, and
  the pods it then removes are the ones it marked cheapest (``pod-deletion-cost``) beforehand.

kwok runs the renderer pods with fake IPs that serve nothing: the queue depth alone drives the
decisions, as while real pods start. Deadlines bound every wait; no timing is asserted.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes
import pytest
import yaml
from azure.storage.queue.aio import QueueClient

from reportfarm import azurite
from reportfarm.storage.queueing import JobQueue
from tests.harness import polling, pools, reportpools
from tests.harness.operators import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.azurite, pytest.mark.slow]

eventually = functools.partial(polling.eventually, timeout=180.0)


ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "reportpools.reportfarm.io.yaml"
GROUP, VERSION, PLURAL = reportpools.GROUP, reportpools.VERSION, reportpools.PLURAL
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
POOL = "faults"
OUTAGE_S = float(os.environ.get("REPORTFARM_TEST_API_OUTAGE_S", "30"))
"""How long the API server stays unreachable."""


# -- the fault injectors -----------------------------------------------------------------------


class ApiProxy:
    """A TCP forwarder on loopback to the real API server, on an event loop of its own thread.

    TLS passes through untouched (the server's certificate names 127.0.0.1, any port). While
    paused, every open connection is cut and every new one reset at once: the API server is
    unreachable. ``refused`` counts the connections reset meanwhile.
    """

    def __init__(self, server: str) -> None:
        target = urlsplit(server)
        self.target = (target.hostname or "127.0.0.1", target.port or 443)
        self.paused = False
        self.refused = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._links: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    def __enter__(self) -> ApiProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._on_client, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._run(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _shutdown(self) -> None:
        await self._cut(close=True)
        mine = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not mine]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def pause(self) -> None:
        self._run(self._cut(close=False))

    def resume(self) -> None:
        self.paused = False

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _cut(self, *, close: bool) -> None:
        self.paused = True
        for writer in list(self._links):
            writer.transport.abort()
        if close and self._server is not None:
            self._server.close()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.paused:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        link = {writer, upstream}
        self._links |= link
        try:
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(upstream_reader, writer))
        finally:
            self._links -= link
            for side in link:
                side.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()


@pytest.fixture
def operators(tmp_path: Path) -> Iterator[Callable[[str, Path], OperatorProcess]]:
    started: list[OperatorProcess] = []

    def start(namespace: str, kubeconfig: Path) -> OperatorProcess:
        process = OperatorProcess(namespace, kubeconfig, tmp_path / "operator.log")
        started.append(process)
        return process

    yield start
    for process in started:
        if process.alive:
            process.kill()


# -- the cluster -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crd(kube_bin: Path, kubeconfig_path: Path) -> str:
    def kubectl(*args: str) -> None:
        command = [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig_path}", *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/reportpools.reportfarm.io")
    return "reportpools.reportfarm.io"


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient, crd: str) -> Iterator[str]:
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    name = f"rf-faults-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


class Pool(pools.Pool):
    """The shared test pool, named POOL, that does not scale to zero during a test."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str) -> None:
        super().__init__(api, namespace, POOL, defaults={"scaleToZero": {"idleSeconds": 600}})


def fill(connection: str, queue: str, count: int) -> None:
    """Make the queue hold exactly ``count`` messages (creating it if needed)."""

    async def go() -> None:
        async with JobQueue(connection, queue) as jobs:
            await jobs.ensure()
            async with QueueClient.from_connection_string(connection, queue) as client:
                await client.clear_messages()
            for index in range(count):
                await jobs.send(json.dumps({"job": index}))

    asyncio.run(go())


def proxied_kubeconfig(kubeconfig: Path, server: str, path: Path) -> Path:
    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    path.write_text(json.dumps(config))
    return path


def first_server(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_the_api_server_unreachable_for_a_while_and_the_operator_converges_after(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    azurite_server: azurite.Azurite,
    operators: Callable[[str, Path], OperatorProcess],
    tmp_path: Path,
) -> None:
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    fill(connection, queue, 0)
    pool = Pool(kube_api, namespace)
    pool.create(queue, connection)
    with ApiProxy(first_server(kubeconfig_path)) as proxy:
        config = proxied_kubeconfig(kubeconfig_path, proxy.url, tmp_path / "proxied.kubeconfig")
        operator = operators(namespace, config)
        eventually(
            "a first decision with the queue reachable",
            lambda: pool.condition("QueueReachable").get("status") == "True",
            detail=operator.tail,
        )
        assert pool.replicas() == 0

        # The outage: nothing reaches the API server; meanwhile a burst arrives.
        proxy.pause()
        fill(connection, queue, 40)
        deadline = time.monotonic() + OUTAGE_S
        while time.monotonic() < deadline:
            assert operator.alive, operator.tail()
            assert pool.replicas() == 0  # nobody could act on the burst
            time.sleep(1)
        assert proxy.refused > 0, "the operator did not even try to reach the API server"
        outage_over = time.time()
        proxy.resume()

        # Back: the same process picks up where it was and scales for the burst.
        woken = pool.wake_replicas(40)
        assert woken > 1  # several pods: the burst is not a one-pod size
        eventually(
            "the Deployment scaled for the burst",
            lambda: pool.replicas() == woken,
            detail=operator.tail,
        )
        eventually(
            "a decision taken after the outage",
            lambda: (pool.decided_at() or 0) > outage_over and pool.status()["queueDepth"] == 40,
            detail=operator.tail,
        )
        assert pool.condition("QueueReachable")["status"] == "True"
        assert operator.alive, operator.tail()


@pytest.mark.timeout(900)
def test_the_queue_unreachable_keeps_the_size_then_recovers(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    operators: Callable[[str, Path], OperatorProcess],
    tmp_path: Path,
) -> None:
    storage = azurite.Azurite(location=tmp_path / "azurite")
    with storage:
        connection, queue = storage.connection_string, f"q{uuid.uuid4().hex[:10]}"
        fill(connection, queue, 40)
        pool = Pool(kube_api, namespace)
        pool.create(queue, connection)
        operator = operators(namespace, kubeconfig_path)
        size = pool.wake_replicas(40)
        assert size > 1
        eventually(f"the pool at {size} pods for 40 jobs", lambda: pool.replicas() == size)

        storage.stop()
        eventually(
            "QueueReachable=False",
            lambda: pool.condition("QueueReachable").get("status") == "False",
            timeout=120,
        )
        status = pool.status()
        assert status["lastDecision"]["reason"] == "QueueUnreadable"
        assert pool.condition("QueueReachable")["reason"] == "QueueUnreadable"
        assert pool.condition("Degraded")["status"] == "True"
        # Several more decisions while the queue stays away: the size holds, never zero.
        decisions: set[float] = set()

        def held_for_three_decisions() -> bool:
            assert pool.replicas() == size, "the size changed while the queue was unreadable"
            status = pool.status()
            assert status["replicas"] == size and status["lastDecision"]["replicas"] == size
            decisions.add(float(status["policy"]["decidedAt"]))
            return len(decisions) >= 3

        eventually("three decisions without the queue", held_for_three_decisions)
        assert "QueueUnreadable" in pool.event_reasons()
        assert operator.alive, operator.tail()

        storage.start()  # same ports, same data on disk
        fill(connection, queue, 40)  # whatever Azurite kept, the queue holds 40 again
        eventually(
            "QueueReachable=True again",
            lambda: pool.condition("QueueReachable").get("status") == "True",
            timeout=120,
        )
        # Reachable may come back while fill() is still sending: wait for the whole 40.
        eventually("the depth read again", lambda: pool.status().get("queueDepth") == 40)
        # Kept (or grown: the refill reads as a growing queue to a blind policy), never lowered.
        assert (pool.replicas() or 0) >= size
        assert "QueueReachable" in eventually("a QueueReachable Event", pool.event_reasons)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param(
            {"spec": {"replicas": {"min": 5}}},
            "replicas.min must be <= replicas.max",
            id="replicas-min-over-max",
        ),
        pytest.param(
            {"spec": {"replicas": {"max": 0, "min": 0}}},
            "",
            id="replicas-max-zero",
        ),
        pytest.param(
            {"spec": {"browsersPerPod": {"max": 0}}},
            "",
            id="browsers-max-zero",
        ),
        pytest.param(
            {"spec": {"browsersPerPod": {"min": 8, "max": 2}}},
            "browsersPerPod.min must be <= browsersPerPod.max",
            id="browsers-min-over-max",
        ),
        pytest.param(
            {"spec": {"queue": {"accountUrl": "https://acct.queue.example"}}},
            "exactly one of queue.connectionSecretRef or queue.accountUrl",
            id="secret-and-account-url",
        ),
        pytest.param(
            {"spec": {"queue": {"connectionSecretRef": None}}},
            "exactly one of queue.connectionSecretRef or queue.accountUrl",
            id="neither-secret-nor-account-url",
        ),
    ],
)
def test_contradictory_updates_are_rejected_before_the_operator_sees_them(
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
    azurite_server: azurite.Azurite,
    patch: dict[str, Any],
    message: str,
) -> None:
    pool = Pool(kube_api, namespace)
    created = pool.create("jobs", azurite_server.connection_string)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        pool.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, POOL, patch)
    assert caught.value.status == 422, caught.value.body
    assert message in json.loads(caught.value.body)["message"]
    stored = pool.get()
    assert stored["metadata"]["generation"] == created["metadata"]["generation"]
    assert stored["spec"] == created["spec"]  # nothing of it was stored: nothing to reconcile


@pytest.mark.timeout(900)
def test_an_operator_killed_mid_scale_down_continues_from_the_status(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    azurite_server: azurite.Azurite,
    operators: Callable[[str, Path], OperatorProcess],
) -> None:
    window = 75  # seconds: the new process must start and decide well inside it
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    fill(connection, queue, 40)
    pool = Pool(kube_api, namespace)
    pool.create(queue, connection, scaleDown={"stabilizationSeconds": window})
    first = operators(namespace, kubeconfig_path)

    size = pool.wake_replicas(40)
    assert size > 1  # a scale-down to one pod is possible

    def all_running() -> bool:
        running = [p for p in pool.pods() if p.status.phase == "Running"]
        return (
            pool.replicas() == size
            and len(running) == size
            and pool.status()["readyReplicas"] == size
        )

    eventually(f"{size} renderer pods running for 40 jobs", all_running)

    # The work drains to 2 jobs: less is needed, but the window still remembers the burst.
    fill(connection, queue, 2)
    eventually(
        "the first operator stabilizing",
        lambda: (
            pool.status()["lastDecision"]["reason"] == "Stabilizing"
            and pool.status()["queueDepth"] == 2
        ),
    )
    first.kill()
    held = pool.status()
    assert held["replicas"] == size
    killed_at = float(held["policy"]["decidedAt"])

    second = operators(namespace, kubeconfig_path)
    history: list[tuple[float, int, str, int | None]] = []
    """(decided at, decided replicas, reason, Deployment replicas) as the new operator goes."""
    costs: dict[str, str] = {}

    def scaled_down() -> bool:
        status = pool.status()
        decided = float(status["policy"]["decidedAt"])
        deployment = pool.replicas()
        if decided > killed_at and (not history or history[-1][0] != decided):
            history.append(
                (decided, status["replicas"], status["lastDecision"]["reason"], deployment)
            )
        for pod in pool.pods():
            cost = (pod.metadata.annotations or {}).get(DELETION_COST)
            if cost is not None:
                costs[pod.metadata.name] = cost
        return deployment is not None and deployment < size

    eventually("the second operator to scale down", scaled_down, timeout=window + 240)
    assert second.alive, second.tail()
    assert history, "no decision by the second operator was seen"
    # Its first decision kept the burst's size from the status-held window (a fresh memory would
    # have shrunk at once); it then only went down, and never to zero while jobs were queued.
    assert history[0][1:3] == (size, "Stabilizing"), f"the restart lost the window: {history}"
    decided_sizes = [replicas for _, replicas, _, _ in history]
    assert decided_sizes == sorted(decided_sizes, reverse=True), history
    assert min(decided_sizes) >= 1, history

    # The ReplicaSet removes the pods marked cheapest first: the survivors carry the highest costs.
    wanted = int(pool.replicas() or 0)
    assert wanted >= 1  # two jobs are still queued

    def settled() -> list[Any] | None:
        alive = [p for p in pool.pods() if p.metadata.deletion_timestamp is None]
        return alive if len(alive) == wanted else None

    survivors = eventually("the ReplicaSet to remove the surplus pods", settled)
    ranks = sorted(int((p.metadata.annotations or {})[DELETION_COST]) for p in survivors)
    assert ranks == list(range(size - wanted, size)), (ranks, costs)
    assert "ScaleDown" in pool.event_reasons()


KOPF_LOG_PROBE = """
import kopf
from reportfarm import logs
logs.configure(json_lines=True)
body = kopf.Body({"apiVersion": "reportfarm.io/v1alpha1", "kind": "ReportPool",
                  "metadata": {"name": "p", "namespace": "n", "uid": "u"}})
kopf.ObjectLogger(body=body, settings=kopf.OperatorSettings()).error("TICK-FAILED-PROBE")
"""


def test_the_operator_logs_a_failing_handler_as_json() -> None:
    done = subprocess.run(
        [sys.executable, "-c", KOPF_LOG_PROBE], capture_output=True, text=True, timeout=120
    )
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert "--- Logging error ---" not in done.stderr, done.stderr[-2000:]
    assert any(line.get("message") == "TICK-FAILED-PROBE" for line in lines), done.stderr
