"""A real Prometheus scrapes a real renderer while it works: every dashboard query and every alert
expression the chart ships returns data.

The renderer runs in-process (real Chromium, real Azurite) with a pool of 2 and recycling after 3
jobs; it renders the example reports, poisons a job for an unknown template, and loses a browser
that the test kills, so restarts, recycles, retries and poison all have series. Prometheus scrapes
it every second with the labels the chart's PodMonitor adds (namespace, pod, pool).

Queries on the operator's series (``reportfarm_operator_*``) are not checked here: they need a
running operator against a Kubernetes API, and the operator's end-to-end test checks them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from reportfarm_renderer import service
from reportfarm_renderer.settings import RendererSettings

from reportfarm import azurite, finishing, renderer_api
from reportfarm.client import ReportFarmClient, Submission
from tests.deploy import prometheus

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.azurite,
    pytest.mark.chromium,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPERATOR_SERIES = re.compile(r"\breportfarm_operator_")
LABELS = {"namespace": "reportfarm-test", "pod": "renderer-0", "pool": "reports"}


def _examples() -> list[Submission]:
    jobs = []
    for index in range(4):
        for template in ("achievement", "outlook"):
            data = json.loads((EXAMPLES / "data" / f"{template}.json").read_text("utf-8"))
            jobs.append(Submission(template=template, data=data, job_id=f"{template}-{index}"))
    return jobs


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def browser_pids() -> list[int]:
    """Main Chromium processes under this test process (helpers carry ``--type=``)."""
    pending, found = [os.getpid()], []
    while pending:
        for child in _children(pending.pop()):
            pending.append(child)
            with contextlib.suppress(OSError):
                argv = (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")
                if b"chrom" in Path(argv[0].decode()).name.encode() and not any(
                    a.startswith(b"--type=") for a in argv
                ):
                    found.append(child)
    return found


async def _settled(renderer: service.Renderer) -> None:
    """Wait until the pool is full and idle (recycled browsers closed and relaunched)."""
    pool = renderer.pool
    for _ in range(120):
        if pool.live == pool.size and pool.launching == 0 and pool.busy == 0:
            await asyncio.sleep(1.0)  # closed browsers' processes exit
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"pool did not settle: live {pool.live}, launching {pool.launching}")


async def _run_jobs(client: ReportFarmClient, jobs: list[Submission]) -> dict[str, str]:
    ids = await client.submit_many(jobs)
    results = await client.wait(ids, timeout_s=120)
    return {job_id: record.state if record else "missing" for job_id, record in results.items()}


SLOW_TEMPLATE = """{# reportfarm: javascript #}<!doctype html><html><body><p>{{ title }}</p>
<script>const until = Date.now() + 4500; while (Date.now() < until) {}</script></body></html>"""
"""A document whose print takes ~4.5 s: its lease is extended (every 10 s / 3) while it runs."""


async def test_every_dashboard_query_and_alert_expression_returns_data(
    azurite_server: azurite.Azurite, storage_names: tuple[str, str], tmp_path: Path
) -> None:
    queue, container = storage_names
    env = {
        "AZURE_STORAGE_CONNECTION_STRING": azurite_server.connection_string,
        "REPORTFARM_QUEUE": queue,
        "REPORTFARM_CONTAINER": container,
        "REPORTFARM_RECYCLE_AFTER_JOBS": "3",
        "REPORTFARM_VISIBILITY_TIMEOUT": "10",
        "REPORTFARM_POLL_MAX_S": "0.2",
        "REPORTFARM_DRAIN_TIMEOUT": "10",
    }
    port = azurite.free_port()
    templates = tmp_path / "templates"
    shutil.copytree(EXAMPLES / "templates", templates)
    (templates / "slow.html").write_text(SLOW_TEMPLATE)
    settings = RendererSettings.from_env(env, templates=templates, pool_size=2, port=port)
    with prometheus.PrometheusServer({"renderer": [f"127.0.0.1:{port}"]}, labels=LABELS) as prom:
        async with (
            service.running(settings) as renderer,
            ReportFarmClient(
                azurite_server.connection_string, queue=queue, container=container
            ) as client,
        ):
            await client.ensure()
            await prom.wait_for('up{job="renderer"} == 1')

            states = await _run_jobs(
                client,
                [
                    *_examples(),
                    Submission(template="no-such-template", data={}),
                    Submission(template="slow", data={"title": "slow"}),
                    Submission(
                        template="outlook",
                        data=json.loads((EXAMPLES / "data" / "outlook.json").read_text("utf-8")),
                        finish=finishing.Finish(metadata=finishing.Metadata(title="Outlook")),
                    ),
                ],
            )
            broken = [job_id for job_id, state in states.items() if state != "succeeded"]
            assert len(broken) == 1, states
            # The synchronous path's hint (the gateway's wake), heard by an idle renderer.
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"http://127.0.0.1:{port}{renderer_api.WAKE_PATH}") as answer,
            ):
                assert answer.status < 300, await answer.text()

            # A browser dies under the pool: the next jobs find it dead and it is replaced.
            await _settled(renderer)
            victims = browser_pids()
            assert victims, "no Chromium process found under the test process"
            os.kill(victims[0], signal.SIGKILL)
            states = await _run_jobs(client, _examples())
            assert set(states.values()) == {"succeeded"}, states
            await prom.wait_for("sum(reportfarm_browser_restarts_total) > 0")
            await prom.wait_for("sum(reportfarm_browser_recycles_total) > 0")
            await prom.wait_for("sum(reportfarm_poison_messages_total) > 0")
            await prom.wait_for("sum(reportfarm_lease_age_seconds_count) > 0")
            await prom.wait_for("sum(reportfarm_hints_total) > 0")
            await prom.wait_for("sum(reportfarm_stage_cpu_seconds_total) > 0")
            await asyncio.sleep(3)  # a few more scrapes: every rate() has two points

            checked, deferred, empty = 0, [], []
            queries = [
                (f"{name}: {expr}", expr)
                for name, exprs in prometheus.dashboard_queries().items()
                for expr in exprs
            ]
            queries += [(f"alert {n}: {e}", e) for n, e in prometheus.alert_queries().items()]
            for label, expr in queries:
                if OPERATOR_SERIES.search(expr):
                    deferred.append(label)
                    continue
                checked += 1
                if not await _eventually_finite(prom, expr):
                    empty.append(label)
    assert not empty, "queries without data:\n" + "\n".join(empty)
    assert checked >= 25, (checked, deferred)
    print(f"{checked} queries returned data; left to the operator e2e: {len(deferred)}")


async def _eventually_finite(prom: Any, expr: str, *, within_s: float = 20.0) -> bool:
    """A ratio of gauges is NaN at an instant when its denominator is 0 (both browsers being
    replaced at once): a query passes when it returns a finite sample within a few scrapes."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        if prometheus.has_finite_sample(await prom.query(expr)):
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(1.0)
