"""The real KEDA (operator + metrics adapter) beside a test control plane, on this machine.

KEDA ships as two Deployments: the operator, which owns ScaledObjects, creates their HPAs and
polls the scalers, and the metrics adapter, an extension API server that answers the HPA's
``external.metrics.k8s.io`` queries by asking the operator over gRPC. Here both run as processes
on the host (``scripts/keda/build.sh`` builds them from the Go module proxy, cached), against
the control plane of :mod:`tests.harness.kube`, whose apiserver has the aggregation layer on:

- one throwaway CA and a certificate for ``localhost``/127.0.0.1 (server and client use) in a
  cert dir both read (``ca.crt``, ``tls.crt``, ``tls.key``): the operator serves its gRPC metrics
  service with it, the adapter dials it with it; KEDA's own certificate rotation is off;
- every port KEDA would take by default moved to a free loopback port;
- the adapter is reached through a Service of type ExternalName (EndpointSlices refuse loopback
  addresses) and the APIService ``v1beta1.external.metrics.k8s.io`` on its port
  (``insecureSkipTLSVerify``: its serving certificate is its own self-signed one);
- ``WATCH_NAMESPACE=""`` (all namespaces), ``KEDA_CLUSTER_OBJECT_NAMESPACE`` and
  ``POD_NAMESPACE`` name the ``keda`` namespace, as the chart's Deployments would.

The HPA controller is the controller-manager's own (its 15 s sync, its RBAC for external
metrics): nothing of the HPA is modelled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.harness import kube as kube_harness

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "keda" / "build.sh"
NAMESPACE = "keda"
APISERVICE = "v1beta1.external.metrics.k8s.io"
SERVICE = "keda-metrics-apiserver"


class KedaError(RuntimeError):
    """KEDA did not come up; the message has its logs."""


def bin_dir() -> Path:
    """The directory with ``keda``, ``keda-adapter`` and ``crds/``: ``REPORTFARM_KEDA_BIN``, or
    what ``scripts/keda/build.sh`` built (~10-25 min cold on 2 cores, instant when cached)."""
    override = os.environ.get("REPORTFARM_KEDA_BIN")
    if override:
        return Path(override)
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(done.stdout.strip().splitlines()[-1])


def _cert_dir(directory: Path) -> Path:
    """``ca.crt``, ``tls.crt``, ``tls.key`` for localhost: KEDA's gRPC pair (both ends)."""
    directory.mkdir(parents=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reportfarm-test-keda-ca")])

    def sign(subject: x509.Name, public_key: Any, *extensions: Any) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=7))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(ca_key, hashes.SHA256())

    ca = sign(
        ca_name, ca_key.public_key(), (x509.BasicConstraints(ca=True, path_length=None), True)
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    cert = sign(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]),
        key.public_key(),
        (x509.SubjectAlternativeName(names), False),
        (x509.ExtendedKeyUsage(usages), False),
    )
    (directory / "ca.crt").write_bytes(kube_harness._pem(ca))
    (directory / "tls.crt").write_bytes(kube_harness._pem(cert))
    (directory / "tls.key").write_bytes(kube_harness._pem(key))
    return directory


@dataclasses.dataclass
class _Ports:
    metrics: int
    health: int
    grpc: int
    adapter: int
    adapter_metrics: int

    @classmethod
    def free(cls) -> _Ports:
        return cls(*kube_harness._free_ports(5))


def _condition(plane: kube_harness.ControlPlane, path: str, kind: str) -> bool:
    """Whether the object at ``path`` has condition ``kind`` True."""
    conditions = (plane.request("GET", path).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


class Keda:
    """KEDA's operator and metrics adapter for ``plane``; ``with Keda(plane) as keda: ...``."""

    def __init__(self, plane: kube_harness.ControlPlane, *, bin_dir: Path) -> None:
        self.plane = plane
        self.bin_dir = bin_dir
        self.workdir = Path(tempfile.mkdtemp(prefix="reportfarm-keda-"))
        self.ports = _Ports.free()
        self._components: list[kube_harness._Component] = []

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, timeout: float = 180.0) -> None:
        self._apply_crds()
        self._namespace()
        certs = _cert_dir(self.workdir / "certs")
        kubeconfig = str(self.plane.kubeconfig)
        env = {
            **os.environ,
            "WATCH_NAMESPACE": "",
            "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
            "POD_NAMESPACE": NAMESPACE,
        }
        ports = self.ports
        self._spawn(
            "keda-operator",
            [
                str(self.bin_dir / "keda"),
                f"--kubeconfig={kubeconfig}",
                f"--cert-dir={certs}",
                "--enable-cert-rotation=false",
                "--leader-elect=false",
                f"--metrics-bind-address=127.0.0.1:{ports.metrics}",
                f"--health-probe-bind-address=127.0.0.1:{ports.health}",
                f"--metrics-service-bind-address=127.0.0.1:{ports.grpc}",
                "--zap-log-level=info",
                "--zap-encoder=console",
            ],
            env,
        )
        self._spawn(
            "keda-adapter",
            [
                str(self.bin_dir / "keda-adapter"),
                f"--kubeconfig={kubeconfig}",
                f"--lister-kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--cert-dir={certs}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports.adapter}",
                f"--port={ports.adapter_metrics}",
                f"--metrics-service-address=127.0.0.1:{ports.grpc}",
                "--metrics-service-grpc-authority=localhost",
                "--profiling=false",
                "--zap-log-level=info",
                "--zap-encoder=console",
            ],
            env,
        )
        self._register_adapter()
        self._wait("the external metrics API to be Available", self._available, timeout)

    def _apply_crds(self) -> None:
        self.kubectl("apply", "--server-side", "-f", str(self.bin_dir / "crds"))
        for name in ("scaledobjects.keda.sh", "triggerauthentications.keda.sh"):
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            self._wait(
                f"CRD {name} Established",
                lambda p=path: _condition(self.plane, p, "Established"),
                60,
            )

    def _namespace(self) -> None:
        self.kubectl("create", "namespace", NAMESPACE, check=False)

    def _register_adapter(self) -> None:
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "https", "port": self.ports.adapter}],
            },
        }
        apiservice = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {"name": SERVICE, "namespace": NAMESPACE, "port": self.ports.adapter},
            },
        }
        self.plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/services", service)
        self.plane.request("POST", "/apis/apiregistration.k8s.io/v1/apiservices", apiservice)

    def _available(self) -> bool:
        path = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}"
        return _condition(self.plane, path, "Available")

    def kubectl(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [str(self.plane.bin_dir / "kubectl"), f"--kubeconfig={self.plane.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise KedaError(f"kubectl {' '.join(args)}: {done.stderr}\n{self.logs()}")
        return done.stdout

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=kube_harness._die_with_parent,
            )
        self._components.append(kube_harness._Component(name, process, log))

    def _wait(self, what: str, check: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = [c for c in self._components if c.process.poll() is not None]
            if dead:
                raise KedaError(f"{dead[0].name} exited while waiting for {what}\n{self.logs()}")
            try:
                if check():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise KedaError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.5)

    def logs(self, lines: int = 40) -> str:
        return "\n\n".join(c.tail(lines) for c in self._components)

    def stop(self) -> None:
        # Unregister the adapter first: an APIService left pointing at nothing makes every later
        # discovery on this control plane (kubectl, helm, kopf) meet a group that answers 503.
        with contextlib.suppress(Exception):
            path = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}"
            self.plane.request("DELETE", path)
        with contextlib.suppress(Exception):
            self.plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/services/{SERVICE}")
        while self._components:
            self._components.pop().stop()
        if not os.environ.get("REPORTFARM_KEEP_KUBE"):
            shutil.rmtree(self.workdir, ignore_errors=True)
