"""aiohttp's own protocol errors as JSON, like every other error of the gateway.

A request aiohttp cannot parse (a control character in a header, a bad request line) never
reaches the application or its middleware: aiohttp answers it from its connection handler with
a ``text/plain`` page. :class:`AppRunner` is aiohttp's runner with that one answer replaced by
``{"error": ...}`` (same status; the connection is closed, as aiohttp does).
"""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web, web_protocol, web_request


class _JsonErrors(web_protocol.RequestHandler):
    __slots__ = ()

    def handle_error(
        self,
        request: web_request.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs, and checks nothing was sent
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        detail = " ".join((message or phrase).split())[:300]
        answer = web.json_response({"error": detail or str(status)}, status=status)
        answer.force_close()
        return answer


class _Server(web.Server):
    def __call__(self) -> web_protocol.RequestHandler:
        return _JsonErrors(self, loop=self._loop, **self._kwargs)


class AppRunner(web.AppRunner):
    """``web.AppRunner`` whose protocol-level errors are JSON (see the module doc)."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server
        return server
