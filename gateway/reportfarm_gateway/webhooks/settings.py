"""The webhook dispatcher's settings, from ``REPORTFARM_WEBHOOK_*`` environment variables."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Self

from reportfarm import netpolicy
from reportfarm import settings as common


def env_pairs(env: Mapping[str, str], name: str) -> dict[str, str]:
    """``key=value,key2=value2`` (REPORTFARM_TOKENS, REPORTFARM_WEBHOOK_SECRETS) as a dict."""
    pairs = {}
    for number, item in enumerate(common.env_list(env, name), 1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():  # never print it: it may be a secret
            raise common.SettingsError(f"{name}: item {number} is not key=value")
        pairs[key.strip()] = value.strip()
    return pairs


@dataclasses.dataclass(frozen=True, kw_only=True)
class WebhookSettings(common.FromEnv):
    secrets: Mapping[str, str] = common.setting("REPORTFARM_WEBHOOK_SECRETS", {}, parse=env_pairs)
    """REPORTFARM_WEBHOOK_SECRETS: ``tenant=secret,tenant2=secret2``, each tenant's signing key."""
    default_secret: str | None = common.setting("REPORTFARM_WEBHOOK_SECRET", None, secret=True)
    """REPORTFARM_WEBHOOK_SECRET: the key of tenants not listed above (and of jobs without a
    tenant). A tenant with neither cannot ask for webhooks: the gateway refuses its callback."""
    policy: netpolicy.NetworkPolicy = dataclasses.field(default_factory=netpolicy.NetworkPolicy)
    """REPORTFARM_WEBHOOK_ALLOW_PRIVATE=1 (tests, a laptop) and REPORTFARM_WEBHOOK_ALLOWED_NETWORKS
    (CIDRs): which non-public addresses callbacks may reach; by default none."""
    max_attempts: int = common.setting("REPORTFARM_WEBHOOK_MAX_ATTEMPTS", 10, minimum=1)
    """REPORTFARM_WEBHOOK_MAX_ATTEMPTS: POSTs tried before an event goes to the poison queue."""
    backoff_s: float = common.setting("REPORTFARM_WEBHOOK_BACKOFF_S", 1.0)
    """REPORTFARM_WEBHOOK_BACKOFF_S: the first retry's delay; doubles each attempt, with jitter."""
    max_backoff_s: float = common.setting("REPORTFARM_WEBHOOK_MAX_BACKOFF_S", 600.0)
    """REPORTFARM_WEBHOOK_MAX_BACKOFF_S: the longest delay between two attempts."""
    timeout_s: float = common.setting("REPORTFARM_WEBHOOK_TIMEOUT_S", 10.0, minimum=1.0)
    """REPORTFARM_WEBHOOK_TIMEOUT_S: one POST's whole time, connect to last byte."""
    concurrency: int = common.setting("REPORTFARM_WEBHOOK_CONCURRENCY", 16, minimum=1)
    """REPORTFARM_WEBHOOK_CONCURRENCY: events handled at once by one dispatcher."""
    per_tenant: int = common.setting("REPORTFARM_WEBHOOK_PER_TENANT", 4, minimum=1)
    """REPORTFARM_WEBHOOK_PER_TENANT: POSTs to one tenant's receivers at once, per dispatcher.
    A tenant's further events wait their turn on the queue (back in 1 s, not counted as an
    attempt), so a receiver that never answers delays only its own tenant's webhooks."""
    poll_max_s: float = common.setting("REPORTFARM_WEBHOOK_POLL_MAX_S", 1.0, minimum=0.05)
    """REPORTFARM_WEBHOOK_POLL_MAX_S: longest pause between receives when no event waits."""
    batch_check_delay_s: int = 1
    """Seconds between an item's event and the check of its batch (checks are coalesced)."""

    @property
    def visibility_s(self) -> int:
        """How long a received event stays invisible: longer than one POST can take."""
        return int(self.timeout_s) + 20

    def secret_for(self, tenant: str | None) -> str | None:
        return self.secrets.get(tenant or "") or self.default_secret

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, /, **overrides: object) -> Self:
        """The declared settings, and the network policy from its two variables."""
        env = os.environ if env is None else env
        networks = "REPORTFARM_WEBHOOK_ALLOWED_NETWORKS"
        try:
            allowed = netpolicy.parse_networks(common.env_list(env, networks))
        except ValueError as error:
            raise common.SettingsError(f"{networks}: {error}") from None
        policy = netpolicy.NetworkPolicy(
            allow_private=bool(common.env_flag(env, "REPORTFARM_WEBHOOK_ALLOW_PRIVATE")),
            allowed_networks=allowed,
        )
        return super().from_env(env, **({"policy": policy} | overrides))
