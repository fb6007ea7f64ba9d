"""reportfarm.loops.run: the services' event loop is uvloop's where uvloop imports, asyncio's own
where it does not; either way, Ctrl-C cancels the coroutine before it stops (`reportfarm up`
drains on it)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest
import uvloop  # a dependency wherever it has a build (not Windows)

from reportfarm import loops


async def running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_the_coroutine_runs_on_uvloops_loop() -> None:
    loop = loops.run(running_loop())
    assert type(loop) is uvloop.Loop
    assert loop.is_closed()


def test_without_uvloop_it_runs_on_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    loop = loops.run(running_loop())
    assert isinstance(loop, asyncio.BaseEventLoop)
    assert not isinstance(loop, uvloop.Loop)
    assert loop.is_closed()


@pytest.mark.parametrize("with_uvloop", [True, False], ids=["uvloop", "asyncio"])
def test_ctrl_c_cancels_the_coroutine_then_raises_keyboard_interrupt(
    with_uvloop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not with_uvloop:
        monkeypatch.setitem(sys.modules, "uvloop", None)
    # Python's own handler, as a fresh process has it (asyncio.Runner takes Ctrl-C over only
    # from it); a loop an earlier test ran in this process may have left its own (uvloop's
    # signal handling does), so set it here and put back whatever was there.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupted_while_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted_while_running() -> None:
    seen: list[str] = []

    async def farm() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    with pytest.raises(KeyboardInterrupt):
        loops.run(farm())
    assert seen == ["cancelled"]
