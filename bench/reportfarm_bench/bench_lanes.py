"""``reportfarm bench lanes``: interactive latency on an idle farm vs beside a bulk batch (the
work is in :mod:`.lanes`). The gateway comes from here: a benchmark may import every service."""

from __future__ import annotations

import argparse
from typing import Any

from aiohttp import web
from reportfarm_gateway import app as gateway
from reportfarm_gateway import settings as gateway_settings

from reportfarm_bench import lanes


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bulk", type=int, default=2000, help="items in the bulk batch")
    parser.add_argument("--interactive", type=int, default=20, help="concurrent interactive")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of interactive requests")
    parser.add_argument("--pool-size", type=int, default=2, help="browsers in the renderer")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _gateway_app(**fields: Any) -> web.Application:
    return gateway.create_app(gateway_settings.GatewaySettings(**fields))


def command(args: argparse.Namespace) -> int:
    return lanes.main(
        gateway_app=_gateway_app,
        bulk=args.bulk,
        interactive=args.interactive,
        rounds=args.rounds,
        pool_size=args.pool_size,
        as_json=args.json,
    )
