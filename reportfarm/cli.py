"""``reportfarm``: the command line. Each subcommand imports its module only when it runs, so the
operator's image (no Playwright) and the renderer's share one entry point."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reportfarm", description="Autoscaling HTML-to-PDF report render farm."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = sub.add_parser("worker", help="run a renderer: a browser pool consuming the queue")
    worker.add_argument("--templates", type=Path, help="template folder (REPORTFARM_TEMPLATES)")
    worker.add_argument("--pool-size", type=int, help="browsers in the pool (REPORTFARM_POOL_SIZE)")
    worker.add_argument("--port", type=int, help="HTTP port for health, metrics, /pool")

    submit = sub.add_parser("submit", help="submit jobs: one JSON object or a JSONL of many")
    submit.add_argument(
        "--template", required=True, help="template name (a .jsonl line may override)"
    )
    submit.add_argument("--data", required=True, type=Path, help=".json object or .jsonl lines")
    submit.add_argument("--wait", action="store_true", help="wait, with a progress bar")
    submit.add_argument(
        "--out", type=Path, help="download each PDF as DIR/<job id>.pdf (implies --wait)"
    )
    submit.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most")
    submit.add_argument(
        "--batch",
        nargs="?",
        const="",
        metavar="ID",
        help="submit the lines as one batch (bulk lane), with an optional batch id",
    )
    submit.add_argument("--callback-url", help="with --batch: the batch's webhook")

    status = sub.add_parser("status", help="queue depth and poison count, as a table")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")

    up = sub.add_parser("up", help="the local farm: Azurite (if needed), a worker, the examples")
    up.add_argument("--out", type=Path, default=Path("out"), help="where the PDFs go")
    up.add_argument("--templates", type=Path, default=None, help="template folder")
    up.add_argument("--data", type=Path, default=None, help="jobs to render (.json or .jsonl)")
    up.add_argument("--serve", action="store_true", help="keep the farm running after the demo")

    bench = sub.add_parser("bench", help="benchmark render strategies side by side")
    bench.add_argument("--json", action="store_true", help="print JSON")
    bench.add_argument("--jobs", type=int, default=60, help="documents per strategy")
    bench.add_argument("--pool-size", type=int, default=2, help="browsers per pool")
    bench.add_argument("--plot", type=Path, default=Path("out/bench.png"), help="PNG plot path")
    bench.add_argument(
        "--samples", type=Path, default=None, help="folder for one PDF per strategy (optional)"
    )

    gateway = sub.add_parser("gateway", help="the HTTP gateway and the webhook dispatcher")
    gateway.add_argument("--port", type=int, help="HTTP port (REPORTFARM_GATEWAY_PORT, 8000)")

    batch = sub.add_parser("batch", help="a batch's state, retry of its failed items, its PDFs")
    batch_sub = batch.add_subparsers(dest="batch_command", required=True, metavar="ACTION")
    batch_status = batch_sub.add_parser("status", help="counts, state and failed items")
    batch_status.add_argument("batch_id")
    batch_status.add_argument("--json", action="store_true", help="print JSON")
    batch_status.add_argument("--wait", action="store_true", help="wait with a progress bar")
    batch_status.add_argument("--timeout", type=float, default=3600.0, help="seconds at most")
    batch_retry = batch_sub.add_parser("retry", help="resubmit the failed items only")
    batch_retry.add_argument("batch_id")
    batch_retry.add_argument("--wait", action="store_true", help="wait with a progress bar")
    batch_retry.add_argument("--timeout", type=float, default=3600.0, help="seconds at most")
    batch_download = batch_sub.add_parser("download", help="the succeeded items' PDFs")
    batch_download.add_argument("batch_id")
    batch_download.add_argument("--out", type=Path, default=Path("out"), help="folder")
    batch_download.add_argument("--merge", action="store_true", help="one PDF, in item order")

    lanes = sub.add_parser(
        "bench-lanes", help="benchmark: interactive latency on an idle farm vs beside a batch"
    )
    lanes.add_argument("--bulk", type=int, default=2000, help="items in the bulk batch")
    lanes.add_argument("--interactive", type=int, default=20, help="concurrent interactive")
    lanes.add_argument("--rounds", type=int, default=3, help="rounds of interactive requests")
    lanes.add_argument("--pool-size", type=int, default=2, help="browsers in the renderer")
    lanes.add_argument("--json", action="store_true", help="print JSON")

    sub.add_parser("operator", help="run the ReportPool operator (kopf); --help for its options")
    simulate = sub.add_parser("simulate", help="replay a trace through our policy and KEDA+HPA")
    simulate.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["operator"]:  # its own parser: --namespace, --peering (kopf's options)
        from reportfarm_operator.main import main as operator_main

        from reportfarm import logs

        logs.configure()
        return operator_main(argv[1:])
    if argv[:1] == ["simulate"]:
        from reportfarm.simulate.cli import main as simulate_main

        return simulate_main(argv[1:])
    args = _parser().parse_args(argv)
    from reportfarm import logs

    logs.configure()
    if args.command == "worker":
        from reportfarm_renderer import service

        return service.main(template_dir=args.templates, pool_size=args.pool_size, port=args.port)
    if args.command == "submit" and args.batch is not None:
        from reportfarm import batches

        return batches.submit_main(
            template=args.template,
            data=args.data,
            batch_id=args.batch or None,
            callback_url=args.callback_url,
            wait=args.wait or args.out is not None,
            timeout=args.timeout,
        )
    if args.command == "submit":
        from reportfarm import submitting

        return submitting.main(
            template=args.template,
            data=args.data,
            wait=args.wait or args.out is not None,
            out=args.out,
            timeout=args.timeout,
        )
    if args.command == "status":
        from reportfarm import submitting

        return submitting.status_main(as_json=args.json)
    if args.command == "up":
        from reportfarm_renderer import local

        return local.main(out=args.out, templates=args.templates, data=args.data, serve=args.serve)
    if args.command == "bench":
        from reportfarm_renderer import bench

        return bench.main(
            as_json=args.json,
            jobs=args.jobs,
            pool_size=args.pool_size,
            plot=args.plot,
            samples=args.samples,
        )
    if args.command == "gateway":
        from reportfarm.gateway import app

        return app.main(port=args.port)
    if args.command == "batch":
        return _batch(args)
    if args.command == "bench-lanes":
        from reportfarm.gateway import bench as lanes_bench

        return lanes_bench.main(
            bulk=args.bulk,
            interactive=args.interactive,
            rounds=args.rounds,
            pool_size=args.pool_size,
            as_json=args.json,
        )
    raise AssertionError(args.command)


def _batch(args: argparse.Namespace) -> int:
    from reportfarm import batches

    if args.batch_command == "status":
        return batches.status_main(
            args.batch_id, as_json=args.json, wait=args.wait, timeout=args.timeout
        )
    if args.batch_command == "retry":
        return batches.retry_main(args.batch_id, wait=args.wait, timeout=args.timeout)
    return batches.download_main(args.batch_id, out=args.out, merge=args.merge)


if __name__ == "__main__":
    raise SystemExit(main())
