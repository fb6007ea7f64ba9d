"""The one network guard: where the farm may connect on a caller's behalf (no Playwright).

Callers hand us URLs (webhook callbacks; documents' resources in the renderer), so a URL is hostile
until its host resolves to addresses that are all public. Refused: loopback, private (10/8,
172.16/12, 192.168/16, fc00::/7 ...), shared 100.64/10, link-local (169.254/16, where the cloud
metadata service lives, and fe80::/10), unspecified, multicast, reserved, site-local, and IPv6
forms that embed a refused IPv4 address (IPv4-mapped, 6to4, Teredo, NAT64).

Exceptions are explicit: ``allow_private`` (tests and a laptop), or ``allowed_networks`` (CIDRs,
say an in-cluster receiver's range). :class:`CheckingResolver` makes aiohttp connect only to the
addresses the policy has just approved, so a DNS answer that changes between check and connect
(DNS rebinding) cannot reach a refused address.

One :class:`NetworkPolicy` serves both users: the webhook dispatcher (any host, RFC 3986 URLs)
and the renderer's document guard (``reportfarm_renderer.network``: only allowlisted hosts, GET
and HEAD, redirects checked hop by hop), so a spelling refused for one is refused for the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import aiohttp.abc

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_URI_RE = re.compile(
    r"^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*\Z"
)
_HOST_RE = re.compile(
    r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?)+\Z|^[0-9A-Fa-f:.]+\Z"
)


class Refused(Exception):
    """The policy refuses a URL; ``reason`` is one of: syntax, scheme, host, dns, address (the
    renderer's guard adds method, redirects, too_large, websocket)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def is_public_address(address: IPAddress) -> bool:
    """Whether this address is globally routable and nothing special (see the module docstring)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public_address(address.ipv4_mapped)
        embedded = [address.sixtofour, address.teredo[1] if address.teredo else None]
        if address in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if any(inner is not None and not is_public_address(inner) for inner in embedded):
            return False
        if address.is_site_local:
            return False
    special = (
        address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_unspecified
        or address.is_multicast
        or address.is_reserved
    )
    return address.is_global and not special


def parse_networks(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (or single addresses) from configuration; raises ValueError naming a bad one."""
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values if value)


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives for a host name."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """Where a URL the policy has parsed would connect."""

    scheme: str
    host: str
    port: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkPolicy:
    """The one network guard's rules, for documents' resources and webhook callbacks alike."""

    allowed_hosts: tuple[str, ...] | None = None
    """Host names a URL may name (exact, or ``*.example.com`` for subdomains; IPv6 with or
    without brackets). None: any host (webhooks), whose addresses are still checked; documents
    pass REPORTFARM_ALLOWED_HOSTS, by default empty, so they fetch nothing."""
    allow_private: bool = False
    """Allow every address (REPORTFARM_WEBHOOK_ALLOW_PRIVATE=1): tests and local use only."""
    allowed_networks: tuple[IPNetwork, ...] = ()
    """Addresses allowed even though they are not public (REPORTFARM_WEBHOOK_ALLOWED_NETWORKS)."""
    rfc3986_only: bool = True
    """Refuse URLs that are not RFC 3986 (spaces, non-ASCII, bad escapes): right for URLs people
    type (webhooks). Off for documents: Chromium hands over WHATWG URLs, which keep ``|``, ``^``
    and braces in queries (Google Fonts' ``family=A|B``)."""
    resolver: Resolver = dataclasses.field(default=resolve_host, compare=False, repr=False)
    """Host name to addresses: the system resolver; tests give a fake DNS."""

    @classmethod
    def for_documents(cls, allowed_hosts: Iterable[str] = (), **fields: Any) -> NetworkPolicy:
        """The policy for what rendered documents may fetch: only the listed hosts."""
        return cls(allowed_hosts=tuple(allowed_hosts), rfc3986_only=False, **fields)

    def __post_init__(self) -> None:
        if self.allowed_hosts is not None:
            hosts = {_normal_host(host) for host in self.allowed_hosts if host.strip()}
            object.__setattr__(self, "allowed_hosts", tuple(sorted(hosts)))

    def address_allowed(self, address: IPAddress) -> bool:
        if self.allow_private or is_public_address(address):
            return True
        return any(address in network for network in self.allowed_networks)

    def host_allowed(self, host: str) -> bool:
        if self.allowed_hosts is None:
            return True
        host = _normal_host(host)
        suffixes = tuple(allowed[1:] for allowed in self.allowed_hosts if allowed[:2] == "*.")
        return host in self.allowed_hosts or bool(suffixes and host.endswith(suffixes))

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """Resolve a host; return its addresses if every one is allowed, else raise Refused."""
        host = _normal_host(host)
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                addresses = await self.resolver(host, port)
            except OSError as error:
                raise Refused("dns", f"{host}: {error}") from None
        refused = [str(address) for address in addresses if not self.address_allowed(address)]
        if refused or not addresses:
            raise Refused("address", f"{host} resolves to {', '.join(refused) or 'nothing'}")
        return addresses

    def target(self, url: str) -> Target:
        """Parse ``url``; raise Refused unless it is an http(s) URL to an allowed host name."""
        if self.rfc3986_only and not _URI_RE.match(url):
            raise Refused("syntax", "not an RFC 3986 URL (spaces, non-ASCII, bad escapes?)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise Refused("scheme", parts.scheme or "none")
        host = _normal_host(parts.hostname or "")
        if not host or parts.username is not None or parts.password is not None:
            raise Refused("host", "a URL needs a host and no user:password")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise Refused("host", "bad port") from None
        if not _HOST_RE.match(host):
            raise Refused("host", "not a host name or IP address")
        if not self.host_allowed(host):
            raise Refused("host", host)
        return Target(scheme=parts.scheme, host=host, port=port)

    async def check_url(self, url: str) -> list[IPAddress]:
        """Raise Refused unless ``url`` is allowed (:meth:`target`) and its host's every address
        is. With ``allow_private`` every address is, so nothing is looked up (the connection's
        resolver still is the check: see :meth:`session`)."""
        target = self.target(url)
        if self.allow_private:
            return []
        return await self.addresses(target.host, target.port)

    def session(self, *, timeout_s: float) -> aiohttp.ClientSession:
        """An HTTP session that connects only to addresses this policy approves, sends no
        cookies back, ignores proxy variables (a proxy would connect where we did not check).
        IP-literal URLs skip any resolver: check each URL (:meth:`check_url`) before using it."""
        connector = aiohttp.TCPConnector(resolver=CheckingResolver(self), use_dns_cache=False)
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            trust_env=False,
        )


def _normal_host(host: str) -> str:
    """``[::1]``, ``Example.COM.`` and `` example.com`` as compared: ``::1``, ``example.com``."""
    return host.strip().strip("[]").lower().rstrip(".")


class CheckingResolver(aiohttp.abc.AbstractResolver):
    """aiohttp connects only to what this returns: the addresses the policy has just approved.

    A refusal propagates as :class:`Refused` (aiohttp wraps only OSError), so a DNS answer that
    changed since the check (rebinding) is reported as refused, not as a network failure."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        addresses = await self._policy.addresses(host, port)
        return [
            {
                "hostname": host,
                "host": str(address),
                "port": port,
                "family": socket.AF_INET if address.version == 4 else socket.AF_INET6,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in addresses
        ]

    async def close(self) -> None:
        return None
