"""Fixtures for tests against a real Kubernetes API.

- ``kube``: the cluster, a :class:`tests.harness.kube.ControlPlane` with two kwok fake nodes
  (see ``FAKE_NODES``), or, when ``KUBECONFIG`` names a reachable cluster, an
  :class:`tests.harness.kube.ExternalCluster` (kind, minikube, ...) whose ``add_node`` is a no-op.
- ``kubeconfig_path``: the kubeconfig file of that cluster.
- ``kube_bin``: the directory with kubectl, helm and kubeconform (and the control plane binaries).
- ``kube_api``: a ``kubernetes.client.ApiClient`` for that cluster.

Tests using any of them are marked ``kube``. The binaries are built (once, cached outside the
repo by ``scripts/kube/build.sh``) right after collection, before per-test timeouts start.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.harness import kube as kube_harness

# The fake nodes every session starts with: name -> capacity.
FAKE_NODES: dict[str, dict[str, str]] = {
    "kwok-node-0": {"cpu": "4", "memory": "16Gi", "pods": "110"},
    "kwok-node-1": {"cpu": "4", "memory": "16Gi", "pods": "110"},
}
_FIXTURES = frozenset({"kube", "kubeconfig_path", "kube_bin", "kube_api"})
_BIN = pytest.StashKey[Path | BaseException]()
_EXTERNAL = pytest.StashKey[Path | None]()

Cluster = kube_harness.ControlPlane | kube_harness.ExternalCluster


def _external_kubeconfig() -> tuple[Path | None, str]:
    """The user's own cluster, when ``KUBECONFIG`` is one file whose cluster answers; and a
    note saying which cluster the tests use."""
    value = os.environ.get("KUBECONFIG", "")
    local = "kube tests: starting a local control plane with kwok fake nodes"
    if not value:
        return None, local
    if os.pathsep in value:
        return None, f"{local} (KUBECONFIG lists several files; only one is supported)"
    path = Path(value).expanduser()
    if not kube_harness.reachable(path):
        return None, f"{local} (the cluster of KUBECONFIG={value} is not reachable)"
    return path, f"kube tests: using the cluster of KUBECONFIG={value} (no fake nodes)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kube)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries now, outside any test's timeout, if a selected test needs them."""
    config = session.config
    if config.option.collectonly or not any(i.get_closest_marker("kube") for i in session.items):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # show the note and the build's progress
        config.stash[_EXTERNAL], note = _external_kubeconfig()
        print(f"\n{note}", file=sys.stderr)
        try:
            config.stash[_BIN] = kube_harness.bin_dir()
        except Exception as error:
            config.stash[_BIN] = error


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the tails of the control plane's component logs to failed reports."""
    report = yield
    cluster = getattr(item, "funcargs", {}).get("kube")
    if report.failed and isinstance(cluster, kube_harness.ControlPlane):
        report.sections.append(("kube component logs", cluster.logs()))
    return report


@pytest.fixture(scope="session")
def kube_bin(pytestconfig: pytest.Config) -> Path:
    built = pytestconfig.stash.get(_BIN, None)
    if built is None:
        built = kube_harness.bin_dir()
    if isinstance(built, BaseException):
        pytest.fail(f"building the Kubernetes binaries failed: {built}")
    return built


@pytest.fixture(scope="session")
def kube(
    pytestconfig: pytest.Config, kube_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    stash = pytestconfig.stash
    external = stash[_EXTERNAL] if _EXTERNAL in stash else _external_kubeconfig()[0]
    if external is not None:
        yield kube_harness.ExternalCluster(external)
        return
    # Under pytest's basetemp: component logs survive the session (pytest keeps the last 3).
    workdir = tmp_path_factory.mktemp("kube")
    with kube_harness.ControlPlane(kube_bin, workdir=workdir) as control_plane:
        for name, capacity in FAKE_NODES.items():
            control_plane.add_node(
                name, cpu=capacity["cpu"], memory=capacity["memory"], pods=capacity["pods"]
            )
        yield control_plane


@pytest.fixture(scope="session")
def kubeconfig_path(kube: Cluster) -> Path:
    return kube.kubeconfig


@pytest.fixture(scope="session")
def kube_api(kubeconfig_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig_path))
    with client:
        yield client
