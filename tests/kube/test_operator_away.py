"""The operator away, and the CRD's next version, on the real control plane (kwok pods, Azurite).

- **Stale status shows its age**: every tick writes ``status.observedAt`` (the OBSERVED column);
  with the operator stopped it stops moving, so within 3 ticks the column reads 15 s or more,
  and once an operator runs again it moves again.
- **The alert**: a real Prometheus scrapes the operator's /metrics; ReportFarmOperatorAbsent's
  expression returns nothing while it ticks and fires once it has been gone for its window.
- **The next CRD version**: the documented path (docs/operating/index.md, "Upgrade") on a plane of its own: a
  served pair (the current version served, the next one served and stored, same schema, no
  conversion webhook), then the stored objects rewritten and ``storedVersions`` trimmed. An
  existing ReportPool survives every step, and the operator, still asking for the old version,
  keeps observing it.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import functools
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from reportfarm import azurite
from tests.deploy import prometheus
from tests.harness import kube as kube_harness
from tests.harness import polling, pools
from tests.harness.operators import ROOT, OperatorProcess
from tests.kube.test_operator_status import crd, namespace, operators  # noqa: F401

pytestmark = [pytest.mark.kube, pytest.mark.azurite, pytest.mark.slow]

eventually = functools.partial(polling.eventually, timeout=180.0)

CRD = ROOT / "crds" / "reportpools.reportfarm.io.yaml"
TICK_S = 5.0
"""The operator's scaling loop period (reportfarm_operator.handlers.TICK_INTERVAL_S)."""
NEXT = "v1alpha2"


def observed_at(pool: pools.Pool) -> float | None:
    stamp = pool.status().get("observedAt")
    return datetime.datetime.fromisoformat(stamp).timestamp() if stamp else None


def observed_column(kube_bin: Path, kubeconfig: Path, where: str, name: str) -> str:
    """The OBSERVED column of ``kubectl get reportpool``."""
    out = subprocess.run(
        [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig}", "get", "reportpool", name,
         "-n", where],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.splitlines()  # fmt: skip
    header, row = out[0].split(), out[1].split()
    return row[header.index("OBSERVED")]


def seconds(age: str) -> float:
    """kubectl's short age (``7s``, ``2m3s``, ``5m``) in seconds."""
    total, number = 0.0, ""
    for char in age:
        if char.isdigit():
            number += char
        else:
            total += int(number) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[char]
            number = ""
    return total


@pytest.mark.timeout(600)
def test_the_status_shows_its_age_while_the_operator_is_stopped(
    kube_api: kubernetes.client.ApiClient,
    kube_bin: Path,
    kubeconfig_path: Path,
    namespace: str,  # noqa: F811
    azurite_server: azurite.Azurite,
    operators: Callable[..., OperatorProcess],  # noqa: F811
) -> None:
    pool = pools.Pool(kube_api, namespace, "away")
    pool.create(f"q{uuid.uuid4().hex[:10]}", azurite_server.connection_string)
    operator = operators(namespace, kubeconfig_path)
    first = eventually("status.observedAt", lambda: observed_at(pool), detail=operator.tail)
    eventually("observedAt moves every tick", lambda: (observed_at(pool) or 0) > first,
               timeout=6 * TICK_S, detail=operator.tail)  # fmt: skip
    assert seconds(observed_column(kube_bin, kubeconfig_path, namespace, "away")) < 3 * TICK_S

    operator.kill()
    stopped = time.time()
    last = observed_at(pool)
    assert last is not None
    time.sleep(max(0.0, stopped + 3 * TICK_S - time.time()))
    # 3 ticks after the operator stopped: the column says nobody has looked for 3 ticks.
    age = seconds(observed_column(kube_bin, kubeconfig_path, namespace, "away"))
    assert age >= 3 * TICK_S, age
    assert observed_at(pool) == last

    again = operators(namespace, kubeconfig_path)
    eventually("observedAt moves again", lambda: (observed_at(pool) or 0) > time.time() - TICK_S,
               timeout=120, detail=again.tail)  # fmt: skip
    assert seconds(observed_column(kube_bin, kubeconfig_path, namespace, "away")) < 3 * TICK_S


def alert_expression(name: str) -> str:
    groups = yaml.safe_load((ROOT / "charts" / "reportfarm" / "rules" / "alerts.yaml").read_text())
    (rule,) = [r for g in groups["groups"] for r in g["rules"] if r.get("alert") == name]
    return str(rule["expr"])


@pytest.mark.timeout(600)
def test_the_absent_operator_alert_fires_on_the_metrics_it_reads(
    kube_api: kubernetes.client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,  # noqa: F811
    azurite_server: azurite.Azurite,
    tmp_path: Path,
) -> None:
    pool = pools.Pool(kube_api, namespace, "watched")
    pool.create(f"q{uuid.uuid4().hex[:10]}", azurite_server.connection_string)
    port = azurite.free_port()
    operator = OperatorProcess(
        namespace, kubeconfig_path, tmp_path / "operator.log", metrics_port=port
    )
    # The expression as the chart writes it, with its 2 m rate window cut to 15 s (Prometheus here
    # scrapes every second): what this test proves is that it reads the metrics the operator
    # really exports; the window and the `for:` are promtool's cases (tests/deploy/alerts_test.yaml).
    written = alert_expression("ReportFarmOperatorAbsent")
    assert "[2m]" in written, written
    expr = written.replace("[2m]", "[15s]")
    try:
        with prometheus.PrometheusServer({"operator": [f"127.0.0.1:{port}"]}) as prom:
            asyncio.run(prom.wait_for("reportfarm_operator_desired_replicas", timeout=120))
            asyncio.run(
                prom.wait_for("rate(reportfarm_operator_loop_duration_seconds_count[15s]) > 0")
            )
            assert asyncio.run(prom.query(expr)) == [], "fires while the operator ticks"
            operator.kill()
            stopped = time.monotonic()
            fired = asyncio.run(prom.wait_for(expr, timeout=240))
            print(f"the expression fired {time.monotonic() - stopped:.0f} s after the kill")
            assert fired[0]["value"][1] == "0"
    finally:
        if operator.alive:
            operator.kill()


def served_pair(current: dict[str, Any], *, name: str) -> dict[str, Any]:
    """Step 1 of the next version: ``name`` served and stored, the current one still served."""
    found = copy.deepcopy(current)
    (old,) = found["spec"]["versions"]
    new = {**copy.deepcopy(old), "name": name, "storage": True}
    old["storage"] = False
    found["spec"]["versions"] = [old, new]
    return found


@pytest.fixture
def own_plane(kube_bin: Path, tmp_path: Path) -> Iterator[kube_harness.ControlPlane]:
    """A plane of its own: the CRD's stored versions are cluster-wide and never go back."""
    with kube_harness.ControlPlane(kube_bin, workdir=tmp_path / "plane") as plane:
        yield plane


@pytest.mark.timeout(900)
def test_an_existing_pool_survives_the_next_crd_version(
    own_plane: kube_harness.ControlPlane,
    kube_bin: Path,
    azurite_server: azurite.Azurite,
    tmp_path: Path,
) -> None:
    plane = own_plane

    def kubectl(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            [str(kube_bin / "kubectl"), f"--kubeconfig={plane.kubeconfig}", *args],
            capture_output=True, text=True, check=True, timeout=120, input=stdin,
        ).stdout  # fmt: skip

    said: list[str] = []

    def established(name: str) -> bool:
        """kubectl wait, asked again while it fails: just after the apply it has answered an
        error at once (CI, once), where the CRD was only not yet there to wait on."""
        done = subprocess.run(
            [str(kube_bin / "kubectl"), f"--kubeconfig={plane.kubeconfig}", "wait",
             "--for=condition=Established", "--timeout=20s", f"crd/{name}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        said.append(done.stderr.strip())
        return done.returncode == 0

    current = yaml.safe_load(CRD.read_text())
    kubectl("apply", "--server-side", "-f", str(CRD))
    name = current["metadata"]["name"]
    eventually("the CRD Established", lambda: established(name), detail=lambda: said[-1])
    kubectl("create", "namespace", "upgrade")
    with kubernetes.config.new_client_from_config(config_file=str(plane.kubeconfig)) as api:
        pool = pools.Pool(api, "upgrade", "kept")
        created = pool.create(f"q{uuid.uuid4().hex[:10]}", azurite_server.connection_string)
        operator = OperatorProcess("upgrade", plane.kubeconfig, tmp_path / "operator.log")
        try:
            eventually("the pool observed", lambda: observed_at(pool), detail=operator.tail)

            # 1. The served pair: the new version stores, the old one is still served.
            pair = served_pair(current, name=NEXT)
            kubectl(
                "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump(pair)
            )
            eventually(
                "the new CRD Established", lambda: established(name), detail=lambda: said[-1]
            )
            as_new = yaml.safe_load(kubectl("get", f"reportpools.{NEXT}.reportfarm.io", "kept",
                                            "-n", "upgrade", "-o", "yaml"))  # fmt: skip
            assert as_new["apiVersion"] == f"reportfarm.io/{NEXT}"
            assert as_new["spec"] == created["spec"]
            changed = time.time()
            eventually("the operator (asking for the old version) still observes it",
                       lambda: (observed_at(pool) or 0) > changed, detail=operator.tail)  # fmt: skip

            # 2. Every stored object rewritten (now stored as the new version), then the old
            # version dropped from storedVersions.
            # A patch, not `get | replace`: the operator writes each pool's status every tick, so a
            # replace of what was read a moment ago meets a newer resourceVersion (a conflict).
            kubectl("annotate", f"reportpools.{NEXT}.reportfarm.io", "--all", "-A", "--overwrite",
                    f"reportfarm.io/stored-as={NEXT}")  # fmt: skip
            assert pool.get()["metadata"]["annotations"]["reportfarm.io/stored-as"] == NEXT
            patch = json.dumps({"status": {"storedVersions": [NEXT]}})
            kubectl("patch", "crd", "reportpools.reportfarm.io", "--subresource=status",
                    "--type=merge", "-p", patch)  # fmt: skip
            crd_now = yaml.safe_load(
                kubectl("get", "crd", "reportpools.reportfarm.io", "-o", "yaml")
            )
            assert crd_now["status"]["storedVersions"] == [NEXT]
            assert pool.get()["spec"] == created["spec"]
            rewritten = time.time()
            eventually("the operator still observes it",
                       lambda: (observed_at(pool) or 0) > rewritten, detail=operator.tail)  # fmt: skip
            assert pool.deployment() is not None
        finally:
            operator.kill()
