"""``reportfarm bench-finish``: what each finishing option costs on the example reports, as a
ratio to the print (see :mod:`.benchmarking.finishing`); ``reportfarm bench`` runs the same
measurement after its strategies."""

from __future__ import annotations

import json
import os

from rich.console import Console

from reportfarm import loops, renderer_api
from reportfarm_renderer import bench, browser
from reportfarm_renderer.benchmarking import documents as documenting
from reportfarm_renderer.benchmarking import finishing, reporting


async def run(*, repeats: int, chromium_path: str | None, console: Console) -> dict[str, object]:
    _, documents = documenting.load()
    load_before = bench._load()
    async with browser.ChromiumLauncher(executable_path=chromium_path) as launcher:
        summary = await finishing.measure(
            launcher, documents, repeats=repeats, log=lambda line: console.log(line)
        )
    return {
        **summary,
        "parameters": {"repeats": repeats, "load_before": load_before, "load_after": bench._load()},
    }


def main(*, as_json: bool, repeats: int) -> int:
    if repeats < 1:
        print("bench-finish: --repeats must be at least 1")
        return 2
    console = reporting.bench_console(as_json, width=140)
    chromium_path = os.environ.get(renderer_api.Var.CHROMIUM_PATH) or None
    report = loops.run(run(repeats=repeats, chromium_path=chromium_path, console=console))
    console.print(finishing.table(report))
    params = report["parameters"]
    assert isinstance(params, dict)
    console.print(
        f"load average before {params['load_before']}, after {params['load_after']} "
        "(compare ratios, not milliseconds)"
    )
    if as_json:
        print(json.dumps(report, indent=2))
    return 0
