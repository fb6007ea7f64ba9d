"""Request bodies: read within the farm's one size limit, under per-tenant and total budgets, by
a deadline.

- **Size** (:func:`received`): the limit is ``contract.MAX_DATA_BYTES`` (or a lower setting). A
  ``Content-Length`` past it is answered 413 before a byte of the body is read; any body (chunked,
  or inflated from ``Content-Encoding: gzip``) is answered 413 as soon as what it inflates to
  passes the limit. A body that is not what its ``Content-Encoding`` says is a 400.
- **Memory** (:class:`BodyBudget`): bytes of bodies held at once, counted as they are inflated,
  under two bounds. Each tenant has its own share (``tenant_bytes``): a request reserves its
  ``Content-Length`` of it before reading (a body too large for what is left waits, unread in the
  socket, then gets 503 + Retry-After after ``wait_s``), and inflated bytes past that count too.
  The total (``limit_bytes``) counts only bytes that have arrived, so a connection that declares
  16 MiB and sends nothing holds none of it: one tenant can exhaust its share, never the others'.
- **Deadline**: the whole body must arrive within ``read_s`` (else 408), so a stalled connection
  gives back its share.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import http_exceptions, web, web_protocol

from reportfarm import contract
from reportfarm_gateway.parsing import BodyError

__all__ = ["BodyBudget", "BodyError", "received"]

CHUNK_BYTES = 256 * 1024


class BodyBudget:
    """Bytes of request bodies held at once: per tenant and in total (see the module doc)."""

    def __init__(
        self, *, limit_bytes: int, tenant_bytes: int, wait_s: float, read_s: float = 30.0
    ) -> None:
        self.limit_bytes = limit_bytes
        self.tenant_bytes = tenant_bytes
        self.wait_s = wait_s
        self.read_s = read_s
        self.in_use = 0
        """Bytes of bodies that have arrived and are held (all tenants)."""
        self.tenants: dict[str, int] = {}
        """Each tenant's share in use: its reservations, and inflated bytes past them."""
        self._changed = asyncio.Condition()

    def tenant_in_use(self, tenant: str) -> int:
        return self.tenants.get(tenant, 0)

    async def reserve(self, tenant: str, size: int) -> None:
        """Hold ``size`` bytes of the tenant's share (a body larger than the share holds all)."""
        size = min(size, self.tenant_bytes)
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(
                        lambda: self.tenant_in_use(tenant) + size <= self.tenant_bytes
                    ),
                    self.wait_s,
                )
            except TimeoutError:
                raise BodyError(
                    503,
                    f"tenant {tenant} has {self.tenant_in_use(tenant)} bytes of bodies being read:"
                    " try again",
                    retry_after=1,
                ) from None
            self.tenants[tenant] = self.tenant_in_use(tenant) + size

    async def take(self, tenant: str, size: int, *, beyond_share: int) -> None:
        """``size`` more bytes arrived: hold them in the total, and ``beyond_share`` of them in
        the tenant's share too (bytes past its reservation)."""
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(
                        lambda: (
                            self.in_use + size <= self.limit_bytes
                            and self.tenant_in_use(tenant) + beyond_share <= self.tenant_bytes
                        )
                    ),
                    self.wait_s,
                )
            except TimeoutError:
                raise BodyError(
                    503,
                    f"the gateway holds {self.in_use} bytes of bodies: try again",
                    retry_after=1,
                ) from None
            self.in_use += size
            self.tenants[tenant] = self.tenant_in_use(tenant) + beyond_share

    async def give_back(self, tenant: str, *, held: int, share: int) -> None:
        async with self._changed:
            self.in_use -= held
            left = self.tenant_in_use(tenant) - share
            if left > 0:
                self.tenants[tenant] = left
            else:
                self.tenants.pop(tenant, None)
            self._changed.notify_all()


@contextlib.asynccontextmanager
async def received(
    request: web.Request, budget: BodyBudget, *, tenant: str, limit: int
) -> AsyncIterator[bytes]:
    """The request's body, read within ``limit`` and ``budget.read_s`` while its bytes are held
    in the budget: keep what is parsed from it inside the block."""
    declared = request.content_length
    if declared is not None and declared > limit:  # before waiting for the budget, too
        raise BodyError(413, _too_large(f"the body ({declared} bytes, Content-Length)", limit))
    held = _Held(reserved=min(limit if declared is None else declared, budget.tenant_bytes))
    await budget.reserve(tenant, held.reserved)
    held.share = held.reserved
    try:
        try:
            async with asyncio.timeout(budget.read_s):
                body = await _read(request, budget, tenant=tenant, limit=limit, held=held)
        except TimeoutError:
            detail = f"the body did not arrive within {budget.read_s:g} s"
            raise BodyError(408, detail, unread=True) from None
        except ConnectionResetError:  # the client left mid-body: nobody to answer (as nginx)
            raise BodyError(499, "the client closed its connection", unread=True) from None
        except (http_exceptions.HttpProcessingError, web_protocol.RequestPayloadError) as error:
            # e.g. Content-Encoding: gzip on a body that is not gzip
            cause = error.__cause__ if error.__cause__ is not None else error
            detail = getattr(cause, "message", None) or str(cause)
            raise BodyError(
                400, f"the body cannot be read: {detail.strip()}", unread=True
            ) from None
        yield body
    finally:
        await budget.give_back(tenant, held=held.held, share=held.share)


class _Held:
    def __init__(self, *, reserved: int) -> None:
        self.reserved = reserved
        self.share = 0
        self.held = 0


async def _read(
    request: web.Request, budget: BodyBudget, *, tenant: str, limit: int, held: _Held
) -> bytes:
    body = bytearray()
    async for chunk in request.content.iter_chunked(CHUNK_BYTES):
        size = len(body) + len(chunk)
        if size > limit:
            raise BodyError(413, _too_large("the body", limit), unread=True)
        beyond = max(0, size - held.reserved) - max(0, len(body) - held.reserved)
        await budget.take(tenant, len(chunk), beyond_share=beyond)
        held.held += len(chunk)
        held.share += beyond
        body += chunk
    return bytes(body)


def _too_large(what: str, limit: int) -> str:
    try:
        contract.check_data_size(limit + 1, what=what, limit=limit)
    except contract.ContractError as error:
        return str(error).replace(f"is {limit + 1} bytes, over", "is over")
    raise AssertionError("unreachable")
