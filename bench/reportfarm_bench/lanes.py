"""``reportfarm bench lanes``: do interactive reports stay fast while a big bulk batch runs?

One farm on this machine: Azurite, one renderer (Chromium pool) and the gateway, in-process.
The gateway comes as a function that builds its app (:mod:`.bench_lanes` passes the gateway's).
Phase 1 (idle farm): rounds of N concurrent ``POST /v1/reports`` (interactive lane), each timed
from request to PDF. Phase 2: a bulk batch of M items is submitted through the gateway, and while
it runs the same rounds are timed again. The answer is the ratio of the loaded p95 to the idle
p95 (the issue's bar: within 2x), with how far the batch got meanwhile (bulk is not starved).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from reportfarm_renderer import service
from reportfarm_renderer.settings import RendererSettings

from reportfarm import azurite, loops, quantiles
from reportfarm.settings import StorageSettings

TEMPLATE = "<html><body><h1>{{ title }}</h1><p>{{ body }}</p></body></html>"
TOKEN = "bench-token"

GatewayApp = Callable[..., web.Application]
"""Builds the gateway's aiohttp app from ``GatewaySettings`` fields (given by keyword)."""


@dataclasses.dataclass
class Phase:
    name: str
    latencies: list[float] = dataclasses.field(default_factory=list)
    bulk_done_before: int | None = None
    bulk_done_after: int | None = None

    def summary(self) -> dict[str, Any]:
        times = sorted(self.latencies)
        return {
            "phase": self.name,
            "requests": len(times),
            "p50_s": quantiles.quantile(times, 0.50),
            "p95_s": quantiles.quantile(times, 0.95),
            "max_s": times[-1] if times else None,
            "bulk_done_before": self.bulk_done_before,
            "bulk_done_after": self.bulk_done_after,
        }


@contextlib.asynccontextmanager
async def _farm(pool_size: int, gateway_app: GatewayApp) -> AsyncIterator[str]:
    with azurite.Azurite() as server, tempfile.TemporaryDirectory() as folder:
        templates = Path(folder)
        (templates / "bench.html").write_text(TEMPLATE, encoding="utf-8")
        storage = StorageSettings(
            connection_string=server.connection_string, queue="bench", container="bench"
        )
        renderer = RendererSettings.from_env(
            {},
            storage=storage,
            templates=templates,
            pool_size=pool_size,
            port=0,
            poll_max_s=0.2,
            visibility_timeout=30,
        )
        gateway = {
            "storage": storage,
            "tokens": {"bench": TOKEN},
            "rate_per_s": 10_000,
            "burst": 10_000,
            "in_flight": 1_000,
            "poll_s": 0.05,
            "dispatcher": False,
        }
        async with service.running(renderer):
            runner = web.AppRunner(gateway_app(**gateway), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                await runner.cleanup()


async def _one(http: aiohttp.ClientSession, url: str, index: int) -> float:
    body = {"template": "bench", "data": {"title": f"interactive {index}", "body": "x"}}
    started = time.monotonic()
    async with http.post(f"{url}/v1/reports", json={**body, "wait_s": 120}) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"interactive request answered {response.status}")
    return time.monotonic() - started


async def _rounds(http: aiohttp.ClientSession, url: str, phase: Phase, n: int, rounds: int) -> None:
    for round_ in range(rounds):
        phase.latencies += await asyncio.gather(
            *(_one(http, url, round_ * n + index) for index in range(n))
        )


async def _bulk_done(http: aiohttp.ClientSession, url: str, batch_id: str) -> int:
    async with http.get(f"{url}/v1/batches/{batch_id}") as response:
        state = await response.json()
    return int(state["succeeded"]) + int(state["failed"])


async def run(
    *, gateway_app: GatewayApp, bulk: int, interactive: int, rounds: int, pool_size: int
) -> dict[str, Any]:
    async with _farm(pool_size, gateway_app) as url:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            await _rounds(http, url, Phase("warm-up"), interactive, 1)
            idle = Phase("idle farm")
            await _rounds(http, url, idle, interactive, rounds)
            items = [
                {"template": "bench", "data": {"title": f"bulk {i}", "body": "y"}}
                for i in range(bulk)
            ]
            started = time.monotonic()
            async with http.post(f"{url}/v1/batches", json=items) as response:
                batch_id = (await response.json())["batch_id"]
            submit_s = time.monotonic() - started
            await asyncio.sleep(2.0)  # the renderer is busy with bulk when the rounds start
            loaded = Phase(f"beside a {bulk}-item batch")
            loaded.bulk_done_before = await _bulk_done(http, url, batch_id)
            await _rounds(http, url, loaded, interactive, rounds)
            loaded.bulk_done_after = await _bulk_done(http, url, batch_id)
    idle_s, loaded_s = idle.summary(), loaded.summary()
    return {
        "load_average_1m": round(os.getloadavg()[0], 1),
        "bulk_items": bulk,
        "interactive_concurrency": interactive,
        "rounds": rounds,
        "pool_size": pool_size,
        "batch_submit_s": round(submit_s, 2),
        "phases": [idle_s, loaded_s],
        "p50_ratio": loaded_s["p50_s"] / idle_s["p50_s"],
        "p95_ratio": loaded_s["p95_s"] / idle_s["p95_s"],
    }


def main(
    *,
    gateway_app: GatewayApp,
    bulk: int,
    interactive: int,
    rounds: int,
    pool_size: int,
    as_json: bool,
) -> int:
    # A log line per job would cost this one process more than it measures.
    logging.getLogger("reportfarm_renderer").setLevel(logging.WARNING)
    result = loops.run(
        run(
            gateway_app=gateway_app,
            bulk=bulk,
            interactive=interactive,
            rounds=rounds,
            pool_size=pool_size,
        )
    )
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"interactive latency, {interactive} concurrent x {rounds} rounds, "
        f"pool of {pool_size} browsers"
    )
    for column in ("phase", "requests", "p50 s", "p95 s", "max s", "bulk items done"):
        table.add_column(column, justify="right")
    for phase in result["phases"]:
        done = (
            f"{phase['bulk_done_before']} -> {phase['bulk_done_after']}"
            if phase["bulk_done_before"] is not None
            else "-"
        )
        table.add_row(
            phase["phase"],
            str(phase["requests"]),
            f"{phase['p50_s']:.2f}",
            f"{phase['p95_s']:.2f}",
            f"{phase['max_s']:.2f}",
            done,
        )
    verdict = "within" if result["p95_ratio"] <= 2 else "NOT within"
    table.caption = (
        f"loaded/idle: p50 x{result['p50_ratio']:.2f}, p95 x{result['p95_ratio']:.2f} "
        f"({verdict} 2x); batch of {bulk} submitted in {result['batch_submit_s']} s; "
        f"machine load average {result['load_average_1m']} (other work skews the figures)"
    )
    Console().print(table)
    return 0
