"""The embedded default: start Azurite, the official Azure Storage emulator, on loopback.

Used by ``reportfarm up`` when ``AZURE_STORAGE_CONNECTION_STRING`` is unset, by the benchmark and
by the integration tests. Azurite comes from npm (``scripts/bootstrap.sh`` installs it into the
repo's git-ignored ``tools/`` folder); ``REPORTFARM_AZURITE`` may name another executable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ACCOUNT = "devstoreaccount1"
# The emulator's documented, public development key (not a secret).
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


class AzuriteError(RuntimeError):
    """Azurite could not be found or did not start."""


def find_executable() -> str:
    configured = os.environ.get("REPORTFARM_AZURITE")
    if configured:
        return configured
    local = Path(__file__).resolve().parents[1] / "tools" / "node_modules" / ".bin" / "azurite"
    if local.exists():
        return str(local)
    found = shutil.which("azurite")
    if found:
        return found
    raise AzuriteError(
        "Azurite is not installed: run scripts/bootstrap.sh (npm install azurite into tools/), "
        "or set AZURE_STORAGE_CONNECTION_STRING to a real storage account"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def connection_string(blob_port: int, queue_port: int, table_port: int | None = None) -> str:
    parts = [
        "DefaultEndpointsProtocol=http",
        f"AccountName={ACCOUNT}",
        f"AccountKey={ACCOUNT_KEY}",
        f"BlobEndpoint=http://127.0.0.1:{blob_port}/{ACCOUNT}",
        f"QueueEndpoint=http://127.0.0.1:{queue_port}/{ACCOUNT}",
    ]
    if table_port:
        parts.append(f"TableEndpoint=http://127.0.0.1:{table_port}/{ACCOUNT}")
    return ";".join(parts) + ";"


class Azurite:
    """One Azurite process. In memory by default; ``location`` keeps data on disk instead."""

    def __init__(self, *, location: Path | None = None, ports: tuple[int, int, int] | None = None):
        self.location = location
        self.blob_port, self.queue_port, self.table_port = ports or (
            free_port(),
            free_port(),
            free_port(),
        )
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="azurite-", suffix=".log", delete=False)

    @property
    def connection_string(self) -> str:
        return connection_string(self.blob_port, self.queue_port, self.table_port)

    @property
    def log_path(self) -> str:
        return self._log.name

    def start(self, *, timeout: float = 30.0) -> Azurite:
        args = [find_executable(), "--silent", "--skipApiVersionCheck", "--loose"]
        # --inMemoryPersistence and --location cannot be combined: Azurite exits.
        if self.location is None:
            args.append("--inMemoryPersistence")
        else:
            args += ["--location", str(self.location)]
        for service, port in (
            ("blob", self.blob_port),
            ("queue", self.queue_port),
            ("table", self.table_port),
        ):
            args += [f"--{service}Host", "127.0.0.1", f"--{service}Port", str(port)]
        self.process = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AzuriteError(f"Azurite exited at start: {Path(self.log_path).read_text()}")
            if all(_listening(port) for port in (self.blob_port, self.queue_port)):
                return self
            time.sleep(0.1)
        self.stop()
        raise AzuriteError(f"Azurite did not listen within {timeout} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self) -> None:
        """Stop and start on the same ports (data survives only with ``location``)."""
        self.stop()
        self.start()

    def __enter__(self) -> Azurite:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def running(**kwargs: object) -> Iterator[Azurite]:
    with Azurite(**kwargs) as azurite:  # type: ignore[arg-type]
        yield azurite


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
