"""`reportfarm status --watch`: throughput between frames, unreachable renderers, the table.
(The live view against a real farm: tests/cli/test_up.py.)"""

from __future__ import annotations

import aiohttp
import pytest
from rich.console import Console

from reportfarm import azurite, watching
from reportfarm.client import QueueStatus

LANES = [
    QueueStatus(queue="reports-interactive", depth=0, poison_depth=0, lane="interactive"),
    QueueStatus(queue="reports", depth=40, poison_depth=2, lane="bulk"),
]


def frame(at: float, *views: watching.RendererView) -> watching.Frame:
    return watching.Frame(at=at, lanes=LANES, renderers=list(views))


def view(url: str, succeeded: float, **fields: object) -> watching.RendererView:
    return watching.RendererView(url=url, succeeded=succeeded, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param(None, frame(1.0, view("a", 5)), None, id="first-frame"),
        pytest.param(frame(0.0, view("a", 5)), frame(2.0, view("a", 15)), 5.0, id="one"),
        pytest.param(
            frame(0.0, view("a", 5), view("b", 1)),
            frame(2.0, view("a", 9), view("b", 3)),
            3.0,
            id="summed",
        ),
        pytest.param(frame(0.0, view("a", 50)), frame(2.0, view("a", 4)), 2.0, id="restarted"),
        pytest.param(
            frame(0.0, view("a", 5)),
            frame(2.0, view("a", 0, error="unreachable")),
            None,
            id="gone",
        ),
        pytest.param(frame(0.0, view("a", 5)), frame(2.0, view("b", 9)), None, id="new-only"),
    ],
)
def test_throughput_between_frames(
    before: watching.Frame | None, after: watching.Frame, expected: float | None
) -> None:
    assert watching.throughput(before, after) == expected


async def test_a_renderer_that_does_not_answer_is_marked_unreachable() -> None:
    url = f"http://127.0.0.1:{azurite.free_port()}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        seen = await watching.read_renderer(session, url)
    assert seen.url == url and seen.error is not None and "unreachable" in seen.error


def test_the_table_shows_lanes_poison_browsers_and_throughput() -> None:
    console = Console(width=120, record=True, color_system=None)
    busy = view("http://r1:8080", 12, size=4, live=4, busy=3, running_jobs=3)
    gone = view("http://r2:8080", 0, error="unreachable (ClientConnectorError)")
    console.print(watching.render(frame(0.0, busy, gone), rate=1.5, interval=2.0))
    text = console.export_text()
    assert "bulk" in text and "40" in text and "2" in text
    assert "■■■□ 3" in text and "4/4" in text
    assert "unreachable (ClientConnectorError)" in text
    assert "throughput 1.50 PDF/s" in text


def test_renderer_urls_come_from_flags_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REPORTFARM_RENDERERS", "http://b:1, http://a:1,")
    assert watching.renderer_urls(["http://a:1"]) == ["http://a:1", "http://b:1"]
