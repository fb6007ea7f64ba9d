"""A real Kubernetes control plane for tests, on loopback, with kwok's fake nodes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as child processes
(each in its own process group, logging to a file in a temporary directory). Binaries come from
``scripts/kube/build.sh`` (see :func:`bin_dir`). Nodes are plain Node objects that kwok keeps Ready
and whose Pods it marks Running, so Deployments, scheduling and capacity behave for real.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import datetime
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

logger = logging.getLogger(__name__)

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kube" / "build.sh"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.0.0.0/24"
_SERVICE_IP = "10.0.0.1"
_SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


class ControlPlaneError(RuntimeError):
    """The control plane did not start, or a component died; the message has the logs."""


def bin_dir() -> Path:
    """The directory with etcd, kube-*, kubectl, kwok, helm and kubeconform.

    ``REPORTFARM_KUBE_BIN`` may name a directory of prebuilt binaries; otherwise
    ``scripts/kube/build.sh`` builds what is missing (many minutes when cold, instant when cached)
    and prints its cache directory. Its progress goes to this process's stderr.
    """
    override = os.environ.get("REPORTFARM_KUBE_BIN")
    if override:
        return Path(override)
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


# --- certificates ----------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class _Pki:
    """A throwaway CA issuing the apiserver's serving cert and every client cert."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reportfarm-test-ca")])
        self._name = name
        self._cert = (
            self._builder(name, self._key.public_key())
            .issuer_name(name)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.ca_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.ca_file = self._write("ca.crt", self.ca_pem)
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key_file = self._write("sa.key", _pem_key(sa_key))
        self.sa_pub_file = self._write(
            "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )

    @staticmethod
    def _builder(subject: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
        )

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    def issue(self, name: str, *, common_name: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A client certificate (user ``common_name`` in ``groups``): (cert file, key file)."""
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        return self._issue(name, x509.Name(attrs), ExtendedKeyUsageOID.CLIENT_AUTH, san=None)

    def issue_serving(self, name: str) -> tuple[Path, Path]:
        """The apiserver's serving certificate, valid for loopback and the in-cluster names."""
        import ipaddress

        dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
        ips = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address(_SERVICE_IP)]
        san = x509.SubjectAlternativeName(
            [x509.DNSName(d) for d in dns] + [x509.IPAddress(ip) for ip in ips]
        )
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
        return self._issue(name, subject, ExtendedKeyUsageOID.SERVER_AUTH, san=san)

    def _issue(
        self, name: str, subject: x509.Name, usage: x509.ObjectIdentifier, *, san: Any
    ) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            self._builder(subject, key.public_key())
            .issuer_name(self._name)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return (
            self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
            self._write(f"{name}.key", _pem_key(key)),
        )


def _write_kubeconfig(path: Path, *, server: str, ca: Path, cert: Path, key: Path) -> Path:
    """A self-contained kubeconfig (certificates embedded; JSON is valid YAML)."""
    import base64

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    name = "reportfarm-test"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority-data": b64(ca)}}
        ],
        "users": [
            {"name": name, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(json.dumps(config, indent=2))
    return path


# --- processes -------------------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _die_with_parent() -> None:
    """In the child: get SIGKILLed if the test process dies without stopping us (Linux)."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclasses.dataclass
class _Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM the whole process group, SIGKILL after ``grace`` seconds, then reap."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue
        self.process.wait()

    def tail(self, lines: int) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            text = []
        return f"==> {self.name} ({self.log}) <==\n" + "\n".join(text)


# --- the control plane -----------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on loopback.

    >>> with ControlPlane(bin_dir()) as cp:
    ...     cp.add_node("node-a", cpu="8", memory="32Gi")
    ...     subprocess.run(["kubectl", "--kubeconfig", cp.kubeconfig, "get", "nodes"])

    The admin user (group ``system:masters``) in :attr:`kubeconfig` may do anything.
    """

    external = False

    def __init__(self, bin_dir: Path, *, startup_timeout: float = 120.0) -> None:
        self.bin_dir = bin_dir
        self.startup_timeout = startup_timeout
        self.fake_nodes: list[str] = []
        self.workdir: Path | None = None
        self._components: list[_Component] = []
        self._server = ""
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (certificates embedded), for kubectl, helm and API clients."""
        if self.workdir is None:
            raise ControlPlaneError("the control plane is not started")
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        """The apiserver's URL, ``https://127.0.0.1:<port>``."""
        return self._server

    def start(self) -> Self:
        """Start every component and wait until the cluster can run Deployments."""
        self.workdir = Path(tempfile.mkdtemp(prefix="reportfarm-kube-"))
        try:
            self._start_all(self.workdir)
            self.wait_until_ready()
        except BaseException:
            logs = self.logs()
            self.stop()
            logger.error("control plane failed to start; component logs:\n%s", logs)
            raise
        return self

    def _start_all(self, work: Path) -> None:
        pki = _Pki(work / "pki")
        etcd_port, peer_port, api_port = _free_ports(3)
        self._server = f"https://127.0.0.1:{api_port}"
        admin_cert, admin_key = pki.issue("admin", common_name="admin", groups=("system:masters",))
        context = ssl.create_default_context(cafile=str(pki.ca_file))
        context.load_cert_chain(admin_cert, admin_key)
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        kubeconfigs = {
            user: _write_kubeconfig(
                work / ("kubeconfig" if user == "admin" else f"{user}.kubeconfig"),
                server=self._server,
                ca=pki.ca_file,
                cert=cert,
                key=key,
            )
            for user, (cert, key) in {
                "admin": (admin_cert, admin_key),
                "kube-controller-manager": pki.issue(
                    "kcm", common_name="system:kube-controller-manager"
                ),
                "kube-scheduler": pki.issue("scheduler", common_name="system:kube-scheduler"),
                "kwok": pki.issue("kwok", common_name="kwok", groups=("system:masters",)),
            }.items()
        }
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        )
        self._poll("etcd /health", lambda: self._http_ok(f"{etcd_url}/health"))
        serving_cert, serving_key = pki.issue_serving("apiserver")
        self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd_url}",
            f"--cert-dir={work / 'apiserver-certs'}",
            f"--tls-cert-file={serving_cert}",
            f"--tls-private-key-file={serving_key}",
            f"--secure-port={api_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            f"--client-ca-file={pki.ca_file}",
            f"--service-account-issuer={_SA_ISSUER}",
            f"--service-account-key-file={pki.sa_pub_file}",
            f"--service-account-signing-key-file={pki.sa_key_file}",
            "--allow-privileged=true",
            # The "kubernetes" Endpoints would point at loopback, which validation rejects.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        )
        self._poll("kube-apiserver /readyz", lambda: self._http_ok(f"{self._server}/readyz"))
        self._spawn(
            "kube-controller-manager",
            f"--kubeconfig={kubeconfigs['kube-controller-manager']}",
            "--secure-port=0",
            "--leader-elect=true",  # its Lease doubles as the readiness signal
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key_file}",
            f"--root-ca-file={pki.ca_file}",
        )
        self._spawn(
            "kube-scheduler",
            f"--kubeconfig={kubeconfigs['kube-scheduler']}",
            "--secure-port=0",
            "--leader-elect=true",
        )
        self._spawn(
            "kwok",
            f"--kubeconfig={kubeconfigs['kwok']}",
            f"--config={self.bin_dir / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.240.0.1",
            "--node-lease-duration-seconds=40",
        )

    def _spawn(self, name: str, *args: str) -> None:
        assert self.workdir is not None
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(self.bin_dir / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # its own process group, killed as a whole
                preexec_fn=_die_with_parent,
            )
        self._components.append(_Component(name, process, log))

    def stop(self) -> None:
        """Stop every component (newest first), reap them, remove the working directory."""
        while self._components:
            self._components.pop().stop()
        if self.workdir is not None and not os.environ.get("REPORTFARM_KEEP_KUBE"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def logs(self, *, lines: int = 40) -> str:
        """The last ``lines`` lines of every component's log."""
        return "\n\n".join(c.tail(lines) for c in self._components)

    # --- readiness ---

    def wait_until_ready(self, *, timeout: float | None = None) -> None:
        """Wait for /readyz, the controller-manager's and scheduler's leader Leases, and the
        ``default`` ServiceAccount (Pods cannot be created in a namespace before it exists)."""
        timeout = self.startup_timeout if timeout is None else timeout
        checks = {
            "kube-apiserver /readyz": "/readyz",
            "kube-controller-manager leader lease": (
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
            ),
            "kube-scheduler leader lease": (
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
            ),
            "ServiceAccount default/default": "/api/v1/namespaces/default/serviceaccounts/default",
        }
        for what, path in checks.items():
            self._poll(what, lambda p=path: self._http_ok(self._server + p), timeout=timeout)

    def _poll(self, what: str, check: Callable[[], bool], *, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while not check():
            dead = [c for c in self._components if c.process.poll() is not None]
            if dead:
                names = ", ".join(f"{c.name} (exit {c.process.returncode})" for c in dead)
                raise ControlPlaneError(f"{names} exited while waiting for {what}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.25)

    def _http_ok(self, url: str) -> bool:
        try:
            with self._opener.open(url, timeout=5) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call the API as admin; returns the decoded JSON (raises HTTPError on 4xx/5xx)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self._server + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with self._opener.open(request, timeout=30) as response:
            return json.load(response)

    # --- nodes ---

    def add_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "16Gi",
        pods: str = "110",
        wait: bool = True,
    ) -> None:
        """Create a kwok-managed fake Node with this capacity; by default wait until Ready."""
        capacity = {"cpu": cpu, "memory": memory, "pods": pods}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "fake",
                    "kubeProxyVersion": "fake",
                },
            },
        }
        self.request("POST", "/api/v1/nodes", node)
        self.fake_nodes.append(name)
        if wait:
            self.wait_node_ready(name)

    def remove_node(self, name: str) -> None:
        """Delete a fake Node (its Pods are then evicted by the controller-manager)."""
        self.request("DELETE", f"/api/v1/nodes/{name}")
        self.fake_nodes.remove(name)

    def wait_node_ready(self, name: str, *, timeout: float = 60.0) -> None:
        """Wait until kwok reports the Node Ready."""

        def ready() -> bool:
            node = self.request("GET", f"/api/v1/nodes/{name}")
            conditions = node.get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        self._poll(f"node {name} Ready", ready, timeout=timeout)


class ExternalCluster:
    """A cluster the user already runs (kind, minikube, ...), reached through its kubeconfig.

    Same surface as :class:`ControlPlane`, but nodes are the cluster's own: :meth:`add_node`
    only logs a note.
    """

    external = True

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.fake_nodes: list[str] = []

    def add_node(self, name: str, **capacity: Any) -> None:
        logger.warning("external cluster: not adding fake node %s %s", name, capacity)

    def logs(self, *, lines: int = 40) -> str:
        return ""


def reachable(kubeconfig: Path, *, timeout: float = 5.0) -> bool:
    """Whether the cluster of ``kubeconfig``'s current context answers /version."""
    import kubernetes

    try:
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        with client:
            kubernetes.client.VersionApi(client).get_code(_request_timeout=timeout)
    except Exception as error:  # any failure (bad file, auth, network) means "not usable"
        logger.warning("cluster of %s is not reachable: %s", kubeconfig, error)
        return False
    return True
