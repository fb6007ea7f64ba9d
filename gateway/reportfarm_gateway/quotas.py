"""Per-tenant quotas: a token bucket (rate) and an in-flight cap (concurrency), both answering
429 with a Retry-After. Pure bookkeeping with the clock passed in, so tests need no sleeping.

They live in the gateway's memory, per replica: losing them on a restart forgets nothing that
matters, and N replicas admit N times the configured rate (size it for that).
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass
class TokenBucket:
    rate: float
    """Tokens added per second."""
    capacity: float
    tokens: float = dataclasses.field(init=False)
    updated: float | None = None

    def __post_init__(self) -> None:
        self.tokens = self.capacity

    def take(self, now: float, cost: float = 1.0) -> float:
        """Take ``cost`` tokens if there are; return 0, or the seconds until there would be."""
        if self.updated is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= cost:
            self.tokens -= cost
            return 0.0
        return (cost - self.tokens) / self.rate


@dataclasses.dataclass(frozen=True)
class Refusal:
    reason: str
    """``rate`` or ``in_flight``."""
    retry_after_s: int


class TenantQuotas:
    def __init__(self, *, rate_per_s: float, burst: int, in_flight: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.max_in_flight = in_flight
        self._buckets: dict[str, TokenBucket] = {}
        self._in_flight: dict[str, int] = {}

    def admit(self, tenant: str, now: float) -> Refusal | None:
        """Admit one request (call :meth:`release` when it ends), or say why not."""
        if self._in_flight.get(tenant, 0) >= self.max_in_flight:
            return Refusal("in_flight", 1)
        bucket = self._buckets.setdefault(tenant, TokenBucket(self.rate_per_s, self.burst))
        wait = bucket.take(now)
        if wait:
            return Refusal("rate", max(1, math.ceil(wait)))
        self._in_flight[tenant] = self._in_flight.get(tenant, 0) + 1
        return None

    def release(self, tenant: str) -> None:
        left = self._in_flight.get(tenant, 0) - 1
        if left > 0:
            self._in_flight[tenant] = left
        else:
            self._in_flight.pop(tenant, None)

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)
