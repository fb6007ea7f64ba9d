"""A real renderer (real Chromium, real Azurite) started from exactly the environment the operator
generates for each kind of ReportPool, driven through the operator's own side of the contract
(``reportfarm.renderer_api``): it reaches ready, renders a job, answers ``/metrics`` and ``PUT
/pool`` as the scaling loop reads and sends them.

- Connection-string Secret: the Secret's value where the pod's ``secretKeyRef`` points.
- Account URL (workload identity): Azurite over HTTPS with ``--oauth basic``, a loopback Entra ID
  token endpoint, and the variables AKS's webhook injects; the renderer signs in with
  ``DefaultAzureCredential`` exactly as in a pod. The operator's queue reading goes the same way.

Only two values differ from the pod, both places on this host: the templates folder (the pod
mounts a ConfigMap there) and the port (each pod has its own network namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from reportfarm_gateway import context, hinting
from reportfarm_operator import children, observing, specs
from reportfarm_renderer import service

from reportfarm import azurite, renderer_api
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings
from reportfarm.storage import accounts
from tests.gateway.conftest import auth, hinting_gateway
from tests.harness import entra
from tests.renderer.conftest import pdf_text, renderer_settings, wait_for

ROOT = Path(__file__).resolve().parents[2]
ADMIN = ("admin", "token")
NAMESPACE = "reports"


def pool_spec(queue: Mapping[str, Any], container: str) -> dict[str, Any]:
    return {
        "image": "reportfarm/renderer:test",
        "queue": dict(queue),
        "outputContainer": container,
        "browsersPerPod": {"min": 1, "max": 1},
        "adminTokenSecretRef": {"name": ADMIN[0]},
    }


def resolved(
    entries: list[dict[str, Any]], *, secrets: Mapping[tuple[str, str], str], pod: str
) -> dict[str, str]:
    """The container's environment as the kubelet hands it to the process."""
    env: dict[str, str] = {}
    for entry in entries:
        source = entry.get("valueFrom", {})
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[entry["name"]] = secrets[(ref["name"], ref["key"])]
        else:
            assert source["fieldRef"] == {"fieldPath": "metadata.name"}, entry
            env[entry["name"]] = pod
    return env


def host_env() -> dict[str, str]:
    """This machine's environment without any farm or Azure setting; this checkout's code."""
    host = {k: v for k, v in os.environ.items() if not k.startswith(("REPORTFARM_", "AZURE_"))}
    host["PYTHONPATH"] = os.pathsep.join(str(ROOT / part) for part in ("", "renderer"))
    return host


class Pod:
    """``reportfarm worker`` with a pod's environment (and nothing of this shell's)."""

    def __init__(self, env: Mapping[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reportfarm.cli", "worker"],
                env={**host_env(), **env},
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@contextlib.contextmanager
def pod(
    spec: Mapping[str, Any],
    *,
    secrets: Mapping[tuple[str, str], str],
    templates: Path,
    log: Path,
    injected: Mapping[str, str] | None = None,
) -> Iterator[tuple[Pod, int]]:
    """A renderer from the operator's env for ``spec``; ``injected``: what AKS adds to the pod."""
    env = resolved(children.renderer_env(specs.parse(spec)), secrets=secrets, pod="renderer-0")
    port = azurite.free_port()
    host_places = {renderer_api.Var.TEMPLATES: str(templates), renderer_api.Var.PORT: str(port)}
    assert set(host_places) <= set(env), "the operator sets both; only their values move"
    process = Pod({**env, **(injected or {}), **host_places}, log)
    try:
        yield process, port
    finally:
        process.stop()


async def ready(session: aiohttp.ClientSession, port: int, process: Pod) -> None:
    async def answers() -> bool:
        if process.process.poll() is not None:
            raise AssertionError(f"the renderer exited:\n{process.tail()}")
        url = f"http://127.0.0.1:{port}{renderer_api.READYZ_PATH}"
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(url) as response:
                return response.status == 200
        return False

    try:
        await wait_for(answers, timeout=120)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{process.tail()}") from None


async def render_one(client: ReportFarmClient, name: str) -> str:
    """The text of the PDF the farm renders for the ``plain`` template (``你好 {{ name }}``)."""
    job_id = await client.submit(Submission(template="plain", data={"name": name}))
    results = await client.wait([job_id], timeout_s=120)
    record = results[job_id]
    assert record is not None and record.state == "succeeded", record
    return " ".join(pdf_text(await client.download(record)).split())


async def drive_control_surface(observer: observing.Observer, *, token: str, renders: int) -> None:
    """The operator's own calls against the real renderer: /metrics, then PUT /pool."""
    (load,) = (await observer.pod_loads({"renderer-0": ("uid-0", "127.0.0.1")})).values()
    assert isinstance(load, observing.PodLoad), load
    assert load.size == 1 and load.lifetime_renders == renders
    assert (await observer.resize("127.0.0.1", 2, token="wrong")) == "HTTP 401: " + (
        '{"error": "unauthorized"}'
    )
    assert await observer.resize("127.0.0.1", 2, token=token) is None
    (load,) = (await observer.pod_loads({"renderer-0": ("uid-0", "127.0.0.1")})).values()
    assert isinstance(load, observing.PodLoad) and load.size == 2


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        yield http


class NoKube:
    """The accountUrl path never reads a Secret; the connection-string one is not read here."""

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        raise AssertionError(f"read Secret {name}/{key}")


def observer_for(session: aiohttp.ClientSession, port: int) -> observing.Observer:
    return observing.Observer(
        kube=NoKube(),  # type: ignore[arg-type]
        session=session,
        queue_timeout=30,
        port=port,
    )


async def test_a_connection_string_pool_renders(
    azurite_server: azurite.Azurite,
    storage_names: tuple[str, str],
    template_dir: Path,
    tmp_path: Path,
    session: aiohttp.ClientSession,
) -> None:
    queue, container = storage_names
    spec = pool_spec({"name": queue, "connectionSecretRef": {"name": "storage"}}, container)
    secrets = {("storage", "connection-string"): azurite_server.connection_string, ADMIN: "t0k"}
    # The client reads the same settings as the pod.
    storage = StorageSettings.from_env(
        resolved(children.renderer_env(specs.parse(spec)), secrets=secrets, pod="client")
    )
    assert storage.connection_string == azurite_server.connection_string
    with pod(spec, secrets=secrets, templates=template_dir, log=tmp_path / "pod.log") as (
        process,
        port,
    ):
        await ready(session, port, process)
        async with ReportFarmClient(
            accounts.from_settings(storage), queue=queue, container=container
        ) as client:
            assert "你好 Secret" in await render_one(client, "Secret")
        await drive_control_surface(observer_for(session, port), token="t0k", renders=1)
        assert '"storage: signed in with a connection string"' in process.log.read_text()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return entra.certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def oauth_azurite(tls: tuple[Path, Path]) -> Iterator[azurite.Azurite]:
    """Azurite over HTTPS accepting Entra ID tokens (``--oauth basic``)."""
    with azurite.Azurite(tls=tls) as server:
        yield server


@pytest.fixture
def identity(
    tls: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[entra.TokenEndpoint, dict[str, str]]]:
    """The token endpoint and what AKS injects into a pod; this process signs in the same way."""
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text("federated.service-account.token")
    entra.trust(tls[0])
    with entra.TokenEndpoint(tls=tls, federated_token=token_file.read_text()) as endpoint:
        injected = entra.pod_identity_env(authority=endpoint.authority, token_file=token_file)
        for name, value in injected.items():
            monkeypatch.setenv(name, value)
        # The pod trusts the private certificate of this machine's Azurite and token endpoint
        # (on AKS: Azure's public ones, in the image's CA store).
        yield endpoint, {**injected, "SSL_CERT_FILE": str(tls[0])}


async def test_an_account_url_pool_renders_through_workload_identity(
    oauth_azurite: azurite.Azurite,
    identity: tuple[entra.TokenEndpoint, dict[str, str]],
    storage_names: tuple[str, str],
    template_dir: Path,
    tmp_path: Path,
    session: aiohttp.ClientSession,
) -> None:
    endpoint, injected = identity
    queue, container = storage_names
    fields = {"name": queue, "accountUrl": oauth_azurite.queue_url}
    spec = pool_spec({**fields, "blobUrl": oauth_azurite.blob_url}, container)
    env = resolved(
        children.renderer_env(specs.parse(spec)), secrets={ADMIN: "t0k"}, pod="renderer-0"
    )
    assert "AZURE_STORAGE_CONNECTION_STRING" not in env
    storage = StorageSettings.from_env(env)
    observer = observer_for(session, 0)
    try:
        # The client signs in with DefaultAzureCredential too (no key anywhere).
        async with ReportFarmClient(
            accounts.from_settings(storage), queue=queue, container=container
        ) as client:
            await client.ensure()
            waiting = await client.submit(Submission(template="plain", data={"name": "queued"}))
            reading = await observer.queue(NAMESPACE, specs.parse(spec).queue)
            assert (reading.depth, reading.error) == (1, None)
            with pod(
                spec,
                secrets={ADMIN: "t0k"},
                templates=template_dir,
                log=tmp_path / "pod.log",
                injected=injected,
            ) as (process, port):
                await ready(session, port, process)
                assert (await client.wait([waiting], timeout_s=120))[waiting] is not None
                assert "你好 Entra" in await render_one(client, "Entra")
                observer.port = port
                await drive_control_surface(observer, token="t0k", renders=2)
                assert '"storage: signed in with a token credential"' in process.log.read_text()
            reading = await observer.queue(NAMESPACE, specs.parse(spec).queue)
            assert (reading.depth, reading.error) == (0, None)
        assert endpoint.grants >= 3, "this process (client, operator) and the pod each signed in"
        assert endpoint.refusals == []
    finally:
        await observer.close()


async def test_a_token_azurite_refuses_is_a_reading_error_not_a_crash(
    oauth_azurite: azurite.Azurite,
    identity: tuple[entra.TokenEndpoint, dict[str, str]],
    storage_names: tuple[str, str],
    session: aiohttp.ClientSession,
) -> None:
    """Azurite checks the token (so the test above cannot pass without one): a token for another
    audience is refused, and the operator reports that instead of a depth."""
    endpoint, _ = identity
    endpoint.audience = "https://vault.azure.net"
    queue, container = storage_names
    spec = pool_spec(
        {"name": queue, "accountUrl": oauth_azurite.queue_url, "blobUrl": oauth_azurite.blob_url},
        container,
    )
    observer = observer_for(session, renderer_api.PORT)
    try:
        reading = await observer.queue(NAMESPACE, specs.parse(spec).queue)
    finally:
        await observer.close()
    assert reading.depth is None
    assert reading.error is not None and "403" in reading.error, reading
    assert endpoint.grants == 1


async def test_the_cli_and_the_gateway_sign_in_with_the_account_url(
    oauth_azurite: azurite.Azurite,
    identity: tuple[entra.TokenEndpoint, dict[str, str]],
    storage_names: tuple[str, str],
    template_dir: Path,
    tmp_path: Path,
) -> None:
    """No key anywhere: a renderer and the gateway in this process, ``reportfarm submit`` as a
    process of its own, all through DefaultAzureCredential. With no account secret to derive
    the hints' key from, ``REPORTFARM_HINT_KEY`` is the key: the synchronous report is handed
    to the renderer and its answer carried back, as with a connection string."""
    endpoint, injected = identity
    queue, container = storage_names
    storage = StorageSettings(
        connection_string=None,
        account_url=oauth_azurite.queue_url,
        blob_url=oauth_azurite.blob_url,
        queue=queue,
        container=container,
        hint_key="a hint key for the test, 32 characters or more",
    )
    settings = renderer_settings(storage, template_dir, pool_size=1)
    async with service.running(settings) as renderer:
        async with hinting_gateway(storage, renderer_port=renderer.port, handoff_s=30) as gateway:
            body = {"template": "plain", "data": {"name": "Gateway"}, "wait_s": 60}
            async with gateway.http.post(
                gateway.at("/v1/reports"), json=body, headers=auth()
            ) as response:
                assert response.status == 200, await response.text()
                assert "你好 Gateway" in " ".join(pdf_text(await response.read()).split())
            assert gateway.app[hinting.WAKER].handed == 1 and renderer.worker.handoffs == 1
            carried = gateway.app[context.METRICS].registry.get_sample_value(
                "reportfarm_gateway_hints_total", {"kind": "done", "outcome": "carried"}
            )
            assert carried == 1

        data = tmp_path / "job.json"
        data.write_text('{"name": "CLI"}', encoding="utf-8")
        env = {
            **host_env(),
            **injected,
            "AZURE_STORAGE_ACCOUNT_URL": storage.account_url or "",
            "AZURE_STORAGE_BLOB_URL": storage.blob_url or "",
            "REPORTFARM_QUEUE": queue,
            "REPORTFARM_CONTAINER": container,
        }
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "reportfarm.cli", "submit", "--template", "plain", "--data", str(data)),
            *("--out", str(tmp_path / "out"), "--timeout", "120"),
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await cli.communicate()
        assert cli.returncode == 0, output.decode(errors="replace")
    (pdf,) = (tmp_path / "out").glob("*.pdf")
    assert "你好 CLI" in " ".join(pdf_text(pdf.read_bytes()).split())
    assert endpoint.refusals == []
