"""A real node for the test control plane: containerd (Debian's) + runc + a bridge CNI + a
kubelet built from the same Kubernetes modules (``scripts/kube/build.sh node``).

Everything lives in one temporary folder: containerd's root, state and socket, the kubelet's root
directory, pod logs, the CNI config and its address allocations. Pods get their own network
namespaces on a bridge with no uplink (``NETWORK``; no masquerading, no route out, no IP
forwarding from the bridge), so several renderer pods run side by side on one node, each on its
own address and the same port, and only this machine's bridge address and the pods' own
namespaces are ever reached. The kubelet
listens on loopback and registers as ``localhost`` (the apiserver reaches it by that host name;
a loopback node IP is refused).

A second node (``SECOND``) runs beside the first on the same bridge: its own containerd and
kubelet, the upper half of the bridge's addresses, its own cgroup root (two kubelets under one
``/kubepods`` would each remove the other's pod cgroups as orphans), and the name ``127.0.0.2``:
the apiserver dials a node by its host name, and a second loopback address is the only other
name that resolves here without touching the machine's ``/etc/hosts``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

from reportfarm import azurite
from tests.harness import kube as kube_harness
from tests.node import images

NODE_NAME = "localhost"
BRIDGE = "rfnode0"
NETWORK = ipaddress.ip_network("10.88.77.0/24")
GATEWAY = str(next(NETWORK.hosts()))
"""The bridge's own address: services on this machine that pods reach (Azurite) listen here."""
CNI_BIN = Path("/usr/lib/cni")
FORWARDING = Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/forwarding")
"""0 while the node runs: packets from the pods are never routed off the bridge."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Identity:
    """What tells two nodes on this machine apart."""

    name: str
    """The Node's name and host name: the apiserver reaches the kubelet there."""
    address: str
    """The loopback address the kubelet listens on (``name`` resolves to it)."""
    pod_range: tuple[str, str]
    """First and last pod address of ``NETWORK`` this node hands out."""
    cgroup_root: str = "/"
    """The kubelet's cgroup root; each node's pods live under ``<root>/kubepods``."""


FIRST = Identity(name=NODE_NAME, address="127.0.0.1", pod_range=("10.88.77.2", "10.88.77.127"))
SECOND = Identity(
    name="127.0.0.2",
    address="127.0.0.2",
    pod_range=("10.88.77.128", "10.88.77.254"),
    cgroup_root="/reportfarm-node-b",
)


RUNNING: set[str] = set()
"""Names of the nodes of this process that share the bridge."""


class NodeError(RuntimeError):
    """The node did not come up; the message has the logs."""


@dataclasses.dataclass
class _Process:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines()[-lines:]
        return f"==> {self.name} <==\n" + "\n".join(text)


def _containerd_config(workdir: Path, *, sandbox_image: str) -> str:
    return f"""version = 2
root = "{workdir}/containerd/root"
state = "{workdir}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{workdir}/containerd.sock"
[ttrpc]
  address = "{workdir}/containerd-ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{workdir}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # No CAP_SYS_RESOURCE here: containerd must not set oom_score_adj below its own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{workdir}/cni"
"""


def _cni_config(workdir: Path, *, identity: Identity) -> dict[str, object]:
    first, last = identity.pod_range
    subnet = {"subnet": str(NETWORK), "gateway": GATEWAY, "rangeStart": first, "rangeEnd": last}
    ipam = {
        "type": "host-local",
        "ranges": [[subnet]],
        "dataDir": str(workdir / "cni-ipam"),
    }
    bridge = {
        "type": "bridge",
        "bridge": BRIDGE,
        # The bridge's address is ours (_bridge_up); as a gateway the plugin would also turn on
        # the machine's IP forwarding. Pods get the subnet's route only, no default route.
        "isGateway": False,
        "ipMasq": False,  # nothing leaves this machine: no NAT, no route out
        "hairpinMode": True,
        "ipam": ipam,
    }
    return {"cniVersion": "1.0.0", "name": "reportfarm-node", "plugins": [bridge]}


def _kubelet_config(
    workdir: Path, *, identity: Identity, port: int, healthz_port: int
) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": identity.address,
        "cgroupRoot": identity.cgroup_root,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,  # these machines have hybrid cgroups
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{workdir}/containerd.sock",
        "podLogsDir": str(workdir / "pod-logs"),
        # The test plane has no node authorizer: the apiserver's logs/exec calls are anonymous.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "maxPods": 20,
        # The machine is shared: never evict for its disk or memory pressure.
        "evictionHard": {"memory.available": "100Mi"},
        "imageGCHighThresholdPercent": 100,
        "serializeImagePulls": False,
        "resolvConf": "",
    }


class Node:
    """containerd + kubelet joined to ``plane``, with ``imported`` images available to pods."""

    def __init__(
        self,
        plane: kube_harness.ControlPlane,
        *,
        kubelet: Path,
        sandbox: images.Image,
        imported: list[images.Image],
        identity: Identity = FIRST,
    ) -> None:
        self.plane = plane
        self.identity = identity
        self.name = identity.name
        self.kubelet = kubelet
        self.sandbox = sandbox
        self.imported = imported
        self.workdir = Path(tempfile.mkdtemp(prefix="reportfarm-node-"))
        self._processes: list[_Process] = []

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        RUNNING.add(self.name)
        _bridge_up()
        _cgroup_root(self.identity.cgroup_root)
        work = self.workdir
        (work / "cni").mkdir()
        conflist = _cni_config(work, identity=self.identity)
        (work / "cni" / "10-reportfarm.conflist").write_text(json.dumps(conflist))
        (work / "containerd.toml").write_text(
            _containerd_config(work, sandbox_image=self.sandbox.ref)
        )
        self._spawn("containerd", "containerd", f"--config={work / 'containerd.toml'}")
        self._wait("containerd's socket", lambda: (work / "containerd.sock").exists(), 60)
        for image in [self.sandbox, *self.imported]:
            self.ctr("images", "import", "--all-platforms", str(image.archive))
        port, healthz = azurite.free_port(), azurite.free_port()
        config = work / "kubelet.json"  # JSON is YAML
        settings = _kubelet_config(work, identity=self.identity, port=port, healthz_port=healthz)
        config.write_text(json.dumps(settings))
        self._spawn(
            "kubelet",
            str(self.kubelet),
            f"--config={config}",
            f"--kubeconfig={self.plane.kubeconfig}",
            f"--root-dir={work / 'kubelet'}",
            f"--cert-dir={work / 'kubelet-pki'}",
            f"--hostname-override={self.name}",
            # The node's address (host-network pods, probes of them) is the bridge's own.
            f"--node-ip={GATEWAY}",
            "--v=1",
        )
        self._wait("the node to register", self._registered, 120)
        self.plane.wait_node_ready(self.name, timeout=120)

    def ctr(self, *args: str) -> str:
        done = subprocess.run(
            ["ctr", f"--address={self.workdir / 'containerd.sock'}", "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)}: {done.stderr}")
        return done.stdout

    def _registered(self) -> bool:
        try:
            self.plane.request("GET", f"/api/v1/nodes/{self.name}")
        except OSError:
            return False
        return True

    def _spawn(self, name: str, *argv: str) -> None:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._processes.append(_Process(name, process, log))

    def _wait(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            dead = [p for p in self._processes if p.process.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise NodeError(
                    f"waiting for {what}: {'exited' if dead else 'timed out'}\n" + self.logs()
                )
            time.sleep(0.5)

    def logs(self, lines: int = 40) -> str:
        return "\n\n".join(p.tail(lines) for p in self._processes)

    def stop(self) -> None:
        """Drain the node (cordon, delete its pods so the kubelet tears their networks down),
        stop the kubelet and containerd, kill what is left, unmount and remove the folder."""
        with contextlib.suppress(Exception):  # best effort: the plane may be gone already
            self._drain(timeout=90)
        for process in [p for p in self._processes if p.name == "kubelet"]:
            _terminate(process.process)
        if (self.workdir / "containerd.sock").exists():
            with contextlib.suppress(NodeError, subprocess.TimeoutExpired):
                for container in self.ctr("tasks", "list", "--quiet").split():
                    with contextlib.suppress(NodeError):
                        self.ctr("tasks", "kill", "--signal", "SIGKILL", container)
        for process in self._processes:
            if process.name != "kubelet":
                _terminate(process.process)
        self._processes.clear()
        for mount in _mounts_under(self.workdir):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        if not os.environ.get("REPORTFARM_KEEP_NODE"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.identity.cgroup_root != "/":
            _remove_cgroup_root(self.identity.cgroup_root)
        RUNNING.discard(self.name)
        if not RUNNING:  # the last node on the bridge takes it down
            subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)

    def _drain(self, *, timeout: float) -> None:
        path = f"/api/v1/nodes/{self.name}"
        node = self.plane.request("GET", path)
        node["spec"]["unschedulable"] = True
        self.plane.request("PUT", path, node)
        selector = f"/api/v1/pods?fieldSelector=spec.nodeName%3D{self.name}"
        for pod in self.plane.request("GET", selector)["items"]:
            meta = pod["metadata"]
            self.plane.request(
                "DELETE",
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 5},
            )
        deadline = time.monotonic() + timeout
        while self.plane.request("GET", selector)["items"] and time.monotonic() < deadline:
            time.sleep(1)
        self.plane.request("DELETE", path)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 15)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        process.wait()


def _mounts_under(folder: Path) -> list[str]:
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mount = line.split()[1]
        if mount.startswith(str(folder)):
            found.append(mount)
    return sorted(found, reverse=True)


def _bridge_up() -> None:
    """The pods' bridge with the gateway address, before any pod exists (Azurite binds to it)."""

    def ip(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", *args], capture_output=True, text=True)

    if ip("link", "show", BRIDGE).returncode != 0:
        ip("link", "add", BRIDGE, "type", "bridge")
    if GATEWAY not in ip("-4", "addr", "show", BRIDGE).stdout:
        ip("addr", "add", f"{GATEWAY}/{NETWORK.prefixlen}", "dev", BRIDGE)
    # Whatever route a pod had, the kernel never forwards what arrives on the bridge: pods reach
    # each other (bridged) and this machine's bridge address (delivered locally), nothing else.
    FORWARDING.write_text("0\n")
    done = ip("link", "set", BRIDGE, "up")
    if done.returncode != 0:
        raise NodeError(f"cannot bring up bridge {BRIDGE}: {done.stderr}")


CGROUPS = Path("/sys/fs/cgroup")


def _hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, the named and unified ones, or v2)."""
    if (CGROUPS / "cgroup.controllers").exists():
        return [CGROUPS]
    return [p for p in CGROUPS.iterdir() if p.is_dir() and not p.is_symlink()]


def _cgroup_root(root: str) -> None:
    """The kubelet refuses a cgroup root that does not exist: make it in every hierarchy."""
    if root == "/":
        return
    for hierarchy in _hierarchies():
        folder = hierarchy / root.strip("/")
        folder.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":  # a new cpuset has no CPUs or memory nodes until copied
            for name in ("cpuset.cpus", "cpuset.mems"):
                (folder / name).write_text((hierarchy / name).read_text())


def _remove_cgroup_root(root: str) -> None:
    """rmdir, deepest first, what the kubelet left under ``root`` (empty once pods are gone)."""
    for hierarchy in _hierarchies():
        folder = hierarchy / root.strip("/")
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_dir():
                with contextlib.suppress(OSError):
                    path.rmdir()
        with contextlib.suppress(OSError):
            folder.rmdir()
