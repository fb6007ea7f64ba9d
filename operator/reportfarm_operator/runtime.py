"""The operator's long-lived resources, opened at kopf's start-up and kept in its ``memo``.

No globals: handlers find them as ``memo.runtime`` (see ``handlers.runtime_of``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from wsgiref.simple_server import WSGIServer

import aiohttp

from reportfarm_operator import k8s, observing
from reportfarm_operator.metrics import OperatorMetrics
from reportfarm_operator.settings import OperatorSettings

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Runtime:
    settings: OperatorSettings
    kube: k8s.Kube
    observer: observing.Observer
    metrics: OperatorMetrics
    session: aiohttp.ClientSession
    metrics_server: tuple[WSGIServer, threading.Thread] | None = None

    async def close(self) -> None:
        if self.metrics_server is not None:
            server, thread = self.metrics_server
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        await self.observer.close()
        await self.session.close()
        self.kube.close()


async def open_runtime(settings: OperatorSettings) -> Runtime:
    """Connect to the API (in-cluster or kubeconfig), open the HTTP session, serve metrics."""
    kube = k8s.Kube(k8s.client_from_environment(), timeout=settings.kube_timeout)
    session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=settings.pod_timeout), trust_env=False
    )
    runtime = Runtime(
        settings=settings,
        kube=kube,
        observer=observing.Observer(
            kube=kube,
            session=session,
            queue_timeout=settings.queue_timeout,
            port=settings.renderer_port,
        ),
        metrics=OperatorMetrics(),
        session=session,
    )
    if settings.metrics_port:
        runtime.metrics_server = runtime.metrics.serve(
            settings.metrics_port, address=settings.bind_address
        )
        logger.info(
            "operator metrics on %s:%d/metrics", settings.bind_address, settings.metrics_port
        )
    return runtime
