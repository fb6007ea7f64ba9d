"""``reportfarm bench finish``: what each finishing option costs on the example reports, as a
ratio to the print (see :mod:`.finishing`); ``reportfarm bench strategies`` runs the same
measurement after its strategies."""

from __future__ import annotations

import argparse
import json
import os

from reportfarm_renderer import browser
from rich.console import Console

from reportfarm import loops, renderer_api
from reportfarm_bench import bench_strategies, finishing, reporting
from reportfarm_bench import documents as documenting


async def run(*, repeats: int, chromium_path: str | None, console: Console) -> dict[str, object]:
    _, documents = documenting.load()
    load_before = bench_strategies._load()
    async with browser.ChromiumLauncher(executable_path=chromium_path) as launcher:
        summary = await finishing.measure(
            launcher, documents, repeats=repeats, log=lambda line: console.log(line)
        )
    return {
        **summary,
        "parameters": {
            "repeats": repeats,
            "load_before": load_before,
            "load_after": bench_strategies._load(),
        },
    }


def main(*, as_json: bool, repeats: int) -> int:
    if repeats < 1:
        print("reportfarm bench finish: --repeats must be at least 1")
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


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per option and document (median)"
    )


def command(args: argparse.Namespace) -> int:
    return main(as_json=args.json, repeats=args.repeats)
