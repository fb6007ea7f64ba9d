"""A real Kubernetes control plane for tests, on loopback, with kwok's fake nodes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as child processes
(each in its own process group, logging to a file in a temporary directory). Binaries come from
``scripts/kube/build.sh`` (see :func:`bin_dir`). Nodes are plain Node objects that kwok keeps Ready
and whose Pods it marks Running, so Deployments, scheduling and capacity behave for real.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import dataclasses
import datetime
import functools
import ipaddress
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
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(done.stdout.strip().splitlines()[-1])


# --- certificates ----------------------------------------------------------------------------


def _pem(obj: Any) -> bytes:
    """PEM of a certificate, a private key (PKCS#8) or a public key."""
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    if isinstance(obj, ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
        return obj.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    return bytes(
        obj.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


class _Pki:
    """A throwaway CA issuing the apiserver's serving cert and every client cert, plus the
    service-account signing key. Files are written to ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reportfarm-test-ca")])
        ca = self._sign(
            self._name,
            self._key.public_key(),
            x509.BasicConstraints(ca=True, path_length=None),
        )
        self.ca_file = self._write("ca.crt", _pem(ca))
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key_file = self._write("sa.key", _pem(sa_key))
        self.sa_pub_file = self._write("sa.pub", _pem(sa_key.public_key()))

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    def _sign(self, subject: x509.Name, public_key: Any, *extensions: Any) -> x509.Certificate:
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=7))
        )
        for extension in extensions:
            builder = builder.add_extension(extension, critical=False)
        return builder.sign(self._key, hashes.SHA256())

    def issue(
        self, name: str, *, user: str, groups: tuple[str, ...] = (), serving: bool = False
    ) -> tuple[Path, Path]:
        """A certificate for ``user`` in ``groups`` (client), or with ``serving``, the
        apiserver's (loopback and in-cluster names). Returns (cert file, key file)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject = x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, user)])
        if serving:
            dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
            ips = [ipaddress.ip_address(ip) for ip in ("127.0.0.1", _SERVICE_IP)]
            names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ip) for ip in ips]
            extensions = [
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                x509.SubjectAlternativeName(names),
            ]
        else:
            extensions = [x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])]
        cert = self._sign(subject, key.public_key(), *extensions)
        return self._write(f"{name}.crt", _pem(cert)), self._write(f"{name}.key", _pem(key))

    def kubeconfig(self, path: Path, *, server: str, cert: Path, key: Path) -> Path:
        """A self-contained kubeconfig for this cert (data embedded; JSON is valid YAML)."""

        def b64(p: Path) -> str:
            return base64.b64encode(p.read_bytes()).decode()

        cluster = {"server": server, "certificate-authority-data": b64(self.ca_file)}
        user = {"client-certificate-data": b64(cert), "client-key-data": b64(key)}
        name = "reportfarm-test"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": user}],
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
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on loopback, with
    the API aggregation layer on (the HPA reads external metrics through it).

    >>> with ControlPlane(bin_dir()) as cp:
    ...     cp.add_node("node-a", cpu="8", memory="32Gi")
    ...     subprocess.run(["kubectl", f"--kubeconfig={cp.kubeconfig}", "get", "nodes"])

    The admin user of :attr:`kubeconfig` is in group ``system:masters``. Certificates, etcd's data
    and each component's log live in :attr:`workdir`: a given directory (kept), or a temporary
    one (removed on :meth:`stop` unless ``REPORTFARM_KEEP_KUBE`` is set).
    """

    external = False

    def __init__(
        self, bin_dir: Path, *, workdir: Path | None = None, startup_timeout: float = 120.0
    ) -> None:
        self.bin_dir = bin_dir
        self.startup_timeout = startup_timeout
        self.fake_nodes: dict[str, dict[str, str]] = {}
        """The fake nodes added so far: name -> capacity."""
        self._given_workdir = workdir
        self.workdir: Path | None = None
        self.server = ""
        """The apiserver's URL, ``https://127.0.0.1:<port>``."""
        self._components: list[_Component] = []
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

    def start(self) -> Self:
        """Start every component and wait until the cluster can run Deployments."""
        if self._given_workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="reportfarm-kube-"))
        else:
            self.workdir = self._given_workdir
            self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_components(self.workdir, _Pki(self.workdir / "pki"))
            self.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_components(self, workdir: Path, pki: _Pki) -> None:
        etcd_port, peer_port, api_port = _free_ports(3)
        self.server = f"https://127.0.0.1:{api_port}"
        cert, key = pki.issue("admin", user="admin", groups=("system:masters",))
        pki.kubeconfig(self.kubeconfig, server=self.server, cert=cert, key=key)
        tls = ssl.create_default_context(cafile=str(pki.ca_file))
        tls.load_cert_chain(cert, key)
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=tls)
        )

        etcd = f"http://127.0.0.1:{etcd_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            f"--data-dir={workdir / 'etcd'}",
            f"--listen-client-urls={etcd}",
            f"--advertise-client-urls={etcd}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        )
        self._poll("etcd /health", lambda: self._http_ok(f"{etcd}/health"))

        cert, key = pki.issue("apiserver", user="kube-apiserver", serving=True)
        # The aggregation layer (extension API servers such as KEDA's metrics adapter): a CA of
        # its own for the front proxy, whose client certificate the apiserver presents to them.
        front_proxy = _Pki(workdir / "pki" / "front-proxy")
        proxy_cert, proxy_key = front_proxy.issue("front-proxy-client", user="front-proxy-client")
        self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd}",
            f"--cert-dir={workdir / 'apiserver-certs'}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
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
            f"--requestheader-client-ca-file={front_proxy.ca_file}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy_cert}",
            f"--proxy-client-key-file={proxy_key}",
        )
        self._poll("kube-apiserver /readyz", lambda: self._http_ok(f"{self.server}/readyz"))

        # Each component gets its own identity (and the RBAC roles bootstrapped for it).
        def kubeconfig_for(name: str, user: str, *groups: str) -> str:
            cert, key = pki.issue(name, user=user, groups=groups)
            path = workdir / f"{name}.kubeconfig"
            return f"--kubeconfig={pki.kubeconfig(path, server=self.server, cert=cert, key=key)}"

        self._spawn(
            "kube-controller-manager",
            kubeconfig_for("kube-controller-manager", "system:kube-controller-manager"),
            "--secure-port=0",
            "--leader-elect=true",  # its Lease doubles as the readiness signal
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key_file}",
            f"--root-ca-file={pki.ca_file}",
        )
        self._spawn(
            "kube-scheduler",
            kubeconfig_for("kube-scheduler", "system:kube-scheduler"),
            "--secure-port=0",
            "--leader-elect=true",
        )
        self._spawn(
            "kwok",
            kubeconfig_for("kwok", "kwok", "system:masters"),
            f"--config={self.bin_dir / 'kwok-stages.yaml'}",  # written by build.sh
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
        """Stop every component (newest first) and reap it; remove a temporary workdir."""
        while self._components:
            self._components.pop().stop()
        if self._given_workdir is None and self.workdir is not None:
            if not os.environ.get("REPORTFARM_KEEP_KUBE"):
                shutil.rmtree(self.workdir, ignore_errors=True)

    def logs(self, *, lines: int = 40) -> str:
        """The last ``lines`` lines of every running component's log."""
        return "\n\n".join(c.tail(lines) for c in self._components)

    # --- readiness ---

    def wait_until_ready(self, *, timeout: float | None = None) -> None:
        """Wait for /readyz, the controller-manager's and scheduler's leader Leases, and the
        ``default`` ServiceAccount (Pods cannot be created in a namespace before it exists)."""
        leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
        checks = {
            "kube-apiserver /readyz": "/readyz",
            "kube-controller-manager leader lease": f"{leases}/kube-controller-manager",
            "kube-scheduler leader lease": f"{leases}/kube-scheduler",
            "ServiceAccount default/default": "/api/v1/namespaces/default/serviceaccounts/default",
        }
        for what, path in checks.items():
            self._poll(what, functools.partial(self._http_ok, self.server + path), timeout=timeout)

    def _poll(self, what: str, check: Callable[[], bool], *, timeout: float | None = None) -> None:
        """Poll ``check`` until true; fail early, with the logs, if a component exits."""
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
        except OSError:  # refused, TLS not up yet, or an HTTPError (4xx/5xx)
            return False

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call the API as admin; returns the decoded JSON (raises HTTPError on 4xx/5xx)."""
        request = urllib.request.Request(
            self.server + path,
            data=None if body is None else json.dumps(body).encode(),
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
        """Create a fake Node with this capacity, managed by kwok; by default wait until it
        can take Pods. Labelled ``type: kwok``."""
        capacity = {"cpu": cpu, "memory": memory, "pods": pods}
        labels = {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": labels,
            },
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "nodeInfo": {"kubeletVersion": "fake", "operatingSystem": "linux"},
            },
        }
        self.request("POST", "/api/v1/nodes", node)
        self.fake_nodes[name] = capacity
        if wait:
            self.wait_node_ready(name)

    def remove_node(self, name: str) -> None:
        """Delete a fake Node (the controller-manager then deletes its Pods)."""
        self.request("DELETE", f"/api/v1/nodes/{name}")
        del self.fake_nodes[name]

    def wait_node_ready(self, name: str, *, timeout: float = 60.0) -> None:
        """Wait until kwok reports the Node Ready and its not-ready taint is gone."""

        def ready() -> bool:
            node = self.request("GET", f"/api/v1/nodes/{name}")
            conditions = node.get("status", {}).get("conditions", [])
            taints = [t["key"] for t in node.get("spec", {}).get("taints", [])]
            is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            return is_ready and "node.kubernetes.io/not-ready" not in taints

        self._poll(f"node {name} Ready", ready, timeout=timeout)


class ExternalCluster:
    """A cluster the user already runs (kind, minikube, ...), reached through its kubeconfig.

    Same surface as :class:`ControlPlane`, but the nodes are the cluster's own: :meth:`add_node`
    only logs a note and :attr:`fake_nodes` stays empty.
    """

    external = True

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.fake_nodes: dict[str, dict[str, str]] = {}

    def add_node(self, name: str, **capacity: Any) -> None:
        logger.warning("external cluster: not adding fake node %s %s", name, capacity)

    def wait_until_ready(self, *, timeout: float | None = None) -> None:
        pass

    def logs(self, *, lines: int = 40) -> str:
        return ""


def reachable(kubeconfig: Path, *, timeout: float = 5.0) -> bool:
    """Whether the cluster of ``kubeconfig``'s current context answers /version."""
    import kubernetes  # only needed for a user's own cluster, whose auth may be anything

    try:
        with kubernetes.config.new_client_from_config(config_file=str(kubeconfig)) as client:
            kubernetes.client.VersionApi(client).get_code(_request_timeout=timeout)
    except Exception as error:  # a bad file, auth or network: not usable either way
        logger.warning("the cluster of %s is not reachable: %s", kubeconfig, error)
        return False
    return True
