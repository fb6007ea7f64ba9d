"""``reportfarm bench pages``: a statement of 2, 50 and 500 pages, memory and time (the work is
in :mod:`.pages`, the report in :mod:`.pages_report`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from reportfarm_bench import pages


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pages",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[2, 50, 500],
        help="comma-separated page counts (default 2,50,500)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--repeat", type=int, default=3, help="prints per round, smaller sizes")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--plot", type=Path, default=Path("out/bench-pages.png"), help="PNG plot path"
    )


def command(args: argparse.Namespace) -> int:
    return pages.main(
        sizes=args.pages, rounds=args.rounds, repeat=args.repeat, as_json=args.json, plot=args.plot
    )
