"""``reportfarm status --watch``: the farm at a glance, refreshed in place, without Grafana.

Each frame reads every lane's queue depth and poison count from storage, and each renderer it can
reach: ``GET /pool`` (pool size, live and busy browsers, running jobs) and ``GET /metrics`` (jobs
ended, by outcome). Throughput is the renderers' succeeded jobs between two frames per second.
Renderers come from ``--renderer URL`` and ``REPORTFARM_RENDERERS`` (comma-separated; ``reportfarm
up --serve`` writes its renderer's URL to ``.reportfarm/env``). A renderer that does not answer
stays in the table as "unreachable". Ctrl-C ends the view.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from reportfarm import connecting, renderer_api
from reportfarm.client import QueueStatus, ReportFarmClient

_TIMEOUT = aiohttp.ClientTimeout(total=2.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RendererView:
    """One renderer as last read; ``error`` set when it did not answer."""

    url: str
    size: int = 0
    live: int = 0
    busy: int = 0
    running_jobs: int = 0
    succeeded: float = 0.0
    """Jobs this renderer stored since it started (its counter)."""
    poisoned: float = 0.0
    error: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Frame:
    at: float
    """time.monotonic() when read."""
    lanes: Sequence[QueueStatus]
    renderers: Sequence[RendererView]


def throughput(previous: Frame | None, current: Frame) -> float | None:
    """Succeeded jobs per second between two frames, over renderers reachable in both (a renderer
    that restarted, its counter lower, counts from zero)."""
    if previous is None or current.at <= previous.at:
        return None
    before = {view.url: view for view in previous.renderers if view.error is None}
    counted = [
        (view.succeeded, before[view.url].succeeded)
        for view in current.renderers
        if view.error is None and view.url in before
    ]
    if not counted:
        return None
    done = sum(now - then if now >= then else now for now, then in counted)
    return done / (current.at - previous.at)


async def read_renderer(session: aiohttp.ClientSession, url: str) -> RendererView:
    base = url.rstrip("/")
    try:
        async with session.get(f"{base}{renderer_api.POOL_PATH}") as response:
            response.raise_for_status()
            pool = await response.json()
        async with session.get(f"{base}{renderer_api.METRICS_PATH}") as response:
            response.raise_for_status()
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        return RendererView(url=url, error=f"unreachable ({type(error).__name__})")
    outcomes: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == renderer_api.JOBS_METRIC:
            for sample in family.samples:
                if sample.name == f"{renderer_api.JOBS_METRIC}_total":
                    outcome = sample.labels.get("outcome", "")
                    outcomes[outcome] = outcomes.get(outcome, 0.0) + sample.value
    return RendererView(
        url=url,
        size=int(pool.get("size", 0)),
        live=int(pool.get("live", 0)),
        busy=int(pool.get("busy", 0)),
        running_jobs=int(pool.get("running_jobs", 0)),
        succeeded=outcomes.get("succeeded", 0.0),
        poisoned=outcomes.get("poisoned", 0.0),
    )


async def read_frame(
    client: ReportFarmClient, session: aiohttp.ClientSession, renderers: Sequence[str]
) -> Frame:
    lanes, views = await asyncio.gather(
        client.status(), asyncio.gather(*(read_renderer(session, url) for url in renderers))
    )
    return Frame(at=time.monotonic(), lanes=lanes, renderers=list(views))


def render(frame: Frame, *, rate: float | None, interval: float) -> Group:
    queues = Table(title="reportfarm: queues", title_justify="left")
    for column, justify in (("lane", "left"), ("queue", "left"), ("depth", "right")):
        queues.add_column(column, justify=justify)  # type: ignore[arg-type]
    queues.add_column("poison", justify="right")
    for lane in frame.lanes:
        poison = f"[red]{lane.poison_depth}[/]" if lane.poison_depth else "0"
        queues.add_row(lane.lane, lane.queue, str(lane.depth), poison)
    queues.caption = "depth is approximate and includes jobs being rendered"
    pods = Table(title="renderers", title_justify="left")
    pods.add_column("renderer")
    for column in ("browsers", "busy", "jobs now", "succeeded", "poisoned"):
        pods.add_column(column, justify="right")
    for view in frame.renderers:
        if view.error is not None:
            pods.add_row(view.url, f"[yellow]{view.error}[/]", "", "", "", "")
            continue
        pods.add_row(
            view.url,
            f"{view.live}/{view.size}",
            _bar(view.busy, view.size),
            str(view.running_jobs),
            f"{view.succeeded:.0f}",
            f"{view.poisoned:.0f}",
        )
    if not frame.renderers:
        pods.add_row("none given: --renderer URL or REPORTFARM_RENDERERS", "", "", "", "", "")
    shown = f"{rate:.2f} PDF/s" if rate is not None else "-"
    pods.caption = f"throughput {shown}; every {interval:g} s, Ctrl-C ends"
    return Group(queues, pods)


def _bar(busy: int, size: int) -> str:
    return f"{'■' * busy}{'□' * max(0, size - busy)} {busy}"


def renderer_urls(given: Sequence[str]) -> list[str]:
    """``--renderer`` URLs, then REPORTFARM_RENDERERS (environment, else .reportfarm/env)."""
    configured, _ = connecting.setting(connecting.RENDERERS_VAR)
    urls = [*given, *(item.strip() for item in (configured or "").split(",") if item.strip())]
    return list(dict.fromkeys(urls))


async def watch(
    *, renderers: Sequence[str], interval: float, frames: int | None, console: Console
) -> None:
    from reportfarm import submitting

    async with submitting._client() as client, aiohttp.ClientSession(timeout=_TIMEOUT) as session:
        previous: Frame | None = None
        with Live(console=console, auto_refresh=False) as live:
            shown = 0
            while frames is None or shown < frames:
                if shown:
                    await asyncio.sleep(interval)
                frame = await read_frame(client, session, renderers)
                live.update(render(frame, rate=throughput(previous, frame), interval=interval))
                live.refresh()
                previous, shown = frame, shown + 1
        console.line()


def main(*, renderers: Sequence[str], interval: float, frames: int | None) -> int:
    console = Console()
    try:
        asyncio.run(
            watch(
                renderers=renderer_urls(renderers),
                interval=max(0.2, interval),
                frames=frames,
                console=console,
            )
        )
    except KeyboardInterrupt:
        pass
    return 0
