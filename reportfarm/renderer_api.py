"""The renderer's control surface, as one contract (``contract.py`` is the job's; this is the
renderer's): what the operator sets and the renderer reads, where the renderer listens, how its
pool is resized, and the metrics the scaling loop reads.

- The environment: :class:`RendererEnvironment`, which the operator builds (a pod's ``env``) and
  the renderer parses (``RendererSettings.from_env``). Every variable the renderer reads is named
  here (:class:`Var`) or, for the storage account and the log format that all services share, in
  ``reportfarm.settings`` and ``reportfarm.logs``.
- HTTP: :data:`PORT`; ``GET`` :data:`HEALTHZ_PATH`, :data:`READYZ_PATH`, :data:`METRICS_PATH`;
  ``PUT`` :data:`POOL_PATH` with :func:`pool_body` (read back by :func:`parse_pool_body`);
  ``POST`` :data:`WAKE_PATH` and :data:`HANDOFF_PATH` (:func:`handoff_body`, read back by
  :func:`parse_handoff`).
- Metrics the operator reads: :data:`POOL_SIZE_METRIC`, :data:`POOL_BUSY_METRIC`,
  :data:`OLDEST_JOB_METRIC` and the :data:`RENDER_STAGE` series of :data:`STAGE_SECONDS_METRIC`
  (and :data:`JOBS_METRIC`, which ``reportfarm status --watch`` reads).

Both sides import this module; neither spells these names itself.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping

from reportfarm import logs
from reportfarm import settings as common

PORT = 8080
"""The renderer's HTTP port (for /healthz, /readyz, /metrics and /pool) unless ``Var.PORT``."""
HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
METRICS_PATH = "/metrics"
POOL_PATH = "/pool"
WAKE_PATH = "/wake"
"""``POST``: a job may be waiting on the queue: an idle renderer ends its idle pause and
receives now (a hint: the queue stays the truth; see ``reportfarm_gateway.hinting``)."""
HANDOFF_PATH = "/handoff"
"""``POST`` :func:`handoff_body`, signed (``carrying.sign_handoff``, the signature in
``carrying.HANDOFF_SIGNATURE_HEADER``): a job handed to this renderer, its message sent
invisible, with the pop receipt the put answered. A renderer with room for a job runs it as if
it had received it and answers 200; else 409, and the sender makes the message visible at once
(see ``reportfarm_gateway.hinting``)."""
MAX_HANDOFF_BYTES = 128 * 1024
"""A hand-off's body at most: a queue message is at most 64 KiB."""
MAX_POOL_SIZE = 64
"""The largest size ``PUT /pool`` accepts."""
SIGNING_DIR = "/var/run/secrets/reportfarm/signing"
"""Where the renderer looks for the farm's signing key unless ``Var.SIGNING_DIR`` says: a
``kubernetes.io/tls`` Secret mounted as a folder (``tls.crt``, ``tls.key``, optionally ``ca.crt``).
The operator mounts a ReportPool's ``signingSecretRef`` here; no key there, no signing."""

POOL_SIZE_METRIC = "reportfarm_pool_size"
"""Gauge: browsers the pool is asked to hold."""
POOL_BUSY_METRIC = "reportfarm_pool_busy"
"""Gauge: browsers rendering a job now."""
STAGE_SECONDS_METRIC = "reportfarm_stage_duration_seconds"
"""Histogram of each job stage's duration, label ``stage``."""
RENDER_STAGE = "pdf_generation"
"""The stage whose mean duration is the render time the policy sizes from."""
STAGE_CPU_METRIC = "reportfarm_stage_cpu_seconds"
"""Counter of the finishing stages' CPU seconds (``finish_<stage>``, in the finishing processes),
label ``stage``; the operator adds it to a job's CPU (``reportfarm.capacity``)."""
FINISHING_BUSY_METRIC = "reportfarm_finishing_busy"
"""Gauge: finishing processes running a job's stages now. A job there has left its browser but
still takes the pod's CPU: the operator counts it as a busy browser (at most the pool's size)."""
SIGNATURE_CPU_METRIC = "reportfarm_finishing_signature_cpu_seconds"
"""Gauge: CPU seconds a signature of a blank page took in this renderer's finishing processes at
their start (median; 0: unknown, or the farm does not sign). While its jobs are in finishing and
none has ended, the operator takes it for a job's finishing CPU (``reportfarm.capacity``)."""
OLDEST_JOB_METRIC = "reportfarm_job_oldest_running_seconds"
"""Gauge: seconds the longest-running job of this renderer has run (0: none). The operator spares
a pod whose job would outlive its drain when it picks scale-down victims."""
JOBS_METRIC = "reportfarm_jobs"
"""Counter of jobs ended, label ``outcome``; ``reportfarm status --watch`` reads it."""


class Var:
    """The renderer's own environment variables."""

    TEMPLATES = "REPORTFARM_TEMPLATES"
    POOL_SIZE = "REPORTFARM_POOL_SIZE"
    PAGES_PER_BROWSER = "REPORTFARM_PAGES_PER_BROWSER"
    COLLECT_EVERY = "REPORTFARM_COLLECT_EVERY"
    HIDE_SCREEN = "REPORTFARM_HIDE_SCREEN"
    PORT = "REPORTFARM_PORT"
    VISIBILITY_TIMEOUT = "REPORTFARM_VISIBILITY_TIMEOUT"
    MAX_DEQUEUE_COUNT = "REPORTFARM_MAX_DEQUEUE_COUNT"
    MAX_RENDER_TIMEOUTS = "REPORTFARM_MAX_RENDER_TIMEOUTS"
    BORROW_TIMEOUT = "REPORTFARM_BORROW_TIMEOUT"
    RENDER_TIMEOUT = "REPORTFARM_RENDER_TIMEOUT"
    LAUNCH_TIMEOUT = "REPORTFARM_LAUNCH_TIMEOUT"
    RECYCLE_AFTER_JOBS = "REPORTFARM_RECYCLE_AFTER_JOBS"
    RECYCLE_RSS_MB = "REPORTFARM_RECYCLE_RSS_MB"
    DRAIN_TIMEOUT = "REPORTFARM_DRAIN_TIMEOUT"
    POLL_MAX_S = "REPORTFARM_POLL_MAX_S"
    MAX_DATA_MB = "REPORTFARM_MAX_DATA_MB"
    MAX_PDF_MB = "REPORTFARM_MAX_PDF_MB"
    CHROMIUM_PATH = "REPORTFARM_CHROMIUM_PATH"
    ALLOWED_HOSTS = "REPORTFARM_ALLOWED_HOSTS"
    ADMIN_TOKEN = "REPORTFARM_ADMIN_TOKEN"
    WORKER_ID = "REPORTFARM_WORKER_ID"
    SIGNING_DIR = "REPORTFARM_SIGNING_DIR"
    EN16931_XSLT = "REPORTFARM_EN16931_XSLT"
    TSA_URL = "REPORTFARM_TSA_URL"
    HOME = "HOME"
    XDG_CACHE_HOME = "XDG_CACHE_HOME"


@dataclasses.dataclass(frozen=True)
class FromSecret:
    """A value the pod reads from a Secret's key (never written into the manifest)."""

    name: str
    key: str


@dataclasses.dataclass(frozen=True)
class FromPodField:
    """A value the pod reads from its own object (``metadata.name``)."""

    path: str


Value = str | FromSecret | FromPodField
"""A variable's value in a manifest; a running renderer sees the plain string."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RendererEnvironment:
    """What the operator tells a renderer, in the order a pod's ``env`` lists it; None: unset
    (the renderer's default). Field order is the manifest's: changing it rolls every pod."""

    connection_string: Value | None = common.setting(
        common.CONNECTION_STRING_VAR, None, secret=True
    )
    """The storage account's connection string (a Secret); wins over ``account_url``."""
    account_url: str | None = common.setting(common.ACCOUNT_URL_VAR, None)
    """The queue endpoint, signed in with DefaultAzureCredential (workload identity)."""
    blob_url: str | None = common.setting(common.BLOB_URL_VAR, None)
    """The blob endpoint with ``account_url`` (default: derived from it)."""
    queue: str | None = common.setting(common.QUEUE_VAR, None)
    """The job queue (its lanes and poison queues are named after it)."""
    container: str | None = common.setting(common.CONTAINER_VAR, None)
    """The blob container for PDFs, result records and payloads."""
    pool_size: int | None = common.setting(Var.POOL_SIZE, None)
    """Browsers at start; the operator resizes running pods through ``PUT /pool``."""
    templates: str | None = common.setting(Var.TEMPLATES, None)
    """The folder of templates (the mounted ConfigMap)."""
    visibility_timeout: int | None = common.setting(Var.VISIBILITY_TIMEOUT, None, minimum=2)
    """Seconds a received job stays invisible unless extended."""
    drain_timeout: float | None = common.setting(Var.DRAIN_TIMEOUT, None)
    """Seconds to finish running jobs after SIGTERM (inside the grace period)."""
    port: int | None = common.setting(Var.PORT, None)
    """The HTTP port (:data:`PORT` unless set)."""
    log_format: str | None = common.setting(logs.FORMAT_VAR, None)
    """``json`` in a container."""
    home: str | None = common.setting(Var.HOME, None)
    """HOME: Chromium's profile (the root filesystem is read-only in a pod)."""
    xdg_cache_home: str | None = common.setting(Var.XDG_CACHE_HOME, None)
    """XDG_CACHE_HOME: fontconfig's cache."""
    worker_id: Value | None = common.setting(Var.WORKER_ID, None)
    """Names the worker in result records and logs (the pod's name)."""
    admin_token: Value | None = common.setting(Var.ADMIN_TOKEN, None, secret=True)
    """The bearer token ``PUT /pool`` requires (a Secret)."""
    tsa_url: str | None = common.setting(Var.TSA_URL, None)
    """The timestamp authority of the pool's signatures (PAdES B-T)."""
    hint_key: Value | None = common.setting(common.HINT_KEY_VAR, None, secret=True)
    """The key of hand-offs and carried answers, shared with the gateway (a Secret); unset: derived
    from the connection string's account key or SAS (none with Entra ID)."""

    def variables(self) -> Iterator[tuple[str, Value]]:
        """(name, value) of every variable set, in field order."""
        for field in dataclasses.fields(self):
            value, var = getattr(self, field.name), common.variable(field)
            if value is not None and var is not None:
                yield var.name, value if isinstance(value, Value) else str(value)

    @classmethod
    def parse(cls, env: Mapping[str, str]) -> RendererEnvironment:
        """The variables as a running renderer sees them (plain strings), typed and checked;
        SettingsError names the variable that cannot be used."""
        return common.from_env(cls, env)


@dataclasses.dataclass(frozen=True)
class Handoff:
    """A message handed to a renderer: its lane's queue, id, pop receipt and text, how long it
    stays invisible from when it was sent, and when it was sent (ISO 8601, UTC)."""

    queue: str
    message_id: str
    pop_receipt: str
    content: str
    held_s: int
    inserted_on: str


def handoff_body(handoff: Handoff) -> bytes:
    return json.dumps(dataclasses.asdict(handoff), separators=(",", ":")).encode("utf-8")


def parse_handoff(body: bytes) -> Handoff | None:
    """The hand-off in ``body``, or None when it is not one."""
    if len(body) > MAX_HANDOFF_BYTES:
        return None
    try:
        fields = json.loads(body)
        handoff = Handoff(**fields)
    except (ValueError, TypeError):
        return None
    texts = (handoff.queue, handoff.message_id, handoff.pop_receipt, handoff.content)
    if not all(isinstance(text, str) and text for text in texts):
        return None
    if not isinstance(handoff.inserted_on, str):
        return None
    if type(handoff.held_s) is not int or handoff.held_s < 1:
        return None
    return handoff


def pool_body(size: int) -> dict[str, int]:
    """The JSON body of ``PUT /pool``."""
    return {"size": size}


def parse_pool_body(body: object) -> int:
    """The size in a ``PUT /pool`` body; ValueError says what is wrong."""
    if not isinstance(body, dict) or "size" not in body:
        raise ValueError('body must be {"size": N}')
    size = body["size"]
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_POOL_SIZE:
        raise ValueError(f"size must be a whole number from 0 to {MAX_POOL_SIZE}")
    return size
