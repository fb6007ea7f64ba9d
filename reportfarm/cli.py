"""``reportfarm``: the command line. Each subcommand imports its module only when it runs, so the
operator's image (no Playwright) and the renderer's share one entry point."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

P = ParamSpec("P")
_NAME_HELP = (
    "PDF file names: {template}, {job_id}, {index}, {data.FIELD...}, e.g. "
    "'{template}-{data.student.name}'; a missing field becomes the job id"
)
_NO_BENCH = (
    "error: the benchmarks are not installed here (no image ships them): run `reportfarm bench` "
    "in a checkout of the repository (bash scripts/bootstrap.sh)"
)
_UP_NAME = "'{template}-{data.student.name}' for the examples, else '{template}-{job_id}'"


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
        "--out", type=Path, help="download the PDFs into DIR, with DIR/index.csv (implies --wait)"
    )
    submit.add_argument("--name", default=None, help=_NAME_HELP)
    submit.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most")
    submit.add_argument(
        "--batch",
        nargs="?",
        const="",
        metavar="ID",
        help="submit the lines as one batch (bulk lane), with an optional batch id",
    )
    submit.add_argument("--callback-url", help="with --batch: the batch's webhook")
    submit.add_argument(
        "--finish",
        type=Path,
        metavar="FILE",
        help="finish every PDF as FILE.json says: metadata, pdfa, attachments, facturx, sign, "
        "watermark, permissions (docs/finishing/index.md)",
    )
    submit.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="a file the jobs attach (--finish names it by NAME); repeat for more",
    )
    submit.add_argument("--tagged", action="store_true", help="tagged PDF, for screen readers")
    submit.add_argument("--outline", action="store_true", help="bookmarks from the headings")

    status = sub.add_parser("status", help="queue depth and poison count, as a table")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.add_argument(
        "--watch", action="store_true", help="a live view: lanes, throughput, renderers' browsers"
    )
    status.add_argument(
        "--renderer",
        action="append",
        default=[],
        metavar="URL",
        help="a renderer's base URL for --watch (repeatable; also REPORTFARM_RENDERERS)",
    )
    status.add_argument("--interval", type=float, default=2.0, help="--watch: seconds per refresh")
    status.add_argument("--frames", type=int, default=None, help=argparse.SUPPRESS)

    up = sub.add_parser("up", help="the local farm: Azurite (if needed), a worker, the examples")
    up.add_argument("--out", type=Path, default=Path("out"), help="where the PDFs go")
    up.add_argument("--templates", type=Path, default=None, help="template folder")
    up.add_argument("--data", type=Path, default=None, help="jobs to render (.json or .jsonl)")
    up.add_argument("--serve", action="store_true", help="keep the farm running after the demo")
    up.add_argument("--name", default=None, help=_NAME_HELP + " (default: " + _UP_NAME + ")")

    init = sub.add_parser("init", help="a new template from a skeleton, rendered once to a PDF")
    init.add_argument("name", help="the template's name (letters, digits, - and _)")
    init.add_argument(
        "--dir", type=Path, default=Path("reports"), help="where templates/, data/, out/ go"
    )
    init.add_argument("--force", action="store_true", help="overwrite existing files")

    preview = sub.add_parser(
        "preview", help="render one template with one data file to a PDF, locally, no queue"
    )
    preview.add_argument("--templates", type=Path, required=True, help="template folder")
    preview.add_argument("--template", required=True, help="template name")
    preview.add_argument("--data", type=Path, required=True, help="a .json data object")
    preview.add_argument("--out", type=Path, help="the PDF (default: out/<template>.pdf)")

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
    batch_download.add_argument(
        "--name", default="{job_id}", help=_NAME_HELP + " (default: '{job_id}')"
    )

    sub.add_parser("operator", help="run the ReportPool operator (kopf); --help for its options")
    simulate = sub.add_parser("simulate", help="replay a trace through our policy and KEDA+HPA")
    simulate.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    bench = sub.add_parser(
        "bench", help="the benchmarks: `reportfarm bench --list`, `reportfarm bench NAME --help`"
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _one_line_errors(run: Callable[P, int]) -> Callable[P, int]:
    """A storage failure a user can fix (malformed connection string, a stopped farm, a wrong
    key) ends with one line saying what is wrong and what to do, not a traceback."""

    @functools.wraps(run)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return run(*args, **kwargs)
        except Exception as error:
            from reportfarm import connecting

            line = connecting.explain(error)
            if line is None:
                raise
            print(f"error: {line}", file=sys.stderr)
            return 2

    return guarded


@_one_line_errors
def main(argv: list[str] | None = None) -> int:  # noqa: C901 (one branch per command)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["operator"]:  # its own parser: --namespace, --peering (kopf's options)
        from reportfarm_operator.main import main as operator_main

        from reportfarm import logs

        logs.configure()
        return operator_main(argv[1:])
    if argv[:1] == ["simulate"]:
        from reportfarm.simulate.cli import main as simulate_main

        return simulate_main(argv[1:])
    if argv[:1] == ["bench"]:  # its own parser: one per benchmark, imported when it runs
        try:
            from reportfarm_bench import commands
        except ModuleNotFoundError as error:  # an image: none ships the benchmarks
            if error.name != "reportfarm_bench":
                raise
            print(_NO_BENCH, file=sys.stderr)
            return 2
        return commands.main(argv[1:])
    args = _parser().parse_args(argv)
    from reportfarm import logs

    logs.configure()
    if args.command == "worker":
        from reportfarm_renderer import launching

        return launching.main(template_dir=args.templates, pool_size=args.pool_size, port=args.port)
    if args.command == "submit":
        from reportfarm import submitting

        try:
            extras = submitting.read_extras(
                finish=args.finish, files=args.file, tagged=args.tagged, outline=args.outline
            )
        except submitting.InputError as error:
            submitting.console.print(f"[red]error:[/] {error}", soft_wrap=True)
            return 2
    if args.command == "submit" and args.batch is not None:
        from reportfarm import batch_commands

        return batch_commands.submit_main(
            extras=extras,
            template=args.template,
            data=args.data,
            batch_id=args.batch or None,
            callback_url=args.callback_url,
            wait=args.wait or args.out is not None,
            timeout=args.timeout,
        )
    if args.command == "submit":
        from reportfarm import naming, submitting

        return submitting.main(
            extras=extras,
            template=args.template,
            data=args.data,
            wait=args.wait or args.out is not None,
            out=args.out,
            timeout=args.timeout,
            name=args.name or naming.DEFAULT_PATTERN,
        )
    if args.command == "status" and args.watch:
        from reportfarm import watching

        return watching.main(renderers=args.renderer, interval=args.interval, frames=args.frames)
    if args.command == "status":
        from reportfarm import submitting

        return submitting.status_main(as_json=args.json)
    if args.command == "up":
        from reportfarm_renderer import local

        return local.main(
            out=args.out, templates=args.templates, data=args.data, serve=args.serve, name=args.name
        )
    if args.command == "init":
        from reportfarm_renderer import scaffolding

        return scaffolding.main(name=args.name, folder=args.dir, force=args.force)
    if args.command == "preview":
        from reportfarm_renderer import preview

        return preview.main(
            templates=args.templates, template=args.template, data=args.data, out=args.out
        )
    if args.command == "gateway":
        from reportfarm_gateway import app

        return app.main(port=args.port)
    if args.command == "batch":
        return _batch(args)
    raise AssertionError(args.command)


def _batch(args: argparse.Namespace) -> int:
    from reportfarm import batch_commands

    if args.batch_command == "status":
        return batch_commands.status_main(
            args.batch_id, as_json=args.json, wait=args.wait, timeout=args.timeout
        )
    if args.batch_command == "retry":
        return batch_commands.retry_main(args.batch_id, wait=args.wait, timeout=args.timeout)
    return batch_commands.download_main(
        args.batch_id, out=args.out, merge=args.merge, name=args.name
    )


if __name__ == "__main__":
    raise SystemExit(main())
