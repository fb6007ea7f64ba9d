"""The renderer's settings, from ``REPORTFARM_*`` environment variables (one object, no globals)."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from reportfarm import contract, renderer_api
from reportfarm import settings as common
from reportfarm.renderer_api import Var
from reportfarm_renderer import cpus

FINISHING_PROCESSES_VAR = "REPORTFARM_FINISHING_PROCESSES"
"""Read by the renderer alone (the operator leaves it to the pod's CPUs)."""
FINISHING_PER_CPU = 2
"""Finishing processes per pod CPU: a stage waits as well as computes (a signature for the
timestamp authority, the PDF's way through the pipe; measured while invoices also waited there
for EN 16931's Saxon process), and a process that waits holds no CPU. ``reportfarm
bench einvoice`` on 2 CPUs, side by side: 2 processes made 1.37-2.12 e-invoices/s, the jobs
waiting ~0.9-1.5 s for a free one; 4 made 4.02, waiting 46 ms. Each costs ~120 MiB."""
DEFAULT_PAGES_PER_BROWSER = 1
"""``reportfarm bench print``: 2 pages a browser printed 1.02x the PDFs/s of 1 at load 6 (0.9-1.5x
at load 11-24, where more runnable lanes take more of a shared CPU) for ~1.5x the memory, and
the CPU time per PDF was the same: 1 is as good per core and the best per GiB."""
DEFAULT_COLLECT_EVERY = 4
"""The same as ``reportfarm_renderer.browser.COLLECT_EVERY`` (settings import no Playwright)."""
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
class RendererSettings(common.FromEnv):
    """A field named like one of ``renderer_api.RendererEnvironment``'s (what the operator sets)
    is read through it; the others are declared here, each with its variable's name from the
    renderer's contract, ``renderer_api.Var``."""

    storage: common.StorageSettings
    """Queue, container and the account's sign-in (see reportfarm.settings.StorageSettings).

    Every variable's name is in the renderer's contract, ``reportfarm.renderer_api``."""
    templates: Path = Path("examples/templates")
    """REPORTFARM_TEMPLATES: the folder of Jinja2 templates (in Kubernetes, a mounted ConfigMap)."""
    pool_size: int = dataclasses.field(default_factory=default_pool_size)
    """REPORTFARM_POOL_SIZE: browsers in the pool at start (default: cores, bounded by memory)."""
    pages_per_browser: int = common.setting(
        Var.PAGES_PER_BROWSER, DEFAULT_PAGES_PER_BROWSER, minimum=1
    )
    """REPORTFARM_PAGES_PER_BROWSER: warm pages per browser, each printing one job at a time in a
    context of its own; the pool takes pool size x this many jobs at once (see
    DEFAULT_PAGES_PER_BROWSER for why 1)."""
    collect_every: int = common.setting(Var.COLLECT_EVERY, DEFAULT_COLLECT_EVERY, minimum=0)
    """REPORTFARM_COLLECT_EVERY: a warm page's garbage is collected after this many documents
    (0: left to Chromium, which lets each page's renderer grow to ~130 MiB); see
    ``reportfarm_renderer.browser.COLLECT_EVERY`` for what it costs and saves."""
    hide_screen: bool = common.setting(Var.HIDE_SCREEN, True)
    """REPORTFARM_HIDE_SCREEN: a warm page's document (JavaScript off) is hidden from the screen
    by a ``@media screen`` style after its doctype, so Chromium lays it out and paints it only for
    the print; ``reportfarm_renderer.printing.hidden_from_screen`` says what it saves."""
    port: int = renderer_api.PORT
    """REPORTFARM_PORT: HTTP port for /healthz, /readyz, /metrics and /pool."""
    visibility_timeout: int = 60
    """REPORTFARM_VISIBILITY_TIMEOUT: seconds a received job stays invisible unless extended."""
    max_dequeue_count: int = common.setting(Var.MAX_DEQUEUE_COUNT, 5, minimum=1)
    """REPORTFARM_MAX_DEQUEUE_COUNT: deliveries before a failing job goes to the poison queue."""
    max_render_timeouts: int = common.setting(Var.MAX_RENDER_TIMEOUTS, 2, minimum=1)
    """REPORTFARM_MAX_RENDER_TIMEOUTS: deliveries that hit the render timeout before poison."""
    borrow_timeout: float = common.setting(Var.BORROW_TIMEOUT, 30.0)
    """REPORTFARM_BORROW_TIMEOUT: seconds a job waits for a free browser."""
    render_timeout: float = common.setting(Var.RENDER_TIMEOUT, 180.0)
    """REPORTFARM_RENDER_TIMEOUT: seconds for the whole page work of one job (load, print and,
    for a PDF too big to hold, its streamed upload). Sized for a 500-page statement on a busy
    2-core node (~25 s at best here, ~100 s at a load average of 27: measured); an endless script
    holds its browser this long on each of its ``max_render_timeouts`` deliveries."""
    launch_timeout: float = common.setting(Var.LAUNCH_TIMEOUT, 30.0)
    """REPORTFARM_LAUNCH_TIMEOUT: seconds for one browser to start."""
    recycle_after_jobs: int = common.setting(Var.RECYCLE_AFTER_JOBS, 100, minimum=1)
    """REPORTFARM_RECYCLE_AFTER_JOBS: a browser is replaced after this many jobs."""
    recycle_rss_bytes: int = common.setting(Var.RECYCLE_RSS_MB, 700 * 2**20, unit=2**20)
    """REPORTFARM_RECYCLE_RSS_MB: a browser above this memory is replaced after its job."""
    drain_timeout: float = 25.0
    """REPORTFARM_DRAIN_TIMEOUT: on SIGTERM, seconds to finish running jobs (fit it to the pod's
    terminationGracePeriodSeconds); what is left is made visible again at once."""
    poll_max_s: float = common.setting(Var.POLL_MAX_S, 1.0, minimum=0.05)
    """REPORTFARM_POLL_MAX_S: longest pause between receives when the queue is empty."""
    max_data_bytes: int = common.setting(
        Var.MAX_DATA_MB, contract.MAX_DATA_BYTES, unit=2**20, only_lower=True
    )
    """REPORTFARM_MAX_DATA_MB: largest template data (inline or payload blob) accepted; the
    contract's limit (contract.MAX_DATA_BYTES) unless lowered, never above it."""
    max_pdf_bytes: int = common.setting(Var.MAX_PDF_MB, 100 * 2**20, unit=2**20)
    """REPORTFARM_MAX_PDF_MB: largest PDF stored; a larger one fails the job permanently."""
    chromium_path: str | None = common.setting(Var.CHROMIUM_PATH, None)
    """REPORTFARM_CHROMIUM_PATH: the Chromium binary.

    Default: Playwright's own browser if installed, else /usr/bin/chromium."""
    allowed_hosts: tuple[str, ...] = common.setting(Var.ALLOWED_HOSTS, ())
    """REPORTFARM_ALLOWED_HOSTS: comma-separated hosts documents may load from (public IPs only)."""
    signing_dir: Path = common.setting(Var.SIGNING_DIR, Path(renderer_api.SIGNING_DIR))
    """REPORTFARM_SIGNING_DIR: the farm's signing key, a ``kubernetes.io/tls`` Secret mounted as a
    folder (``tls.crt``, ``tls.key``, optionally ``ca.crt`` for the chain), read once at start.
    No ``tls.key`` there: jobs that ask for a signature fail; a key that cannot be used stops the
    renderer at start (see ``finishing.signing``)."""
    tsa_url: str | None = None
    """REPORTFARM_TSA_URL: a timestamp authority (RFC 3161, http or https) that makes every
    signature PAdES B-T; unset: B-B, timed by the renderer's clock (see ``finishing.signing``)."""
    en16931_xslt: Path | None = common.setting(Var.EN16931_XSLT, None)
    """REPORTFARM_EN16931_XSLT: EN 16931's business rules for CII, the CEN schematron compiled to
    XSLT, which every Factur-X invoice (profiles basic, en16931, extended) must pass; the image
    sets it (``scripts/en16931/install.sh`` installs it here). Unset: such invoices are refused
    (see ``finishing.en16931``)."""
    finishing_processes: int | None = common.setting(FINISHING_PROCESSES_VAR, None)
    """REPORTFARM_FINISHING_PROCESSES: processes that run the finishing stages (PDF/A, Factur-X,
    signatures: CPU-bound Python, off the event loop and across the pod's cores), one job at a
    time each; default: two per pod CPU (its cgroup quota, rounded up; see ``cpus`` and
    ``FINISHING_PER_CPU``). Spawned at
    start when the renderer has a signing key, else with the first job that asks for finishing.
    0: in a thread of the renderer's own process, as before (for comparison). Unset (None): the
    default, :meth:`finishers`."""
    admin_token: str | None = None
    """REPORTFARM_ADMIN_TOKEN: if set, PUT /pool needs ``Authorization: Bearer <token>``."""
    worker_id: str = dataclasses.field(default_factory=socket.gethostname)
    """REPORTFARM_WORKER_ID: names this worker in result records and logs (default: host name)."""

    def finishers(self) -> int:
        """The finishing processes to run: as set, else :data:`FINISHING_PER_CPU` per pod CPU
        (0: a thread)."""
        if self.finishing_processes is not None:
            return self.finishing_processes
        return FINISHING_PER_CPU * cpus.whole(cpus.pod_cpus())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, /, **overrides: object) -> Self:
        env = os.environ if env is None else env
        given = renderer_api.RendererEnvironment.parse(env)
        told: dict[str, object] = {
            field.name: getattr(given, field.name)
            for field in dataclasses.fields(given)
            if field.name in cls.__dataclass_fields__ and getattr(given, field.name) is not None
        }
        if given.templates:
            told["templates"] = Path(given.templates)
        return super().from_env(env, **(told | overrides))
