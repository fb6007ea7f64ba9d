"""The operator on call, on the real control plane (kwok pods, a real Azurite):

- **No silent lane**: a sender that creates only the interactive lane wakes the pool; the bulk
  queue's absence is a fact about that lane, not "no work".
- **Health that says what it means**: a queue that cannot be read (a wrong key) is never Ready,
  however few pods are wanted; the reason is Azure's own error code.
- **Nothing quiet after a restart**: a SIGKILLed operator's successor logs and posts each ongoing
  failure (a wrong key, pods no node can hold) exactly once, then stays quiet.
- **A failing resize warns once per change**: a fake renderer (the pod's IP moved to a loopback
  address where a small HTTP server answers /metrics and refuses PUT /pool) gets one WARNING line
  and one Warning Event per wording of its failure, not one per tick.
- **Liveness knows the scaling loop**: /healthz answers while passes complete and fails once a
  pass hangs (a queue endpoint that accepts connections and never answers).

The operator runs as a process of its own (``reportfarm operator``). Deadlines bound every wait;
no timing is asserted.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from reportfarm import azurite, contract, renderer_api
from tests.harness import polling, pools, reportpools
from tests.harness.operators import OperatorProcess
from tests.kube.test_operator_status import (  # noqa: F401  (fixtures)
    crd,
    fill,
    kubectl,
    namespace,
    operators,
)

pytestmark = [pytest.mark.kube, pytest.mark.azurite, pytest.mark.slow]

eventually = functools.partial(polling.eventually, timeout=180.0)
POOL = "oncall"


def log_lines(operator: OperatorProcess) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in operator.log.read_text(errors="replace").splitlines()
        if line.startswith("{")
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timeout(600)
def test_an_interactive_only_queue_wakes_the_pool(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,  # noqa: F811
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],  # noqa: F811
) -> None:
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    fill(connection, contract.lane_queue_name(queue, "interactive"), 10)  # the bulk queue: never
    pool = pools.Pool(kube_api, namespace, POOL)
    pool.create(queue, connection, replicas={"min": 0, "max": 4})
    operator = operators(namespace, kubeconfig_path, log_format="json")

    # The scale and the status are two writes: wait for both (CI once read between them).
    eventually(
        "the pool woken by the interactive lane, and its status written",
        lambda: (pool.replicas() or 0) > 0 and "queueDepth" in pool.status(),
        detail=operator.tail,
    )
    status = pool.status()
    assert status["queueDepth"] == 10, status
    reachable = pool.condition("QueueReachable")
    assert (reachable["status"], reachable["reason"]) == ("True", "QueueRead"), reachable
    assert queue in reachable["message"] and "not created yet" in reachable["message"]
    decisions = [line for line in log_lines(operator) if "inputs" in line]
    assert decisions and decisions[0]["inputs"]["interactiveDepth"] == 10, operator.tail()
    assert "depthTrendPerSecond" in decisions[0]["inputs"]
    # RFC 3339 with its zone, in every JSON line.
    for line in log_lines(operator):
        assert line["time"][10] == "T" and line["time"].endswith("+00:00"), line


@pytest.mark.timeout(900)
def test_a_restart_re_announces_each_ongoing_failure_once(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    kube_bin: Path,
    namespace: str,  # noqa: F811
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],  # noqa: F811
) -> None:
    wrong_key = azurite_server.connection_string.replace("AccountKey=", "AccountKey=AAAA")
    # One pool with a wrong key (its queue unreadable), one whose pods no fake node can hold.
    keyless = pools.Pool(kube_api, namespace, "wrong-key")
    keyless.core.create_namespaced_secret(
        namespace,
        {"metadata": {"name": "wrong-key"}, "stringData": {"connection-string": wrong_key}},
    )
    keyless.create_body(
        reportpools.report_pool(
            "wrong-key",
            f"q{uuid.uuid4().hex[:10]}",
            queue={"name": "jobs", "connectionSecretRef": {"name": "wrong-key"}},
        )
    )
    huge = pools.Pool(kube_api, namespace, "too-big")
    huge.create(
        f"q{uuid.uuid4().hex[:10]}",
        azurite_server.connection_string,
        replicas={"min": 1, "max": 1},
        resources={
            "requests": {"cpu": "64", "memory": "1Gi"},
            "limits": {"cpu": "64", "memory": "2Gi"},
        },
    )
    failures = {"wrong-key": "QueueUnreadable", "too-big": "Unschedulable"}

    def announced(operator: OperatorProcess) -> dict[str, int]:
        lines = log_lines(operator)
        return {
            name: sum(
                1
                for x in lines
                if x.get("pool", "").endswith(f"/{name}") and x.get("event") == reason
            )
            for name, reason in failures.items()
        }

    def warnings() -> dict[str, int]:
        return {
            name: sum(1 for e in pool.events() if e.type == "Warning" and e.reason == reason)
            for name, reason, pool in (
                ("wrong-key", "QueueUnreadable", keyless),
                ("too-big", "Unschedulable", huge),
            )
        }

    first = operators(namespace, kubeconfig_path, log_format="json")
    eventually(
        "both failures announced by the first operator",
        lambda: announced(first) == {"wrong-key": 1, "too-big": 1},
        detail=first.tail,
    )
    ready = keyless.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "QueueUnreadable"), ready
    assert "HTTP 403 AuthenticationFailed" in keyless.condition("QueueReachable")["message"]
    table = kubectl(kube_bin, kubeconfig_path, "get", "reportpools", "-n", namespace, "-o", "wide")
    row = next(line for line in table.splitlines() if line.startswith("wrong-key"))
    assert "False" in row.split(), table  # HEALTHY
    first.kill()
    decided = {pool.name: pool.decided_at() for pool in (keyless, huge)}

    second = operators(namespace, kubeconfig_path, log_format="json")
    seen: dict[str, set[float]] = {name: set() for name in decided}

    def six_decisions_each() -> bool:
        for pool in (keyless, huge):
            now = pool.decided_at()
            if now is not None and now != decided[pool.name]:
                seen[pool.name].add(now)
        return all(len(times) >= 6 for times in seen.values())

    eventually(
        "six decisions each by the restarted operator", six_decisions_each, detail=second.tail
    )
    assert announced(second) == {"wrong-key": 1, "too-big": 1}, second.tail()
    assert warnings() == {"wrong-key": 2, "too-big": 2}, warnings()


class Blackhole:
    """A TCP server on loopback that accepts connections and never answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Blackhole:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        for held in self.held:
            held.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.server.accept()
                self.held.append(connection)


def healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


@pytest.mark.timeout(600)
def test_liveness_fails_when_the_scaling_loop_is_stuck(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,  # noqa: F811
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],  # noqa: F811
) -> None:
    pool = pools.Pool(kube_api, namespace, POOL)
    pool.create(f"q{uuid.uuid4().hex[:10]}", azurite_server.connection_string)
    port = free_port()
    operator = operators(
        namespace,
        kubeconfig_path,
        log_format="json",
        REPORTFARM_OPERATOR_HEALTH_PORT=str(port),
        REPORTFARM_OPERATOR_BIND_ADDRESS="127.0.0.1",
        REPORTFARM_OPERATOR_STUCK_AFTER="15",
        REPORTFARM_OPERATOR_QUEUE_TIMEOUT="600",
        REPORTFARM_OPERATOR_TICK_TIMEOUT="600",
    )
    eventually("the first decision", lambda: pool.decided_at() is not None, detail=operator.tail)
    assert healthz(port) == 200, operator.tail()

    with Blackhole() as hole:
        # The queue endpoint now accepts and never answers: the pass hangs (timeouts: 600 s).
        stuck = azurite_server.connection_string.replace(
            f"127.0.0.1:{azurite_server.queue_port}", f"127.0.0.1:{hole.port}"
        )
        assert stuck != azurite_server.connection_string
        pool.core.patch_namespaced_secret(
            "storage", namespace, {"stringData": {"connection-string": stuck}}
        )
        started = time.monotonic()
        eventually(
            "/healthz failing", lambda: healthz(port) == 500, timeout=240, detail=operator.tail
        )
        assert time.monotonic() - started > 10  # not before the loop could be called stuck
        assert operator.alive


class FakeRenderer:
    """/metrics (one browser, busy) and PUT /pool answering ``self.answer``, on a loopback
    address of its own, in a thread."""

    def __init__(self, host: str) -> None:
        owner = self
        self.answer = (500, "boom")
        self.puts = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = (
                    f"# TYPE {renderer_api.POOL_SIZE_METRIC} gauge\n"
                    f"{renderer_api.POOL_SIZE_METRIC} 1\n"
                    f"# TYPE {renderer_api.POOL_BUSY_METRIC} gauge\n"
                    f"{renderer_api.POOL_BUSY_METRIC} 1\n"
                ).encode()
                self._send(200, body)

            def do_PUT(self) -> None:
                owner.puts += 1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, text = owner.answer
                self._send(status, text.encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeRenderer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.timeout(900)
def test_a_failing_resize_warns_once_per_change(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,  # noqa: F811
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],  # noqa: F811
) -> None:
    connection = azurite_server.connection_string
    queue = f"q{uuid.uuid4().hex[:10]}"
    fill(connection, queue, 30)  # work that wants more browsers than the pod reports
    pool = pools.Pool(kube_api, namespace, POOL)
    pool.create(queue, connection, replicas={"min": 1, "max": 1})
    host = f"127.0.{uuid.uuid4().int % 250 + 2}.{uuid.uuid4().int % 250 + 2}"
    with FakeRenderer(host) as renderer:
        operator = operators(
            namespace,
            kubeconfig_path,
            log_format="json",
            REPORTFARM_OPERATOR_RENDERER_PORT=str(renderer.port),
        )
        eventually(
            "a ready pod (kwok)",
            lambda: any(
                c.type == "Ready" and c.status == "True"
                for p in pool.pods()
                for c in (p.status.conditions or [])
            ),
            detail=operator.tail,
        )
        (pod,) = [p for p in pool.pods() if p.status.phase == "Running"]
        # kwok leaves a Ready pod's status alone: the pod's address is now the fake renderer's.
        pool.core.patch_namespaced_pod_status(  # a JSON patch: replace, not merge, the IP list
            pod.metadata.name,
            namespace,
            [
                {"op": "replace", "path": "/status/podIP", "value": host},
                {"op": "replace", "path": "/status/podIPs", "value": [{"ip": host}]},
            ],
        )

        def resize_warnings() -> list[str]:
            return [
                line["message"]
                for line in log_lines(operator)
                if line.get("level") == "WARNING" and "pool resize" in line["message"]
            ]

        def events() -> list[str]:
            return [e.message for e in pool.events() if e.reason == "PoolResizeFailed"]

        eventually("three resize attempts", lambda: renderer.puts >= 3, detail=operator.tail)
        assert len(resize_warnings()) == 1, resize_warnings()
        assert "HTTP 500" in resize_warnings()[0]
        assert len(events()) == 1, events()
        degraded = pool.condition("Degraded")
        assert "PoolResizeFailed" in degraded["reason"].split(","), degraded

        renderer.answer = (401, "unauthorized")  # another failure: a change, said once
        seen = renderer.puts
        eventually("three more attempts", lambda: renderer.puts >= seen + 3, detail=operator.tail)
        assert len(resize_warnings()) == 2, resize_warnings()
        assert "HTTP 401" in resize_warnings()[1]
        assert len(events()) == 2, events()
