"""The network guard: what a rendered document may fetch, decided by resolved address.

Rendered documents come from callers' data, so every request they make is hostile until proven
otherwise. Two layers:

1. **Interception** (:meth:`NetworkGuard.install`, on every browser context): ``data:``, ``blob:``
   and ``about:`` pass; ``http(s)`` passes only for GET/HEAD to a host on the allowlist (exact
   names, or ``*.example.com`` for subdomains) whose every resolved address is public: the
   core's one network policy (:class:`reportfarm.netpolicy.NetworkPolicy`, the same that guards
   webhook callbacks) decides host and address; this module adds what only documents need
   (methods, redirects, response size, WebSockets, Chromium's own network). Every other scheme
   (``file:``, ``ftp:``, ``chrome:``...) and every WebSocket is blocked. Each block is logged
   with its URL and reported to :class:`GuardEvents`.

   Allowed requests are fetched here, in Python, never by Chromium, then handed to the page with
   ``route.fulfill``. Why not ``route.continue_()``/``route.fetch()``: Chromium (or the driver)
   would resolve the host name again after our check, so a DNS answer that changes in between
   (DNS rebinding) would reach a private address. Here aiohttp's resolver *is* the check: it
   connects only to the addresses it has just approved. Redirects are followed here, each hop
   checked, because Chromium follows a fulfilled redirect without showing the next request to
   the route handler (measured). The price: a redirected stylesheet's relative URLs resolve
   against the URL the page asked for. Responses lose Set-Cookie (no cookie can carry over from
   one job to the next) and are capped in size.

2. **A closed network for Chromium itself** (:meth:`NetworkGuard.chromium_args`): some traffic
   never reaches a route handler (measured here: ``navigator.sendBeacon``, WebRTC STUN over UDP
   and TURN over TCP, preconnects). Chromium therefore runs behind a proxy that is a loopback
   port we hold and never listen on (``<-loopback>`` sends loopback through it too), with host
   resolution disabled and WebRTC limited to proxied UDP, that is none. Nothing that escapes
   interception gets out; allowed resources never needed Chromium's network anyway.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol
from urllib.parse import urljoin, urlsplit

import aiohttp
from playwright.async_api import BrowserContext, Request, Route, WebSocketRoute
from playwright.async_api import Error as PlaywrightError

from reportfarm import netpolicy
from reportfarm.netpolicy import IPAddress

log = logging.getLogger(__name__)

_PASS_SCHEMES = frozenset({"data", "blob", "about"})
_METHODS = frozenset({"GET", "HEAD"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_FORWARD_HEADERS = frozenset({"accept", "accept-language", "user-agent"})
_DROP_HEADERS = frozenset(
    {"set-cookie", "set-cookie2", "content-encoding", "content-length", "transfer-encoding",
     "connection", "keep-alive"}
)  # fmt: skip
_URL_LOG_LIMIT = 200


class GuardEvents(Protocol):
    """Hook for metrics. Reasons: :class:`netpolicy.Refused`'s (syntax, scheme, host, dns,
    address) and the guard's own: method, redirects, too_large, websocket."""

    def request_blocked(self, reason: str) -> None:
        return None


class _NoEvents(GuardEvents):
    pass


class NetworkGuard:
    """The core's :class:`netpolicy.NetworkPolicy`, installed on every browser context. See the
    module docstring. ``policy`` defaults to documents fetching nothing (no allowed host)."""

    def __init__(
        self,
        *,
        policy: netpolicy.NetworkPolicy | None = None,
        events: GuardEvents | None = None,
        fetch_timeout: float = 10.0,
        max_redirects: int = 5,
        max_response_bytes: int = 20 * 2**20,
    ) -> None:
        self.policy = policy or netpolicy.NetworkPolicy.for_documents()
        self._events: GuardEvents = events or _NoEvents()
        self._timeout_s = fetch_timeout
        self._max_redirects = max_redirects
        self._max_bytes = max_response_bytes
        self._session: aiohttp.ClientSession | None = None
        self._blackhole: socket.socket | None = None

    def chromium_args(self) -> list[str]:
        """Launch flags that close Chromium's own network (layer 2)."""
        if self._blackhole is None:
            # Bound without SO_REUSEADDR and never listening: nobody else can listen here, and
            # a connection is refused at once.
            self._blackhole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._blackhole.bind(("127.0.0.1", 0))
        port = self._blackhole.getsockname()[1]
        return [
            f"--proxy-server=http://127.0.0.1:{port}",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            # The full browser reads the first; the headless shell ignores it and reads the
            # second (without it, a STUN request reached a local UDP port from the shell).
            "--webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        ]

    async def install(
        self, context: BrowserContext, *, on_navigation: Callable[[str], object] | None = None
    ) -> None:
        """Route every request and WebSocket of a context through the guard (layer 1).

        ``on_navigation(url)`` hears of each blocked attempt of a main frame to navigate.
        """

        async def on_request(route: Route, request: Request) -> None:
            if not await self._on_request(route, request) and on_navigation is not None:
                with contextlib.suppress(PlaywrightError):
                    if request.is_navigation_request() and request.frame.parent_frame is None:
                        on_navigation(request.url)

        await context.route("**/*", on_request)
        await context.route_web_socket("**/*", self._on_web_socket)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._blackhole is not None:
            self._blackhole.close()
            self._blackhole = None

    async def check(self, url: str, method: str = "GET") -> list[IPAddress]:
        """Raise :class:`netpolicy.Refused` unless the policy allows the request; return its
        addresses."""
        if urlsplit(url).scheme in ("http", "https") and method.upper() not in _METHODS:
            raise netpolicy.Refused("method", method)
        return await self.policy.check_url(url)

    async def _on_request(self, route: Route, request: Request) -> bool:
        """Answer an intercepted request; False if it was blocked."""
        url = request.url
        if url.partition(":")[0].lower() in _PASS_SCHEMES:
            await _quietly(route.continue_())
            return True
        try:
            status, headers, body = await self.fetch(url, request.method, request.headers)
        except netpolicy.Refused as blocked:
            self._report(url, blocked)
            # A blocked navigation answered 204 leaves the document in place; an error would
            # replace it with Chromium's error page, and the job would print that.
            if request.is_navigation_request():
                await _quietly(route.fulfill(status=204))
            else:
                await _quietly(route.abort("blockedbyclient"))
            return False
        except Exception as error:  # every intercepted request must be answered, or it hangs
            log.info("fetching %s failed: %r", shorten(url), error)
            await _quietly(route.abort("failed"))
            return True
        await _quietly(route.fulfill(status=status, headers=headers, body=body))
        return True

    async def _on_web_socket(self, route: WebSocketRoute) -> None:
        self._report(route.url, netpolicy.Refused("websocket"))
        await _quietly(route.close(code=1008, reason="blocked"))

    async def fetch(
        self, url: str, method: str = "GET", request_headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """GET/HEAD an allowed URL, following redirects hop by hop, each hop checked; raise
        :class:`netpolicy.Refused` for what the policy refuses."""
        request_headers = request_headers or {}
        session = self._open_session()
        headers = {k: v for k, v in request_headers.items() if k.lower() in _FORWARD_HEADERS}
        for _ in range(self._max_redirects + 1):
            await self.check(url, method)
            async with session.request(method, url, headers=headers, allow_redirects=False) as rsp:
                location = rsp.headers.get("Location")
                if rsp.status in _REDIRECTS and location:
                    url = urljoin(url, location)
                    method = "GET" if rsp.status == 303 else method
                    continue
                body = bytearray()
                async for chunk in rsp.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > self._max_bytes:
                        raise netpolicy.Refused("too_large", f"over {self._max_bytes} bytes")
                kept = {
                    name.lower(): ", ".join(rsp.headers.getall(name))
                    for name in rsp.headers
                    if name.lower() not in _DROP_HEADERS
                }
                return rsp.status, kept, bytes(body)
        raise netpolicy.Refused("redirects", f"more than {self._max_redirects}")

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = self.policy.session(timeout_s=self._timeout_s)
        return self._session

    def _report(self, url: str, blocked: netpolicy.Refused) -> None:
        log.warning("blocked a document's request to %s (%s)", shorten(url), blocked)
        try:
            self._events.request_blocked(blocked.reason)
        except Exception:
            log.exception("the request_blocked hook failed")


async def _quietly(action: Awaitable[None]) -> None:
    """Answer a route; the page may be gone already (job over, browser closed)."""
    try:
        await action
    except PlaywrightError as error:
        log.debug("answering an intercepted request failed: %s", error)


def shorten(url: str) -> str:
    """A URL cut to a length fit for a log line or an error message."""
    return url if len(url) <= _URL_LOG_LIMIT else url[:_URL_LOG_LIMIT] + "..."
