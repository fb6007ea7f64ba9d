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
        "watermark, permissions (README: Documents people must keep)",
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

    bench = sub.add_parser("bench", help="benchmark render strategies side by side")
    bench.add_argument("--json", action="store_true", help="print JSON")
    bench.add_argument("--jobs", type=int, default=60, help="documents per strategy")
    bench.add_argument("--pool-size", type=int, default=2, help="browsers per pool")
    bench.add_argument("--plot", type=Path, default=Path("out/bench.png"), help="PNG plot path")
    bench.add_argument(
        "--samples", type=Path, default=None, help="folder for one PDF per strategy (optional)"
    )

    versus = sub.add_parser(
        "bench-gotenberg", help="benchmark: the same documents through Gotenberg and through us"
    )
    where = versus.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--gotenberg-bin", type=Path, help="a binary from scripts/gotenberg/build.sh: started here"
    )
    where.add_argument("--gotenberg-url", help="a running Gotenberg (same concurrency, please)")
    versus.add_argument(
        "--gotenberg-pid", type=int, help="with --gotenberg-url: its root pid, to sample memory"
    )
    versus.add_argument(
        "--gotenberg-chromium",
        metavar="WHICH[,WHICH]",
        help="with --gotenberg-bin: the Chromium each Gotenberg side is given, one Gotenberg per "
        "entry: 'same' (the binary our pool runs: side gotenberg), 'image' (Debian's full "
        "chromium on PATH, as Gotenberg's image runs it: side gotenberg_full) or a path "
        "(default: same,image)",
    )
    versus.add_argument("--json", action="store_true", help="print JSON")
    versus.add_argument("--jobs", type=int, default=60, help="documents per side")
    versus.add_argument("--pool-size", type=int, default=2, help="our browsers = its tabs")
    versus.add_argument(
        "--plot", type=Path, default=Path("out/bench-gotenberg.png"), help="PNG plot path"
    )
    versus.add_argument("--samples", type=Path, default=None, help="folder for one PDF per side")

    synchronous = sub.add_parser(
        "bench-sync",
        help="benchmark: a client waiting on POST /v1/reports vs on Gotenberg (same Chromium)",
    )
    synchronous.add_argument(
        "--gotenberg-bin", type=Path, required=True, help="a binary from scripts/gotenberg/build.sh"
    )
    synchronous.add_argument(
        "--concurrency", default="1,2,8,20", help="concurrent requests, comma-separated"
    )
    synchronous.add_argument("--jobs", type=int, default=24, help="documents per chunk (>= 2x c)")
    synchronous.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    synchronous.add_argument(
        "--pool-size", type=int, default=1, help="our browsers (Gotenberg runs one)"
    )
    synchronous.add_argument(
        "--pages-per-browser", type=int, default=2, help="our pages per browser (its tabs: all)"
    )
    synchronous.add_argument(
        "--polling", action="store_true", help="also the gateway path without the hints"
    )
    synchronous.add_argument(
        "--idle-s", type=float, default=0.0, help="then count an idle farm's storage requests"
    )
    synchronous.add_argument("--json", action="store_true", help="print JSON")
    synchronous.add_argument(
        "--plot", type=Path, default=Path("out/bench-sync.png"), help="PNG plot path"
    )

    finish_bench = sub.add_parser(
        "bench-finish", help="what each finishing option (PDF/A, signing...) costs, x the print"
    )
    finish_bench.add_argument("--json", action="store_true", help="print JSON")
    finish_bench.add_argument(
        "--repeats", type=int, default=3, help="timed runs per option and document (median)"
    )

    printing = sub.add_parser(
        "bench-print", help="benchmark the print path: pool shapes, Chromium flags, loading"
    )
    printing.add_argument("--json", action="store_true", help="print JSON")
    printing.add_argument("--jobs", type=int, default=40, help="documents per variant")
    printing.add_argument(
        "--shapes", default="1x2,1x3,2x2", help="BROWSERSxPAGES list (today, 2x1, always runs)"
    )
    printing.add_argument("--flags", default="", help="flag names to try, comma-separated")
    printing.add_argument("--flag-shape", default="2x1", help="the shape flags are tried on")
    printing.add_argument(
        "--with", dest="with_flags", default="", help="flag names every variant but today gets"
    )
    printing.add_argument("--loading", default="", help="set_content wait_until values to try")
    printing.add_argument(
        "--plot", type=Path, default=Path("out/bench-print.png"), help="PNG plot path"
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
    batch_download.add_argument(
        "--name", default="{job_id}", help=_NAME_HELP + " (default: '{job_id}')"
    )

    lanes = sub.add_parser(
        "bench-lanes", help="benchmark: interactive latency on an idle farm vs beside a batch"
    )
    lanes.add_argument("--bulk", type=int, default=2000, help="items in the bulk batch")
    lanes.add_argument("--interactive", type=int, default=20, help="concurrent interactive")
    lanes.add_argument("--rounds", type=int, default=3, help="rounds of interactive requests")
    lanes.add_argument("--pool-size", type=int, default=2, help="browsers in the renderer")
    lanes.add_argument("--json", action="store_true", help="print JSON")

    pages = sub.add_parser(
        "bench-pages", help="benchmark: a statement of 2, 50 and 500 pages, memory and time"
    )
    pages.add_argument(
        "--pages",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[2, 50, 500],
        help="comma-separated page counts (default 2,50,500)",
    )
    pages.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    pages.add_argument("--repeat", type=int, default=3, help="prints per round, smaller sizes")
    pages.add_argument("--json", action="store_true", help="print JSON")
    pages.add_argument(
        "--plot", type=Path, default=Path("out/bench-pages.png"), help="PNG plot path"
    )

    pod = sub.add_parser(
        "bench-pod",
        help="benchmark: end to end against the ceiling on one pod's CPUs (storage elsewhere)",
    )
    pod.add_argument("--jobs", type=int, default=100, help="documents a side")
    pod.add_argument("--pool-size", type=int, default=2, help="browsers in the pod")
    pod.add_argument(
        "--pod-cpus", type=int, default=None, help="CPUs the pod gets (default: half of them)"
    )
    pod.add_argument("--json", action="store_true", help="print JSON")
    pod.add_argument("--plot", type=Path, default=Path("out/bench-pod.png"), help="PNG plot path")

    einvoicing = sub.add_parser(
        "bench-einvoice",
        help="benchmark: signed PDF/A-3 Factur-X invoices vs plain prints, through the queue",
    )
    einvoicing.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    einvoicing.add_argument("--chunk", type=int, default=16, help="jobs of each kind a round")
    einvoicing.add_argument(
        "--pod-cpus", type=int, default=2, help="the pod's CPUs and browsers (pinned if fewer)"
    )
    einvoicing.add_argument(
        "--signatures",
        action="store_true",
        help="instead: signatures (none, invisible, visible) on a light and a heavy document",
    )
    einvoicing.add_argument(
        "--tsa",
        action="store_true",
        help="signatures are PAdES B-T, timestamped by a loopback authority (or --tsa-url)",
    )
    einvoicing.add_argument("--tsa-url", default=None, help="a timestamp authority of your own")
    einvoicing.add_argument(
        "--finishing-processes",
        type=int,
        default=None,
        help="the renderer's finishing processes (default: its CPUs; 0: a thread, as before)",
    )
    einvoicing.add_argument("--json", action="store_true", help="print JSON")

    sub.add_parser("operator", help="run the ReportPool operator (kopf); --help for its options")
    simulate = sub.add_parser("simulate", help="replay a trace through our policy and KEDA+HPA")
    simulate.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
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
    args = _parser().parse_args(argv)
    from reportfarm import logs

    logs.configure()
    if args.command == "worker":
        from reportfarm_renderer import service

        return service.main(template_dir=args.templates, pool_size=args.pool_size, port=args.port)
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
    if args.command == "bench":
        from reportfarm_renderer import bench

        return bench.main(
            as_json=args.json,
            jobs=args.jobs,
            pool_size=args.pool_size,
            plot=args.plot,
            samples=args.samples,
        )
    if args.command == "bench-gotenberg":
        from reportfarm_renderer import bench_gotenberg

        return bench_gotenberg.main(
            as_json=args.json,
            jobs=args.jobs,
            pool_size=args.pool_size,
            target=bench_gotenberg.Target(
                binary=args.gotenberg_bin, url=args.gotenberg_url, pid=args.gotenberg_pid
            ),
            plot=args.plot,
            samples=args.samples,
            gotenberg_chromium=args.gotenberg_chromium,
        )
    if args.command == "bench-sync":
        from reportfarm_renderer import bench_sync

        try:
            levels = [int(word) for word in args.concurrency.split(",") if word.strip()]
        except ValueError:
            print("bench-sync: --concurrency takes whole numbers, comma-separated", file=sys.stderr)
            return 2
        return bench_sync.main(
            as_json=args.json,
            gotenberg_bin=args.gotenberg_bin,
            concurrencies=levels,
            jobs=args.jobs,
            rounds=args.rounds,
            pool_size=args.pool_size,
            polling=args.polling,
            plot_path=args.plot,
            idle_s=args.idle_s,
            pages_per_browser=args.pages_per_browser,
        )
    if args.command == "bench-finish":
        from reportfarm_renderer import bench_finish

        return bench_finish.main(as_json=args.json, repeats=args.repeats)
    if args.command == "bench-einvoice":
        from reportfarm_renderer import bench_einvoice

        return bench_einvoice.main(
            as_json=args.json,
            rounds=args.rounds,
            chunk=args.chunk,
            pod_cpus=args.pod_cpus,
            signatures=args.signatures,
            tsa=args.tsa or args.tsa_url is not None,
            tsa_url=args.tsa_url,
            finishing_processes=args.finishing_processes,
        )
    if args.command == "bench-pod":
        from reportfarm_renderer import bench_pod

        return bench_pod.main(
            as_json=args.json,
            jobs=args.jobs,
            pool_size=args.pool_size,
            pod_cpus=args.pod_cpus,
            plot_path=args.plot,
        )
    if args.command == "bench-print":
        from reportfarm_renderer import bench_print

        return bench_print.main(
            as_json=args.json,
            jobs=args.jobs,
            shapes=_names(args.shapes),
            flags=_names(args.flags),
            flag_shape=args.flag_shape,
            with_flags=_names(args.with_flags),
            loading=_names(args.loading),
            plot_path=args.plot,
        )
    if args.command == "gateway":
        from reportfarm_gateway import app

        return app.main(port=args.port)
    if args.command == "batch":
        return _batch(args)
    if args.command == "bench-pages":
        from reportfarm_renderer.benchmarking import pages as pages_bench

        return pages_bench.main(
            sizes=args.pages,
            rounds=args.rounds,
            repeat=args.repeat,
            as_json=args.json,
            plot=args.plot,
        )
    if args.command == "bench-lanes":
        # A renderer and the gateway in one process: the renderer's benchmark gets the gateway
        # from here, the composition root (the services never import each other).
        from reportfarm_gateway.app import create_app
        from reportfarm_gateway.settings import GatewaySettings
        from reportfarm_renderer.benchmarking import lanes as lanes_bench

        return lanes_bench.main(
            gateway_app=lambda **fields: create_app(GatewaySettings(**fields)),
            bulk=args.bulk,
            interactive=args.interactive,
            rounds=args.rounds,
            pool_size=args.pool_size,
            as_json=args.json,
        )
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


def _names(text: str) -> list[str]:
    """A comma-separated option as a list, blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
