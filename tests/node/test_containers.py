"""The images, run by podman as users run them: the renderer renders the examples from inside its
image (its own Chromium and fonts, user 10001, read-only root filesystem) against Azurite on the
host; the operator image reconciles a ReportPool on the test control plane."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reportfarm import azurite
from reportfarm.client import ReportFarmClient, Submission
from tests.harness import kube as kube_harness
from tests.harness import reportpools
from tests.harness.polling import eventually
from tests.node import images

EXAMPLES = images.ROOT / "examples"


def _pdf_text(pdf: Path) -> str:
    done = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


@pytest.fixture
def renderer(
    built_images: dict[str, images.Image], azurite_server: azurite.Azurite
) -> Iterator[tuple[str, str, str]]:
    """A renderer container on the host network: (container name, queue, blob container)."""
    suffix = uuid.uuid4().hex[:8]
    name, queue, container = f"rf-renderer-{suffix}", f"q{suffix}", f"c{suffix}"
    port = azurite.free_port()
    images.podman(
        "run", "--detach", "--name", name, "--network", "host",
        "--read-only", "--user", "10001:10001", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--env", f"AZURE_STORAGE_CONNECTION_STRING={azurite_server.connection_string}",
        "--env", f"REPORTFARM_QUEUE={queue}", "--env", f"REPORTFARM_CONTAINER={container}",
        "--env", f"REPORTFARM_PORT={port}", "--env", "REPORTFARM_POOL_SIZE=1",
        "--env", "REPORTFARM_LOG_FORMAT=json",
        "--env", "HOME=/tmp", "--env", "XDG_CACHE_HOME=/tmp/.cache",
        built_images["renderer"].ref,
    )  # fmt: skip
    try:
        yield name, queue, container
    finally:
        images.podman("rm", "--force", "--time", "5", name, check=False)


async def _render_examples(connection: str, queue: str, container: str, out: Path) -> list[Path]:
    async with ReportFarmClient(connection, queue=queue, container=container) as client:
        await client.ensure()
        ids = [
            await client.submit(Submission(template=data.stem, data=json.loads(data.read_text())))
            for data in sorted((EXAMPLES / "data").glob("*.json"))
        ]
        results = await client.wait(ids, timeout_s=180)
        pdfs = []
        for job_id, record in results.items():
            assert record is not None, f"job {job_id} got no result"
            assert record.state == "succeeded", record
            pdfs.append(out / f"{job_id}.pdf")
            pdfs[-1].write_bytes(await client.download(record))
        return pdfs


def test_renderer_image_renders_the_examples(
    renderer: tuple[str, str, str], azurite_server: azurite.Azurite, tmp_path: Path
) -> None:
    name, queue, container = renderer
    pdfs = asyncio.run(
        _render_examples(azurite_server.connection_string, queue, container, tmp_path)
    )
    assert len(pdfs) == len(list((EXAMPLES / "data").glob("*.json")))
    texts = [_pdf_text(pdf) for pdf in pdfs]
    # Chinese text from the example data, laid out with the image's own fonts.
    assert any("林雨桐" in text for text in texts), texts
    user = images.podman("exec", name, "id", "-u").strip()
    assert user == "10001"
    touch = subprocess.run(
        ["podman", "exec", name, "touch", "/opt/reportfarm/x"],
        capture_output=True, text=True, env=images.podman_env(),
    )  # fmt: skip
    assert touch.returncode != 0 and "Read-only file system" in touch.stderr, touch
    # SIGTERM through tini reaches the worker, which drains and exits cleanly.
    images.podman("stop", "--time", "60", name)
    assert images.podman("inspect", "--format", "{{.State.ExitCode}}", name).strip() == "0"
    logs = images.logs(name)
    stages = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert any("pdf_generation" in json.dumps(line) for line in stages), logs[-2000:]


@pytest.fixture
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube_harness.ControlPlane]:
    workdir = tmp_path_factory.mktemp("kube")
    with kube_harness.ControlPlane(kube_harness.bin_dir(), workdir=workdir) as plane:
        plane.add_node("kwok-node-0")
        yield plane


def test_operator_image_reconciles_a_report_pool(
    built_images: dict[str, images.Image], control_plane: kube_harness.ControlPlane
) -> None:
    crds = images.ROOT / "crds"
    kubectl = control_plane.bin_dir / "kubectl"
    kube = [str(kubectl), f"--kubeconfig={control_plane.kubeconfig}"]
    subprocess.run([*kube, "apply", "-f", str(crds)], check=True, capture_output=True)
    subprocess.run(
        [*kube, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
        check=True, capture_output=True,
    )  # fmt: skip
    name = f"rf-operator-{uuid.uuid4().hex[:8]}"
    health, metrics = azurite.free_port(), azurite.free_port()
    images.podman(
        "run", "--detach", "--name", name, "--network", "host",
        "--read-only", "--user", "10001:10001", "--cap-drop", "ALL",
        "--volume", f"{control_plane.kubeconfig}:/kube/config:ro",
        "--env", "KUBECONFIG=/kube/config",
        "--env", f"REPORTFARM_OPERATOR_HEALTH_PORT={health}",
        "--env", f"REPORTFARM_OPERATOR_METRICS_PORT={metrics}",
        built_images["operator"].ref, "--namespace", "default",
    )  # fmt: skip
    try:
        pool = reportpools.report_pool("images", "q-images")
        control_plane.request(
            "POST",
            f"/apis/{reportpools.GROUP}/{reportpools.VERSION}/namespaces/default/"
            f"{reportpools.PLURAL}",
            pool,
        )

        def deployment() -> object:
            try:
                return control_plane.request("GET", "/apis/apps/v1/namespaces/default/deployments")[
                    "items"
                ]
            except OSError:
                return None

        found = eventually(
            "the operator container to create the renderers' Deployment",
            deployment,
            timeout=120,
            detail=lambda: images.logs(name),
        )
        assert any("images" in d["metadata"]["name"] for d in found), found  # type: ignore[attr-defined]
    finally:
        images.podman("rm", "--force", "--time", "5", name, check=False)
