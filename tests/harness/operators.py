"""The operator as a process of its own (``reportfarm operator``), SIGKILL-able like a pod."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class OperatorProcess:
    """``reportfarm operator`` for one namespace, as a process of its own (SIGKILL-able)."""

    def __init__(
        self,
        namespace: str,
        kubeconfig: Path,
        log: Path,
        *,
        log_format: str = "text",
        env: Mapping[str, str] | None = None,
        metrics_port: int = 0,
    ) -> None:
        self.log = log
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "REPORTFARM_OPERATOR_METRICS_PORT": str(metrics_port),
            "REPORTFARM_OPERATOR_HEALTH_PORT": "0",
            "REPORTFARM_OPERATOR_POD_TIMEOUT": "1",
            "REPORTFARM_OPERATOR_QUEUE_TIMEOUT": "5",
            "REPORTFARM_OPERATOR_KUBE_TIMEOUT": "5",
            "REPORTFARM_LOG_FORMAT": log_format,
            # This checkout's code, not whatever copy of the packages is installed.
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT / part) for part in ("", "renderer", "operator", "gateway")]
                + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
            **(env or {}),
        }
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reportfarm.cli", "operator", "--namespace", namespace],
                env=env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as when a pod's container dies: no clean-up of any kind."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
