"""The container images of the node tests: built (or found in the cache) by
``scripts/images/build.sh``, run with podman configured for these machines."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "images" / "build.sh"
CONTAINERS_CONF = ROOT / "scripts" / "images" / "containers.conf"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Image:
    """One built image."""

    name: str
    """renderer, operator or pause."""
    ref: str
    """The podman reference, ``localhost/reportfarm-<name>:<content key>``."""
    archive: Path
    """The cached OCI archive (for ``ctr images import``)."""
    size: int
    """Bytes, as podman reports the image's size."""


def build(*names: str) -> dict[str, Image]:
    """Build what is missing (its progress goes to this process's stderr); name -> Image."""
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), *names], stdout=subprocess.PIPE, text=True, check=True
    )
    images = {}
    for line in done.stdout.splitlines():
        name, ref, archive, size = line.split()
        images[name] = Image(name=name, ref=ref, archive=Path(archive), size=int(size))
    return images


def podman_env() -> dict[str, str]:
    """The environment for podman: runc, cgroupfs, lowered rlimits (see containers.conf)."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(*args: str, check: bool = True, timeout: float = 120.0) -> str:
    """Run ``podman ARGS``; its stdout (stderr in the error when it fails)."""
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, env=podman_env(), timeout=timeout
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def logs(container: str) -> str:
    """A container's output: podman writes what the container wrote to stderr to its own."""
    done = subprocess.run(
        ["podman", "logs", container], capture_output=True, text=True, env=podman_env(), timeout=60
    )
    return done.stdout + done.stderr
