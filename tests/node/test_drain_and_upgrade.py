"""Maintenance on two real nodes with a sender at 2 jobs/s through the gateway the whole time:

- ``helm upgrade`` from the previous chart release (the git history's last other chart version)
  to this one, the new CRD applied first, during a burst: 0 lost, 0 interrupted, 0 failed;
- ``kubectl drain`` of the node holding busy renderer pods, a gateway replica and the operator:
  done within 120 s, every job stored once, the gateway never silent for more than 2 s, the
  operator looking at the pool again within 15 s of the drain's end.

The two nodes (``node.FIRST``, ``node.SECOND``) share the pods' bridge; they cannot run beside
the one-node ``cluster`` of the other node tests (same bridge, same first node). In one run of
the whole folder this module runs before any module that uses ``cluster`` (its name sorts before
theirs, and ``cluster`` starts with the first test that asks for it), and its nodes are gone when
it ends. Figures are printed as one JSON line per test (``-s`` shows them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import kube as kube_harness
from tests.harness.polling import eventually
from tests.node import farm, images, release, sending
from tests.node import node as node_harness
from tests.node.release import CONTAINER, NAMESPACE, POOL, QUEUE, ROOT, TOKEN

pytestmark = pytest.mark.timeout(2400)

GATEWAY_SERVICE = "reportfarm-gateway"
GATEWAYS = "app.kubernetes.io/component=gateway"
OPERATOR = "app.kubernetes.io/component=operator"
RATE = 2.0
JOB = {"template": "slow", "data": {"busy_ms": 400}}
"""Each job keeps a browser busy 0.4 s besides its render: at 2/s the renderers stay busy."""
CHART = ROOT / "charts" / "reportfarm"


@dataclasses.dataclass
class TwoNodes:
    tools: farm.Tools
    first: node_harness.Node
    second: node_harness.Node
    connection: str
    images: dict[str, images.Image]

    def logs(self) -> str:
        return self.first.logs() + "\n\n" + self.second.logs()


def previous_chart(workdir: Path) -> tuple[str, Path]:
    """The previous release: the chart as the newest commit that changed it with another
    version left it (version, its folder under ``workdir``)."""
    current = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        ).stdout

    for commit in git("log", "--format=%H", "--", "charts/reportfarm").split():
        version = yaml.safe_load(git("show", f"{commit}:charts/reportfarm/Chart.yaml"))["version"]
        if version != current:
            archive = workdir / "previous.tar"
            with archive.open("wb") as out:
                subprocess.run(["git", "-C", str(ROOT), "archive", commit, "charts/reportfarm"],
                               stdout=out, check=True)  # fmt: skip
            with tarfile.open(archive) as tar:
                tar.extractall(workdir, filter="data")
            return version, workdir / "charts" / "reportfarm"
    raise AssertionError(f"no earlier chart version than {current} in the git history")


@pytest.fixture(scope="module")
def two_nodes(
    built_images: dict[str, images.Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoNodes]:
    """The test plane with two real nodes, Azurite on their bridge, and the *previous* chart
    release (two gateway replicas; the operator prefers the first node)."""
    if node_harness.RUNNING:
        pytest.fail(f"nodes {node_harness.RUNNING} run already: run {Path(__file__).name} alone")
    bin_dir = kube_harness.bin_dir()
    subprocess.run(["bash", str(kube_harness.BUILD_SCRIPT), "node"], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    workdir = tmp_path_factory.mktemp("kube")
    imported = [built_images[name] for name in ("renderer", "operator", "gateway")]
    with (
        kube_harness.ControlPlane(bin_dir, workdir=workdir) as plane,
        node_harness.Node(plane, kubelet=bin_dir / "kubelet", sandbox=built_images["pause"],
                          imported=imported, identity=node_harness.FIRST) as first,
        node_harness.Node(plane, kubelet=bin_dir / "kubelet", sandbox=built_images["pause"],
                          imported=imported, identity=node_harness.SECOND) as second,
        farm.bridge_azurite() as connection,
    ):  # fmt: skip
        tools = farm.Tools(plane)
        release.prepare_namespace(tools, connection, tmp_path_factory.mktemp("templates"))
        _, chart = previous_chart(tmp_path_factory.mktemp("previous"))
        _install(tools, built_images, chart=chart, command="install")
        yield TwoNodes(tools, first, second, connection, built_images)


def _install(
    tools: farm.Tools, built: dict[str, images.Image], *, chart: Path, command: str
) -> None:
    prefer_first = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": [node_harness.FIRST.name],
                            }
                        ]
                    },
                }
            ]
        }
    }
    release.install_chart(
        tools, tools.plane, built["operator"], built["gateway"], chart=chart, command=command,
        values=["gateway.replicaCount=2"], operator_spec={"affinity": prefer_first},
    )  # fmt: skip


def _upgraded(two: TwoNodes) -> str:
    """The release's chart after it is upgraded to this one (if it was not yet); its name."""
    wanted = f"reportfarm-{yaml.safe_load((CHART / 'Chart.yaml').read_text())['version']}"
    (found,) = json.loads(two.tools.run("helm", "list", "-n", NAMESPACE, "-o", "json"))
    if found["chart"] != wanted:
        # CRDs first: helm installs a chart's crds/ once and never upgrades them.
        two.tools.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        _install(two.tools, two.images, chart=CHART, command="upgrade")
    return wanted


def _pods(tools: farm.Tools, selector: str) -> list[dict[str, Any]]:
    return list(tools.running_pods(NAMESPACE, selector))


def _on(pods: list[dict[str, Any]], node: str) -> list[str]:
    return [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == node]


def _ready_gateways(tools: farm.Tools) -> int:
    return len(sending.endpoints(tools.plane, namespace=NAMESPACE, service=GATEWAY_SERVICE))


def _observed_at(tools: farm.Tools) -> float | None:
    stamp = (tools.get("reportpools", "-n", NAMESPACE, POOL).get("status") or {}).get("observedAt")
    return datetime.datetime.fromisoformat(stamp).timestamp() if stamp else None


def _outcome(two: TwoNodes, job_ids: list[str]) -> farm.Outcome:
    return asyncio.run(farm.collect(two.connection, QUEUE, CONTAINER, job_ids, timeout=300))


def _figures(name: str, sender: sending.Sender, outcome: farm.Outcome, **more: Any) -> None:
    failures = [a.detail for a in sender.attempts if not a.ok]
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(json.dumps({
        "test": name, "sent": len(sender.attempts), "refused_or_failed": len(failures),
        "longest_silence_s": round(sending.longest_outage(sender.attempts), 2),
        "stored": outcome.succeeded, "failed": outcome.failed, "lost": outcome.missing,
        "redelivered": outcome.redelivered, "load": load, "failures": failures[:10], **more,
    }))  # fmt: skip


def _assert_clean(sender: sending.Sender, outcome: farm.Outcome, ran_twice: str = "") -> None:
    assert outcome.missing == 0, "accepted jobs never stored"
    assert outcome.failed == 0
    assert outcome.redelivered == 0, (
        f"renders interrupted (delivered more than once): {outcome.redelivered_ids}\n{ran_twice}"
    )
    assert outcome.succeeded == len(sender.job_ids) == outcome.submitted
    silence = sending.longest_outage(sender.attempts)
    assert silence <= 2.0, [a for a in sender.attempts if not a.ok]


def _pool_ready(two: TwoNodes, count: int) -> None:
    eventually(f"{count} renderer pods Ready", lambda: len(release.ready_pods(two.tools)) >= count,
               timeout=300, detail=two.logs)  # fmt: skip


def test_helm_upgrade_from_the_previous_release_during_a_burst(two_nodes: TwoNodes) -> None:
    two = two_nodes
    two.tools.apply(release.report_pool(two.images["renderer"].ref, replicas={"min": 2, "max": 4}))
    _pool_ready(two, 2)
    eventually("2 gateways Ready", lambda: _ready_gateways(two.tools) >= 2, timeout=240)
    sender = sending.Sender(two.tools.plane, namespace=NAMESPACE, service=GATEWAY_SERVICE,
                            token=TOKEN, job=JOB, rate=RATE)  # fmt: skip
    with farm.following_logs(two.tools, NAMESPACE, release.RENDERERS, GATEWAYS) as logs, sender:
        time.sleep(10)
        burst = [{"name": f"burst {i}", "busy_ms": 400} for i in range(40)]
        burst_ids = asyncio.run(farm.submit(two.connection, QUEUE, CONTAINER, "slow", burst))
        started = time.monotonic()
        chart = _upgraded(two)
        for deployment in ("deployment/reportfarm", "deployment/reportfarm-gateway"):
            two.tools.kubectl("rollout", "status", deployment, "-n", NAMESPACE, "--timeout=240s")
        upgrade_s = time.monotonic() - started
        time.sleep(15)
        sender.stop()
        outcome = _outcome(two, [*sender.job_ids, *burst_ids])
        ran_twice = logs.naming(outcome.redelivered_ids)
    _figures("helm upgrade", sender, outcome, chart=chart, upgrade_s=round(upgrade_s, 1))
    assert outcome.missing == 0 and outcome.failed == 0
    assert outcome.redelivered == 0, f"delivered twice: {outcome.redelivered_ids}\n{ran_twice}"
    assert outcome.succeeded == len(sender.job_ids) + len(burst_ids)
    assert sending.longest_outage(sender.attempts) <= 2.0, [a for a in sender.attempts if not a.ok]


def test_drain_of_a_busy_node_keeps_the_front_door_open(two_nodes: TwoNodes) -> None:
    two = two_nodes
    tools, first, second = two.tools, node_harness.FIRST.name, node_harness.SECOND.name
    _upgraded(two)
    # Renderers on the first node: the second is cordoned and its renderers go (min 2).
    tools.kubectl("cordon", second)
    tools.apply(release.report_pool(two.images["renderer"].ref, replicas={"min": 2, "max": 4}))
    for name in _on(_pods(tools, release.RENDERERS), second):
        tools.kubectl("delete", "pod", "-n", NAMESPACE, name, "--wait=false")
    eventually(
        "the renderer pods on the first node",
        lambda: len(_on(release.ready_pods(tools), first)) >= 2
        and not _on(release.ready_pods(tools), second),
        timeout=300, detail=two.logs,
    )  # fmt: skip
    tools.kubectl("uncordon", second)
    eventually("2 gateways Ready", lambda: _ready_gateways(tools) >= 2, timeout=240)
    gateways, operators = _pods(tools, GATEWAYS), _pods(tools, OPERATOR)
    assert _on(gateways, first) and _on(gateways, second), "the gateways are not spread"
    assert _on(operators, first), "the operator is not on the first node"

    sender = sending.Sender(tools.plane, namespace=NAMESPACE, service=GATEWAY_SERVICE,
                            token=TOKEN, job=JOB, rate=RATE)  # fmt: skip
    # The drained pods' logs go with them: followed from now, read if a job ran twice.
    with farm.following_logs(tools, NAMESPACE, release.RENDERERS, GATEWAYS) as logs, sender:
        time.sleep(20)  # the renderers are busy
        busy = release.ready_pods(tools)
        started = time.time()
        drain = subprocess.run(
            [str(tools.plane.bin_dir / "kubectl"), f"--kubeconfig={tools.plane.kubeconfig}",
             "drain", first, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        drained = time.time()
        assert drain.returncode == 0, drain.stdout + drain.stderr
        # The operator looks at the pool again (on the second node).
        # observedAt has whole seconds: the first one after the drain, plus 1, bounds the time.
        observed = 1 + eventually("the operator observes the pool again", lambda: (
            (at := _observed_at(tools)) is not None and at > drained and at
        ), timeout=120, detail=two.logs)  # fmt: skip
        time.sleep(20)
        sender.stop()
        outcome = _outcome(two, sender.job_ids)
        ran_twice = logs.naming(outcome.redelivered_ids)
        renderer_drains_s = logs.drains()
    _figures(
        "drain", sender, outcome, drain_s=round(drained - started, 1),
        operator_back_after_drain_s=round(max(0.0, observed - drained), 1),
        renderers_before=len(_on(busy, first)), renderer_drains_s=renderer_drains_s,
        evictions_refused_by_a_budget=(drain.stdout + drain.stderr).count("will retry after"),
    )  # fmt: skip
    assert drained - started <= 120
    assert observed - drained <= 15, "scaling did not resume within 15 s"
    assert not _pods(tools, GATEWAYS) or not _on(_pods(tools, GATEWAYS), first)
    assert len(release.ready_pods(tools)) >= 2  # the pool's min, on the second node
    _assert_clean(sender, outcome, ran_twice)
    tools.kubectl("uncordon", first)
