"""The embedded default: start Azurite, the official Azure Storage emulator, on loopback.

Used by ``reportfarm up`` when ``AZURE_STORAGE_CONNECTION_STRING`` is unset, by the benchmark and
by the integration tests. Azurite comes from npm (``scripts/bootstrap.sh`` installs it into the
repo's git-ignored ``tools/`` folder); ``REPORTFARM_AZURITE`` may name another executable.

Stopping: on SIGTERM Azurite closes its three services (each waits for its open connections, so
close clients first) and prints "... successfully closed" for each. With its telemetry on (the
default) it then never exits (measured with 3.37: a telemetry timer keeps Node alive, which made
every stop wait for a 10 s timeout and a kill); with ``--disableTelemetry`` it exits at once.
:meth:`Azurite.stop` waits for those lines, then for the exit, and kills only a process that
lingers. Its output is read through a pipe and kept in memory (errors quote it): nothing is left in
the temp folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

ACCOUNT = "devstoreaccount1"
SERVICES = ("Blob", "Queue", "Table")
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


def connection_string(
    blob_port: int, queue_port: int, table_port: int | None = None, *, scheme: str = "http"
) -> str:
    parts = [
        f"DefaultEndpointsProtocol={scheme}",
        f"AccountName={ACCOUNT}",
        f"AccountKey={ACCOUNT_KEY}",
        f"BlobEndpoint={scheme}://127.0.0.1:{blob_port}/{ACCOUNT}",
        f"QueueEndpoint={scheme}://127.0.0.1:{queue_port}/{ACCOUNT}",
    ]
    if table_port:
        parts.append(f"TableEndpoint={scheme}://127.0.0.1:{table_port}/{ACCOUNT}")
    return ";".join(parts) + ";"


class Azurite:
    """One Azurite process. In memory by default; ``location`` keeps data on disk instead."""

    def __init__(
        self,
        *,
        location: Path | None = None,
        ports: tuple[int, int, int] | None = None,
        tls: tuple[Path, Path] | None = None,
        debug_log: Path | None = None,
    ):
        """``tls``: (certificate, key) PEM files: serve HTTPS and accept Entra ID bearer tokens
        (``--oauth basic``: Azurite checks a token's lifetime, issuer and audience, not its
        signature). The account key keeps working beside them."""
        self.location = location
        self.tls = tls
        self.debug_log = debug_log
        """Azurite's debug log (``--debug``): a line per request and more; counts storage calls."""
        self.blob_port, self.queue_port, self.table_port = ports or (
            free_port(),
            free_port(),
            free_port(),
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.output: deque[str] = deque(maxlen=200)
        """Azurite's last lines of output (it runs with --silent: start and stop messages)."""
        self.forced_kill = False
        """Whether the last stop had to kill Azurite before its services said they were closed."""
        self.stop_seconds: float | None = None
        """How long the last stop took."""
        self._ready = threading.Event()
        self._settled = threading.Event()
        self._all_closed = False
        self._reader: threading.Thread | None = None

    @property
    def connection_string(self) -> str:
        return connection_string(
            self.blob_port, self.queue_port, self.table_port, scheme=self._scheme
        )

    @property
    def queue_url(self) -> str:
        """The account's queue endpoint (https with ``tls``)."""
        return f"{self._scheme}://127.0.0.1:{self.queue_port}/{ACCOUNT}"

    @property
    def blob_url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.blob_port}/{ACCOUNT}"

    @property
    def _scheme(self) -> str:
        return "http" if self.tls is None else "https"

    def start(self, *, timeout: float = 30.0) -> Azurite:
        # --disableTelemetry: with telemetry on, Azurite never exits after closing its services.
        args = [
            find_executable(),
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
            "--disableTelemetry",
        ]
        # --inMemoryPersistence and --location cannot be combined: Azurite exits.
        if self.location is None:
            args.append("--inMemoryPersistence")
        else:
            args += ["--location", str(self.location)]
        if self.debug_log is not None:
            args += ["--debug", str(self.debug_log)]
        if self.tls is not None:
            args += ["--cert", str(self.tls[0]), "--key", str(self.tls[1]), "--oauth", "basic"]
        for service, port in (
            ("blob", self.blob_port),
            ("queue", self.queue_port),
            ("table", self.table_port),
        ):
            args += [f"--{service}Host", "127.0.0.1", f"--{service}Port", str(port)]
        self._ready.clear()
        self._settled.clear()
        self._all_closed = False
        try:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            raise AzuriteError(
                f"cannot run Azurite ({args[0]}: {error.strerror}): run scripts/bootstrap.sh, "
                "or set REPORTFARM_AZURITE to its executable"
            ) from None
        self._reader = threading.Thread(
            target=self._read, args=(self.process,), name="azurite-output", daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._reader.join(timeout=1.0)
                raise AzuriteError("Azurite exited at start: " + " / ".join(self.output))
            # Its signal handlers are installed after the last service listens: wait for that.
            if self._ready.wait(0.1) and all(
                _listening(port) for port in (self.blob_port, self.queue_port, self.table_port)
            ):
                return self
            time.sleep(0.1)
        self.stop()
        raise AzuriteError(f"Azurite did not listen within {timeout} s")

    def stop(self, *, grace: float = 5.0) -> None:
        """SIGTERM, wait (at most ``grace`` s) until every service says it closed, then for the
        exit; end the process if it lingers. ``forced_kill`` says whether it had to be killed
        before its services said they were closed."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        began = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        settled = self._settled.wait(grace)
        forced = False
        try:
            process.wait(timeout=1.0 if settled else 0.01)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            forced = not self._all_closed
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        self.forced_kill = forced
        self.stop_seconds = time.monotonic() - began

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        """Collect the output; settle when every service said it closed or the output ends."""
        assert process.stdout is not None
        closed: set[str] = set()
        try:
            with process.stdout:
                for raw in process.stdout:
                    line = raw.decode("utf-8", "replace").rstrip()
                    self.output.append(line)
                    for service in SERVICES:
                        if line == f"Azurite {service} service successfully closed":
                            closed.add(service)
                    if line.startswith(f"Azurite {SERVICES[-1]} service is successfully listening"):
                        self._ready.set()
                    if len(closed) == len(SERVICES):
                        self._all_closed = True
                        self._settled.set()
        finally:
            self._settled.set()

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
