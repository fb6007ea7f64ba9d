"""A ReportPool's spec, checked and typed in one pass: :func:`parse` is what every handler reads
first, and everything after it (children, queue reads, scaling) takes the :class:`ReportPoolSpec`.

What the operator cannot use is named by field. The CRD rejects all of it at the API server (CEL
rules with ``quantity()``); the checks here are the operator's side of the same rules, for objects
stored before the rules existed or with an older CRD installed. A fatal problem stops the pool's
scaling (its size is kept) and is reported as ``SpecValid=False`` and a Warning Event naming the
field; a non-fatal one is adjusted and carried on the typed spec (``adjustments``), reported the
same way, so it is never silent.

The defaults here mirror the CRD's (``crds/reportpools.reportfarm.io.yaml``; a test compares
them), so an object stored before a default existed reads the same as a new one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubernetes.utils import quantity

from reportfarm import capacity, policy

GROUP = "reportfarm.io"
VERSION = "v1alpha1"
PLURAL = "reportpools"
KIND = "ReportPool"

TEMPLATES_PATH = "/etc/reportfarm/templates"
"""Where the templates ConfigMap is mounted (the renderer's templates folder)."""
POOL_LABEL = "reportfarm.io/pool"

DEFAULTS: dict[str, Any] = {
    "outputContainer": "reports",
    "imagePullPolicy": "IfNotPresent",
    "resources": {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    },
    # "resources" is taken whole or not at all: see resources().
    "replicas": {"min": 0, "max": 10},
    "browsersPerPod": {"min": 1, "max": 4},
    "browser": {"cpu": "500m", "memory": "512Mi"},
    "target": {"queueWaitSeconds": 30, "interactiveQueueWaitSeconds": 5, "jobsPerBrowser": 2},
    "scaleDown": {
        "stabilizationSeconds": 60,
        "recurringBacklogHoldSeconds": 0,
        "recurringBacklogWithinSeconds": 300,
    },
    "scaleToZero": {"idleSeconds": 120},
    "terminationGracePeriodSeconds": 60,
    "visibilityTimeoutSeconds": 60,
}
"""The CRD's defaults, as a spec fragment."""
SECRET_KEY_DEFAULTS = {
    "connectionSecretRef": "connection-string",
    "adminTokenSecretRef": "token",
    "hintKeySecretRef": "hint-key",
}


@dataclasses.dataclass(frozen=True)
class Problem:
    """Something wrong in a spec, named by its field (``spec.browser.cpu``)."""

    field: str
    message: str
    fatal: bool = True
    """The operator cannot use the spec; otherwise it adjusts the value and says so."""

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SpecError(ValueError):
    """A spec the operator cannot use."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(map(str, problems)))
        self.problems = problems


@dataclasses.dataclass(frozen=True)
class Names:
    """The children of one ReportPool, named after it."""

    pool: str

    @property
    def deployment(self) -> str:
        return f"{self.pool}-renderer"

    @property
    def service(self) -> str:
        return f"{self.pool}-metrics"

    @property
    def disruption_budget(self) -> str:
        return f"{self.pool}-renderer"

    @property
    def templates(self) -> str:
        return f"{self.pool}-templates"


def selector_labels(pool: str) -> dict[str, str]:
    """The renderer pods' selector: stable for the Deployment's life (a selector is immutable)."""
    return {"app.kubernetes.io/component": "renderer", POOL_LABEL: pool}


def common_labels(pool: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "reportfarm",
        "app.kubernetes.io/instance": pool,
        "app.kubernetes.io/managed-by": "reportfarm-operator",
        POOL_LABEL: pool,
    }


def get(spec: Mapping[str, Any], *path: str) -> Any:
    """A spec value, or the CRD's default when the object predates it."""
    value: Any = spec
    default: Any = DEFAULTS
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
        default = default.get(key) if isinstance(default, Mapping) else None
    return default if value is None else value


def secret_ref(spec: Mapping[str, Any], field: str) -> tuple[str, str] | None:
    """(Secret name, key) of ``queue.connectionSecretRef``, ``adminTokenSecretRef`` or
    ``hintKeySecretRef``."""
    holder = spec.get("queue", {}) if field == "connectionSecretRef" else spec
    ref = holder.get(field)
    if not ref:
        return None
    return str(ref["name"]), str(ref.get("key") or SECRET_KEY_DEFAULTS[field])


def cores(value: object) -> float:
    return float(quantity.parse_quantity(value))


def mebibytes(value: object) -> float:
    return float(quantity.parse_quantity(value)) / 2**20


def resources(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The container's resources as given; the default only when the field is absent (as CRD)."""
    given = spec.get("resources")
    return dict(DEFAULTS["resources"] if given is None else given)


def _pod_capacity(spec: Mapping[str, Any], resource: str) -> object | None:
    """The pod's limit, else its request; None when neither bounds it."""
    given = resources(spec)
    return given.get("limits", {}).get(resource) or given.get("requests", {}).get(resource)


def pool_spec(spec: Mapping[str, Any]) -> policy.PoolSpec:
    """What the policy needs from a ReportPool's spec. Raises ValueError on nonsense."""
    jobs_per_browser = get(spec, "target", "jobsPerBrowser")
    interactive_wait = get(spec, "target", "interactiveQueueWaitSeconds")
    most = int(get(spec, "browsersPerPod", "max"))
    browser_cpu = cores(get(spec, "browser", "cpu"))
    browser_memory = mebibytes(get(spec, "browser", "memory"))
    pod_cpu = _pod_capacity(spec, "cpu")
    pod_memory = _pod_capacity(spec, "memory")
    return policy.PoolSpec(
        min_replicas=int(get(spec, "replicas", "min")),
        max_replicas=int(get(spec, "replicas", "max")),
        min_browsers_per_pod=int(get(spec, "browsersPerPod", "min")),
        max_browsers_per_pod=most,
        pod_cpu=most * browser_cpu if pod_cpu is None else cores(pod_cpu),
        pod_memory_mib=most * browser_memory if pod_memory is None else mebibytes(pod_memory),
        browser_cpu=browser_cpu,
        browser_memory_mib=browser_memory,
        target_wait_s=float(get(spec, "target", "queueWaitSeconds")),
        interactive_target_wait_s=None if interactive_wait is None else float(interactive_wait),
        jobs_per_browser=float(jobs_per_browser) or None,  # 0: no floor
        scale_down_stabilization_s=float(get(spec, "scaleDown", "stabilizationSeconds")),
        recurring_backlog_hold_s=float(get(spec, "scaleDown", "recurringBacklogHoldSeconds")),
        recurring_backlog_within_s=float(get(spec, "scaleDown", "recurringBacklogWithinSeconds")),
        scale_to_zero_idle_s=float(get(spec, "scaleToZero", "idleSeconds")),
        expected_finish_cpu_s=expected_finish_cpu_s(spec),
    )


def expected_finish_cpu_s(spec: Mapping[str, Any]) -> float | None:
    """A job's finishing CPU before the renderers report one: ``finishing.expectedCpuSeconds``;
    unset, ``capacity.SIGNING_FINISH_CPU_S`` for a pool with a signing key, else None."""
    given = (spec.get("finishing") or {}).get("expectedCpuSeconds")
    if given is not None:
        return float(given)
    return capacity.SIGNING_FINISH_CPU_S if spec.get("signingSecretRef") else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class QueueSpec:
    """Where a pool's jobs wait and how to sign in to that account."""

    name: str
    """The job queue (its lanes and poison queues are named after it)."""
    connection_secret: tuple[str, str] | None
    """(Secret, key) of the connection string; None: ``account_url`` with Entra ID."""
    account_url: str | None
    """The queue endpoint, signed in with DefaultAzureCredential (workload identity)."""
    blob_url: str | None
    """The blob endpoint with ``account_url``; None: derived from it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportPoolSpec:
    """A ReportPool's spec, read once, defaults applied, in the units the operator uses."""

    image: str
    image_pull_policy: str
    queue: QueueSpec
    output_container: str
    resources: dict[str, Any]
    """The renderer container's resources, as given (or the default when absent)."""
    policy: policy.PoolSpec
    termination_grace_s: int
    visibility_timeout_s: int
    service_account: str | None
    admin_token_secret: tuple[str, str] | None
    """(Secret, key) of the token ``PUT /pool`` requires; None: no token."""
    hint_key_secret: tuple[str, str] | None = None
    """(Secret, key) of the renderers' and the gateway's hint key (``REPORTFARM_HINT_KEY``); None:
    derived from the connection string."""
    signing_secret: str | None
    """The ``kubernetes.io/tls`` Secret with the farm's signing key, mounted into every renderer
    at ``renderer_api.SIGNING_DIR``; None: the renderers do not sign."""
    signing_timestamp_url: str | None = None
    """The RFC 3161 timestamp authority signatures are timestamped by (PAdES B-T); None: B-B."""
    templates_config_map: str | None
    """The user's ConfigMap of templates; None: the pool's own (inline templates)."""
    inline_templates: dict[str, str]
    """Templates given in the spec (an owned ConfigMap); empty with a ConfigMap name."""
    adjustments: tuple[Problem, ...] = ()
    """What the operator adjusted to use the spec (non-fatal problems), said in its status."""

    @property
    def start_pool_size(self) -> int:
        """The pool size new pods start with: the most browsers that fit one.

        Pods are added when the running ones are full, so a new pod starts full; the scaling loop
        corrects it at its next tick if less is needed. A pool whose jobs sign starts with the
        browsers its expected finishing CPU leaves room for (``capacity.expected``). It depends on
        the spec alone, so scaling never touches the pod template (which would restart every
        pod)."""
        return capacity.expected(self.policy).browsers_that_fit

    @property
    def drain_timeout_s(self) -> int:
        """The renderer's drain timeout: most of the grace period, leaving time to release and
        exit."""
        grace = self.termination_grace_s
        return max(1, min(grace - 5, int(grace * 0.8)))


def parse(spec: Mapping[str, Any]) -> ReportPoolSpec:
    """The spec, checked and typed, in one pass. SpecError names every field the operator cannot
    use (also a field the CRD requires that is missing, as in an object stored without it)."""
    fatal = [*_quantities(spec), *_bounds(spec)]
    if fatal:
        raise SpecError(fatal)
    try:
        pool_policy = pool_spec(spec)
    except (ValueError, KeyError, TypeError) as error:  # a rule the checks here do not know
        raise SpecError([Problem("spec", str(error))]) from error
    try:
        return _read(spec, pool_policy, adjustments=tuple(_fit(pool_policy)))
    except KeyError as error:
        raise SpecError([Problem(f"spec.{error.args[0]}", "is missing")]) from error
    except (ValueError, TypeError) as error:
        field, _, message = str(error).partition(": ")
        if not message:
            field, message = "", str(error)
        raise SpecError([Problem(f"spec.{field}".rstrip("."), message)]) from error


def _read(
    spec: Mapping[str, Any], pool_policy: policy.PoolSpec, *, adjustments: tuple[Problem, ...]
) -> ReportPoolSpec:
    """The typed spec after the checks. KeyError names a missing field (``queue.name``);
    ValueError says what else is wrong."""
    queue = spec.get("queue") or {}
    connection = secret_ref(spec, "connectionSecretRef")
    if (connection is None) == (not queue.get("accountUrl")):
        raise ValueError("queue: set exactly one of queue.connectionSecretRef or queue.accountUrl")
    templates = spec.get("templates") or {}
    return ReportPoolSpec(
        image=_required(spec, "image", "image"),
        image_pull_policy=str(get(spec, "imagePullPolicy")),
        queue=QueueSpec(
            name=_required(queue, "name", "queue.name"),
            connection_secret=connection,
            account_url=_optional(queue, "accountUrl"),
            blob_url=_optional(queue, "blobUrl"),
        ),
        output_container=str(get(spec, "outputContainer")),
        resources=resources(spec),
        policy=pool_policy,
        termination_grace_s=int(get(spec, "terminationGracePeriodSeconds")),
        visibility_timeout_s=int(get(spec, "visibilityTimeoutSeconds")),
        service_account=_optional(spec, "serviceAccountName"),
        admin_token_secret=secret_ref(spec, "adminTokenSecretRef"),
        hint_key_secret=secret_ref(spec, "hintKeySecretRef"),
        signing_secret=_optional(spec.get("signingSecretRef") or {}, "name"),
        signing_timestamp_url=_optional(spec, "signingTimestampUrl"),
        templates_config_map=_optional(templates, "configMapName"),
        inline_templates={str(k): str(v) for k, v in (templates.get("inline") or {}).items()},
        adjustments=adjustments,
    )


def _required(holder: Mapping[str, Any], key: str, field: str) -> str:
    value = holder.get(key)
    if value is None or value == "":
        raise KeyError(field)
    return str(value)


def _optional(holder: Mapping[str, Any], key: str) -> str | None:
    value = holder.get(key)
    return None if value is None or value == "" else str(value)


# --- the checks ------------------------------------------------------------------------------


def _quantity(value: object, field: str, found: list[Problem]) -> float | None:
    try:
        amount = cores(value)
    except (ValueError, TypeError, ArithmeticError):
        found.append(Problem(field, f"{value!r} is not a quantity"))
        return None
    if amount <= 0:
        found.append(Problem(field, f"must be a positive quantity, got {value!r}"))
        return None
    return amount


def _quantities(spec: Mapping[str, Any]) -> list[Problem]:
    found: list[Problem] = []
    for resource in ("cpu", "memory"):
        _quantity(get(spec, "browser", resource), f"spec.browser.{resource}", found)
    given = resources(spec)
    for resource in ("cpu", "memory"):
        amounts = {}
        for kind in ("requests", "limits"):
            value = (given.get(kind) or {}).get(resource)
            if value is not None:
                amounts[kind] = _quantity(value, f"spec.resources.{kind}.{resource}", found)
        if not amounts:
            found.append(
                Problem(
                    f"spec.resources.limits.{resource}",
                    f"set {resource} in resources.limits or resources.requests: it bounds the "
                    "browsers that fit one pod",
                )
            )
        request, limit = amounts.get("requests"), amounts.get("limits")
        if request is not None and limit is not None and request > limit:
            found.append(
                Problem(
                    f"spec.resources.requests.{resource}",
                    f"request {given['requests'][resource]!r} is above the limit "
                    f"{given['limits'][resource]!r}",
                )
            )
    return found


def _bounds(spec: Mapping[str, Any]) -> list[Problem]:
    found = []
    for field, default_max in (("replicas", 10), ("browsersPerPod", 4)):
        low, high = int(get(spec, field, "min")), int(get(spec, field, "max"))
        if low > high:
            found.append(
                Problem(
                    f"spec.{field}.min",
                    f"{low} is above {field}.max {high} ({default_max} when not set)",
                )
            )
    return found


def _fit(pool: policy.PoolSpec) -> list[Problem]:
    """``browsersPerPod.min`` above what fits one pod: the policy lowers it; say so."""
    if pool.min_browsers_per_pod <= pool.browsers_that_fit:
        return []
    return [
        Problem(
            "spec.browsersPerPod.min",
            f"{pool.min_browsers_per_pod} browsers do not fit one pod (resources / browser "
            f"allow {pool.browsers_that_fit}): pods run at most {pool.browsers_that_fit}",
            fatal=False,
        )
    ]
