"""The operator's settings, from ``REPORTFARM_OPERATOR_*`` environment variables."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from reportfarm import settings as common


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorSettings:
    namespaces: tuple[str, ...] = ()
    """REPORTFARM_OPERATOR_NAMESPACES: comma-separated namespaces to watch; empty: all of them.
    ``--namespace`` on the command line wins."""
    metrics_port: int = 8081
    """REPORTFARM_OPERATOR_METRICS_PORT: port of the operator's /metrics; 0 turns it off."""
    health_port: int = 8080
    """REPORTFARM_OPERATOR_HEALTH_PORT: port of kopf's liveness endpoint /healthz; 0: off."""
    pod_timeout: float = 2.0
    """REPORTFARM_OPERATOR_POD_TIMEOUT: seconds for one renderer's /metrics or PUT /pool."""
    queue_timeout: float = 10.0
    """REPORTFARM_OPERATOR_QUEUE_TIMEOUT: seconds for one queue depth read (then: unreadable)."""
    kube_timeout: float = 15.0
    """REPORTFARM_OPERATOR_KUBE_TIMEOUT: seconds for one Kubernetes API request."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OperatorSettings:
        env = os.environ if env is None else env
        prefix = "REPORTFARM_OPERATOR_"
        return cls(
            namespaces=common.env_list(env, f"{prefix}NAMESPACES"),
            metrics_port=common.env_int(env, f"{prefix}METRICS_PORT", 8081),
            health_port=common.env_int(env, f"{prefix}HEALTH_PORT", 8080),
            pod_timeout=common.env_float(env, f"{prefix}POD_TIMEOUT", 2.0, minimum=0.1),
            queue_timeout=common.env_float(env, f"{prefix}QUEUE_TIMEOUT", 10.0, minimum=0.1),
            kube_timeout=common.env_float(env, f"{prefix}KUBE_TIMEOUT", 15.0, minimum=0.1),
        )
