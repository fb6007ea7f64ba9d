"""The gateway on its own event loop in a thread, for tests whose calls are synchronous
(schemathesis, hypothesis over raw sockets)."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web
from reportfarm_gateway import app as gateway_app
from reportfarm_gateway import protocol

from reportfarm import azurite
from reportfarm.settings import StorageSettings

from .conftest import gateway_settings


class ThreadedGateway:
    """The gateway on its own event loop in a thread (schemathesis' calls are synchronous)."""

    def __init__(
        self, server: azurite.Azurite, *, name: str = "schema", **overrides: object
    ) -> None:
        store = StorageSettings(
            connection_string=server.connection_string, queue=f"q{name}", container=f"c{name}"
        )
        self.settings = gateway_settings(store, max_wait_s=0.2, dispatcher=False, **overrides)
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.url = ""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.runner = protocol.AppRunner(gateway_app.create_app(self.settings), access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", 0).start())
        port = next(a[1] for a in self.runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}"
        self.started.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    def __enter__(self) -> ThreadedGateway:
        self.thread.start()
        assert self.started.wait(30)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
