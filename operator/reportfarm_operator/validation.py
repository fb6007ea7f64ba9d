"""What in a ReportPool's spec the operator cannot use, named by field.

The CRD rejects all of this at the API server (CEL rules with ``quantity()``); these checks are
the operator's side of the same rules, for objects stored before the rules existed or with an
older CRD installed. A fatal problem stops the pool's scaling (its size is kept) and is reported
as ``SpecValid=False`` and a Warning Event naming the field; a non-fatal one is adjusted (and
reported the same way, so it is never silent).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from reportfarm import policy
from reportfarm_operator import specs


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


def parse(spec: Mapping[str, Any]) -> specs.ReportPoolSpec:
    """The spec, checked and typed: what every handler reads first. SpecError names the field
    (also for a field the CRD requires that is missing, as in an object stored without it)."""
    pool_policy = checked_pool_spec(spec)
    try:
        return specs.read(spec, pool_policy)
    except KeyError as error:
        raise SpecError([Problem(f"spec.{error.args[0]}", "is missing")]) from error
    except (ValueError, TypeError) as error:
        field, _, message = str(error).partition(": ")
        if not message:
            field, message = "", str(error)
        raise SpecError([Problem(f"spec.{field}".rstrip("."), message)]) from error


def checked_pool_spec(spec: Mapping[str, Any]) -> policy.PoolSpec:
    """``specs.pool_spec`` after the checks; raises SpecError naming the field."""
    fatal = [problem for problem in problems(spec) if problem.fatal]
    if fatal:
        raise SpecError(fatal)
    try:
        return specs.pool_spec(spec)
    except (ValueError, KeyError, TypeError) as error:  # a rule the checks here do not know
        raise SpecError([Problem("spec", str(error))]) from error


def problems(spec: Mapping[str, Any]) -> list[Problem]:
    """Every problem found, fatal ones first."""
    found = [*_quantities(spec), *_bounds(spec)]
    if not any(problem.fatal for problem in found):
        found += _fit(spec)
    return sorted(found, key=lambda problem: not problem.fatal)


def _quantity(value: object, field: str, found: list[Problem]) -> float | None:
    try:
        amount = specs.cores(value)
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
        _quantity(specs.get(spec, "browser", resource), f"spec.browser.{resource}", found)
    given = specs.resources(spec)
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
        low, high = int(specs.get(spec, field, "min")), int(specs.get(spec, field, "max"))
        if low > high:
            found.append(
                Problem(
                    f"spec.{field}.min",
                    f"{low} is above {field}.max {high} ({default_max} when not set)",
                )
            )
    return found


def _fit(spec: Mapping[str, Any]) -> list[Problem]:
    """``browsersPerPod.min`` above what fits one pod: the policy lowers it; say so."""
    try:
        pool = specs.pool_spec(spec)
    except (ValueError, KeyError, TypeError) as error:
        return [Problem("spec", str(error))]
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
