"""Where the farm may connect on a caller's behalf, decided by resolved address (no Playwright).

Callers hand us URLs (webhook callbacks; documents' resources in the renderer), so a URL is hostile
until its host resolves to addresses that are all public. Refused: loopback, private (10/8,
172.16/12, 192.168/16, fc00::/7 ...), shared 100.64/10, link-local (169.254/16, where the cloud
metadata service lives, and fe80::/10), unspecified, multicast, reserved, site-local, and IPv6
forms that embed a refused IPv4 address (IPv4-mapped, 6to4, Teredo, NAT64).

Exceptions are explicit: ``allow_private`` (tests and a laptop), or ``allowed_networks`` (CIDRs,
say an in-cluster receiver's range). :class:`CheckingResolver` makes aiohttp connect only to the
addresses the policy has just approved, so a DNS answer that changes between check and connect
(DNS rebinding) cannot reach a refused address.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import re
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import aiohttp
import aiohttp.abc

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_URI_RE = re.compile(
    r"^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*\Z"
)
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+\Z|^[0-9A-Fa-f:.]+\Z")


class Refused(Exception):
    """The policy refuses a URL; ``reason`` is one of: scheme, host, dns, address."""

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkPolicy:
    allow_private: bool = False
    """Allow every address (REPORTFARM_WEBHOOK_ALLOW_PRIVATE=1): tests and local use only."""
    allowed_networks: tuple[IPNetwork, ...] = ()
    """Addresses allowed even though they are not public (REPORTFARM_WEBHOOK_ALLOWED_NETWORKS)."""

    def address_allowed(self, address: IPAddress) -> bool:
        if self.allow_private or is_public_address(address):
            return True
        return any(address in network for network in self.allowed_networks)

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """Resolve a host; return its addresses if every one is allowed, else raise Refused."""
        try:
            addresses = [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            try:
                addresses = await resolve_host(host, port)
            except OSError as error:
                raise Refused("dns", f"{host}: {error}") from None
        refused = [str(address) for address in addresses if not self.address_allowed(address)]
        if refused or not addresses:
            raise Refused("address", f"{host} resolves to {', '.join(refused) or 'nothing'}")
        return addresses

    async def check_url(self, url: str) -> list[IPAddress]:
        """Raise Refused unless ``url`` is an RFC 3986 http(s) URL to a host whose every address
        is allowed. With ``allow_private`` every address is, so nothing is looked up (the
        connection's resolver still is the check: see :meth:`session`)."""
        if not _URI_RE.match(url):
            raise Refused("syntax", "not an RFC 3986 URL (spaces, non-ASCII, bad escapes?)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise Refused("scheme", parts.scheme or "none")
        host = (parts.hostname or "").rstrip(".")
        if not host or parts.username is not None or parts.password is not None:
            raise Refused("host", "a URL needs a host and no user:password")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise Refused("host", "bad port") from None
        if not _HOST_RE.match(host):
            raise Refused("host", "not a host name or IP address")
        if self.allow_private:
            return []
        return await self.addresses(host, port)

    def session(self, *, timeout_s: float) -> aiohttp.ClientSession:
        """An HTTP session that connects only to addresses this policy approves, sends no
        cookies back, ignores proxy variables (a proxy would connect where we did not check)."""
        connector = aiohttp.TCPConnector(resolver=CheckingResolver(self), use_dns_cache=False)
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            trust_env=False,
        )


class CheckingResolver(aiohttp.abc.AbstractResolver):
    """aiohttp connects only to what this returns: the addresses the policy has just approved."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        try:
            addresses = await self._policy.addresses(host, port)
        except Refused as refused:
            raise OSError(str(refused)) from None
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
