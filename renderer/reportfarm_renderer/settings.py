"""The renderer's settings, from ``REPORTFARM_*`` environment variables (one object, no globals)."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from reportfarm import settings as common

BROWSER_MEMORY_BYTES = 500 * 2**20
"""What one browser holds after rendering (measured here: ~500 MiB PSS); sizes the default pool."""


def default_pool_size() -> int:
    """As many browsers as cores (more does not help) and as memory allows (500 MiB each)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 4 * 2**30
    return max(1, min(cores or 1, memory // BROWSER_MEMORY_BYTES))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RendererSettings:
    storage: common.StorageSettings
    """Queue, container and connection string (see reportfarm.settings.StorageSettings)."""
    templates: Path
    """REPORTFARM_TEMPLATES: the folder of Jinja2 templates (in Kubernetes, a mounted ConfigMap)."""
    pool_size: int
    """REPORTFARM_POOL_SIZE: browsers in the pool at start (default: cores, bounded by memory)."""
    port: int = 8080
    """REPORTFARM_PORT: HTTP port for /healthz, /readyz, /metrics and /pool."""
    visibility_timeout: int = 60
    """REPORTFARM_VISIBILITY_TIMEOUT: seconds a received job stays invisible unless extended."""
    max_dequeue_count: int = 5
    """REPORTFARM_MAX_DEQUEUE_COUNT: deliveries before a failing job goes to the poison queue."""
    max_render_timeouts: int = 2
    """REPORTFARM_MAX_RENDER_TIMEOUTS: deliveries that hit the render timeout before poison."""
    borrow_timeout: float = 30.0
    """REPORTFARM_BORROW_TIMEOUT: seconds a job waits for a free browser."""
    render_timeout: float = 30.0
    """REPORTFARM_RENDER_TIMEOUT: seconds for the whole page work of one job (load + print)."""
    launch_timeout: float = 30.0
    """REPORTFARM_LAUNCH_TIMEOUT: seconds for one browser to start."""
    recycle_after_jobs: int = 100
    """REPORTFARM_RECYCLE_AFTER_JOBS: a browser is replaced after this many jobs."""
    recycle_rss_bytes: int = 700 * 2**20
    """REPORTFARM_RECYCLE_RSS_MB: a browser above this memory is replaced after its job."""
    drain_timeout: float = 25.0
    """REPORTFARM_DRAIN_TIMEOUT: on SIGTERM, seconds to finish running jobs (fit it to the pod's
    terminationGracePeriodSeconds); what is left is made visible again at once."""
    poll_max_s: float = 1.0
    """REPORTFARM_POLL_MAX_S: longest pause between receives when the queue is empty."""
    max_data_bytes: int = 16 * 2**20
    """REPORTFARM_MAX_DATA_MB: largest template data (inline or payload blob) accepted."""
    max_pdf_bytes: int = 100 * 2**20
    """REPORTFARM_MAX_PDF_MB: largest PDF stored; a larger one fails the job permanently."""
    chromium_path: str | None = None
    """REPORTFARM_CHROMIUM_PATH: the Chromium binary.

    Default: Playwright's own browser if installed, else /usr/bin/chromium."""
    allowed_hosts: tuple[str, ...] = ()
    """REPORTFARM_ALLOWED_HOSTS: comma-separated hosts documents may load from (public IPs only)."""
    admin_token: str | None = None
    """REPORTFARM_ADMIN_TOKEN: if set, PUT /pool needs ``Authorization: Bearer <token>``."""
    worker_id: str = dataclasses.field(default_factory=socket.gethostname)
    """REPORTFARM_WORKER_ID: names this worker in result records and logs (default: host name)."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, /, **overrides: object
    ) -> RendererSettings:
        env = os.environ if env is None else env
        mib = 2**20
        values: dict[str, object] = dict(
            storage=common.StorageSettings.from_env(env),
            templates=Path(env.get("REPORTFARM_TEMPLATES") or "examples/templates"),
            pool_size=common.env_int(env, "REPORTFARM_POOL_SIZE", default_pool_size(), minimum=0),
            port=common.env_int(env, "REPORTFARM_PORT", 8080),
            visibility_timeout=common.env_int(env, "REPORTFARM_VISIBILITY_TIMEOUT", 60, minimum=2),
            max_dequeue_count=common.env_int(env, "REPORTFARM_MAX_DEQUEUE_COUNT", 5, minimum=1),
            max_render_timeouts=common.env_int(env, "REPORTFARM_MAX_RENDER_TIMEOUTS", 2, minimum=1),
            borrow_timeout=common.env_float(env, "REPORTFARM_BORROW_TIMEOUT", 30.0),
            render_timeout=common.env_float(env, "REPORTFARM_RENDER_TIMEOUT", 30.0),
            launch_timeout=common.env_float(env, "REPORTFARM_LAUNCH_TIMEOUT", 30.0),
            recycle_after_jobs=common.env_int(env, "REPORTFARM_RECYCLE_AFTER_JOBS", 100, minimum=1),
            recycle_rss_bytes=common.env_int(env, "REPORTFARM_RECYCLE_RSS_MB", 700) * mib,
            drain_timeout=common.env_float(env, "REPORTFARM_DRAIN_TIMEOUT", 25.0),
            poll_max_s=common.env_float(env, "REPORTFARM_POLL_MAX_S", 1.0, minimum=0.05),
            max_data_bytes=common.env_int(env, "REPORTFARM_MAX_DATA_MB", 16) * mib,
            max_pdf_bytes=common.env_int(env, "REPORTFARM_MAX_PDF_MB", 100) * mib,
            chromium_path=env.get("REPORTFARM_CHROMIUM_PATH") or None,
            allowed_hosts=common.env_list(env, "REPORTFARM_ALLOWED_HOSTS"),
            admin_token=env.get("REPORTFARM_ADMIN_TOKEN") or None,
            worker_id=env.get("REPORTFARM_WORKER_ID") or socket.gethostname(),
        )
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
