"""The operator's settings, from ``REPORTFARM_OPERATOR_*`` environment variables."""

from __future__ import annotations

import dataclasses

from reportfarm import renderer_api
from reportfarm import settings as common


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorSettings(common.FromEnv):
    namespaces: tuple[str, ...] = common.setting("REPORTFARM_OPERATOR_NAMESPACES", ())
    """REPORTFARM_OPERATOR_NAMESPACES: comma-separated namespaces to watch; empty: all of them.
    ``--namespace`` on the command line wins."""
    bind_address: str = common.setting("REPORTFARM_OPERATOR_BIND_ADDRESS", "0.0.0.0")
    """REPORTFARM_OPERATOR_BIND_ADDRESS: address the metrics and health ports listen on
    (``0.0.0.0``: every IPv4 address, as a pod's probes and Prometheus need; ``127.0.0.1`` for
    a local run; ``::`` for IPv6)."""
    metrics_port: int = common.setting("REPORTFARM_OPERATOR_METRICS_PORT", 8081)
    """REPORTFARM_OPERATOR_METRICS_PORT: port of the operator's /metrics; 0 turns it off."""
    health_port: int = common.setting("REPORTFARM_OPERATOR_HEALTH_PORT", 8082)
    """REPORTFARM_OPERATOR_HEALTH_PORT: port of the liveness endpoint /healthz (kopf's, with the
    scaling loop's own probe); 0: off. Not 8080, the renderer's port: an operator run next to a
    renderer must not collide."""
    tick_timeout: float = common.setting("REPORTFARM_OPERATOR_TICK_TIMEOUT", 60.0, minimum=1.0)
    """REPORTFARM_OPERATOR_TICK_TIMEOUT: seconds one pool's tick may take (then it is abandoned,
    logged and posted as a ``TickFailed`` Warning naming this timeout)."""
    stuck_after: float = common.setting("REPORTFARM_OPERATOR_STUCK_AFTER", 90.0, minimum=1.0)
    """REPORTFARM_OPERATOR_STUCK_AFTER: seconds without a completed pass of the scaling loop
    after which /healthz answers 500 (the liveness probe then restarts the operator). A pass
    takes at most the tick timeout (60 s), and one starts every 5 s: keep it above their sum."""
    renderer_port: int = common.setting("REPORTFARM_OPERATOR_RENDERER_PORT", renderer_api.PORT)
    """REPORTFARM_OPERATOR_RENDERER_PORT: the port the operator reaches renderer pods on (their
    /metrics and PUT /pool): the pods' own port, 8080, unless something in front of them moves
    it (the kube tests put a fake renderer there)."""
    pod_timeout: float = common.setting("REPORTFARM_OPERATOR_POD_TIMEOUT", 2.0, minimum=0.1)
    """REPORTFARM_OPERATOR_POD_TIMEOUT: seconds for one renderer's /metrics or PUT /pool."""
    queue_timeout: float = common.setting("REPORTFARM_OPERATOR_QUEUE_TIMEOUT", 10.0, minimum=0.1)
    """REPORTFARM_OPERATOR_QUEUE_TIMEOUT: seconds for one queue depth read (then: unreadable)."""
    kube_timeout: float = common.setting("REPORTFARM_OPERATOR_KUBE_TIMEOUT", 15.0, minimum=0.1)
    """REPORTFARM_OPERATOR_KUBE_TIMEOUT: seconds for one Kubernetes API request."""
