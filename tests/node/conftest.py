"""Node tests: the real images, run by podman and by a real kubelet (marker ``node``).

They need root, podman, runc and containerd (``scripts/node/prepare.sh`` installs them and builds
the images and the node's binaries) and take minutes, so they run only when
``REPORTFARM_NODE_TESTS=1``; otherwise they are skipped with that reason. The real node
(``cluster``) and the Prometheus scraping it (``prom``) start once for the whole folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy import prometheus
from tests.harness import kube as kube_harness
from tests.node import farm, images, monitoring, release
from tests.node import node as node_harness

HERE = Path(__file__).resolve().parent
ENABLED = os.environ.get("REPORTFARM_NODE_TESTS") == "1"
_IMAGES = pytest.StashKey[dict[str, images.Image] | BaseException]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="node tests: set REPORTFARM_NODE_TESTS=1 (root, podman, runc)")
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.node)
            if not ENABLED:
                item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the images now, outside any test's timeout, if a selected node test needs them."""
    config = session.config
    if config.option.collectonly or not ENABLED:
        return
    if not any(i.get_closest_marker("node") for i in session.items):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        try:
            config.stash[_IMAGES] = images.build()
        except Exception as error:
            config.stash[_IMAGES] = error
            print(f"building the images failed: {error}", file=sys.stderr)


@pytest.fixture(scope="session")
def built_images(pytestconfig: pytest.Config) -> dict[str, images.Image]:
    if os.geteuid() != 0 or not shutil.which("podman"):
        pytest.fail("node tests need root and podman: run scripts/node/prepare.sh")
    built = pytestconfig.stash.get(_IMAGES, None)
    if built is None:
        built = images.build()
    if isinstance(built, BaseException):
        pytest.fail(f"building the images failed: {built}")
    return built


@pytest.fixture(scope="package")
def cluster(
    built_images: dict[str, images.Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[farm.Tools, node_harness.Node, str]]:
    """The test plane with one real node, Azurite on the pods' bridge, the chart's operator."""
    bin_dir = kube_harness.bin_dir()
    subprocess.run(["bash", str(kube_harness.BUILD_SCRIPT), "node"], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    workdir = tmp_path_factory.mktemp("kube")
    with (
        kube_harness.ControlPlane(bin_dir, workdir=workdir) as plane,
        node_harness.Node(
            plane,
            kubelet=bin_dir / "kubelet",
            sandbox=built_images["pause"],
            imported=[built_images[name] for name in ("renderer", "operator", "gateway")],
        ) as node,
        farm.bridge_azurite() as connection,
    ):
        tools = farm.Tools(plane)
        release.prepare_namespace(tools, connection, tmp_path_factory.mktemp("templates"))
        release.install_chart(tools, plane, built_images["operator"], built_images["gateway"])
        yield tools, node, connection


@pytest.fixture(scope="package")
def prom(
    cluster: tuple[farm.Tools, node_harness.Node, str],
) -> Iterator[prometheus.PrometheusServer]:
    """A real Prometheus scraping what the chart's PodMonitor and ServiceMonitor select, every 5 s
    (the dashboards' rates assume 15 s or shorter)."""
    tools, _, _ = cluster
    interval = ["interval=5s", "scrapeTimeout=4s"]
    monitors = monitoring.chart_monitors(
        tools,
        release.ROOT / "charts" / "reportfarm",
        namespace=release.NAMESPACE,
        values=[f"watchNamespace={release.NAMESPACE}"]
        + [f"metrics.{m}.{v}" for m in ("podMonitor", "serviceMonitor") for v in interval],
    )
    assert {m["kind"] for m in monitors} == {"PodMonitor", "ServiceMonitor"}, monitors
    with monitoring.discovery(tools.plane) as discovery:
        configs = monitoring.scrape_configs(monitors, discovery=discovery)
        with prometheus.PrometheusServer({}, scrape_configs=configs) as server:
            yield server
