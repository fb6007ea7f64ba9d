"""``reportfarm bench einvoice``: month-end e-invoicing through the queue, signed PDF/A-3 Factur-X
invoices with a visible stamp against the same invoice printed plain, on one renderer process
with a pod's CPUs and browsers (see :mod:`.einvoice`); ``--signatures`` measures
the signature's cost instead, on a light and a heavy document.

A pod of ``--pod-cpus`` CPUs runs as many browsers; on fewer CPUs than the machine has, the
renderer process (and all it starts) is pinned to them, with the client and Azurite on the
others. On all of the machine's CPUs, the client and Azurite share them: say so beside figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from typing import Any

from reportfarm_renderer import cpus
from rich.table import Table

from reportfarm import loops
from reportfarm_bench import einvoice, pod, reporting

TARGET = 0.6
"""Signed e-invoices' PDFs/s over the plain prints', on the same CPUs (issue 28)."""
LAG_TARGET_MS = 50.0


def main(
    *,
    as_json: bool,
    rounds: int,
    chunk: int,
    pod_cpus: int,
    signatures: bool,
    tsa: bool,
    tsa_url: str | None = None,
    finishing_processes: int | None = None,
) -> int:
    if rounds < 1 or chunk < 1 or pod_cpus < 1:
        print("reportfarm bench einvoice: --rounds, --chunk and --pod-cpus must be at least 1")
        return 2
    console = reporting.bench_console(as_json, width=160)
    machine = cpus.affinity()
    pinned = pod.split_cpus(pod_cpus)[0] if pod_cpus < machine else None
    kinds = einvoice.signature_kinds() if signatures else einvoice.einvoice_kinds()
    load_before = [round(value, 2) for value in os.getloadavg()]
    with contextlib.ExitStack() as stack:
        if tsa and tsa_url is None:  # a loopback authority of the benchmark's own
            from reportfarm_bench import authority

            tsa_url = stack.enter_context(authority.running())
        results = loops.run(
            einvoice.run(
                kinds,
                rounds=rounds,
                chunk=chunk,
                pool_size=pod_cpus,
                cpus=pinned,
                extra_env=_environment(tsa_url, finishing_processes),
                log=lambda line: console.log(line),
            )
        )
    report = {
        "kinds": results,
        "parameters": {
            "rounds": rounds,
            "chunk": chunk,
            "pod_cpus": pod_cpus,
            "browsers": pod_cpus,
            "pinned_to": pinned,
            "machine_cpus": machine,
            "timestamps": bool(tsa_url),
            "finishing_processes": finishing_processes,
            "visibility_timeout_s": einvoice.VISIBILITY_S,
            "load_before": load_before,
            "load_after": [round(value, 2) for value in os.getloadavg()],
        },
    }
    for row in results.values():
        row["cpus_busy"] = cpus_busy(row, pod_cpus=pod_cpus, machine_cpus=machine, pinned=pinned)
    console.print(table(report))
    if as_json:
        print(json.dumps(report, indent=2))
    return 0


def cpus_busy(
    row: dict[str, Any], *, pod_cpus: int, machine_cpus: int, pinned: object
) -> float | None:
    """The share of the CPUs a kind may use that its PDFs/s keep busy (PDFs/s x CPU a PDF): the
    pod's own when it is pinned; when not, the machine's, with the client's and Azurite's CPU,
    which share them. Near 1: the CPUs are the limit, and more PDFs/s need less CPU a PDF."""
    rate = float(row["pdf_per_s"])
    if rate <= 0:
        return None
    if pinned:
        return round(rate * float(row["cpu_ms_per_pdf"]) / 1000 / pod_cpus, 2)
    both = float(row["cpu_ms_per_pdf"]) + float(row["outside_cpu_ms_per_pdf"])
    return round(rate * both / 1000 / machine_cpus, 2)


def _environment(tsa_url: str | None, processes: int | None) -> dict[str, str]:
    environment = {"REPORTFARM_TSA_URL": tsa_url} if tsa_url else {}
    if processes is not None:
        environment["REPORTFARM_FINISHING_PROCESSES"] = str(processes)
    return environment


def _finishing(processes: int | None) -> str:
    if processes is None:
        return "in two processes per CPU (the default)"
    return "in a thread (as before)" if processes == 0 else f"in {processes} process(es)"


def table(report: dict[str, Any]) -> Table:
    kinds = report["kinds"]
    params = report["parameters"]
    assert isinstance(kinds, dict) and isinstance(params, dict)
    base = next(iter(kinds.values()))["pdf_per_s"] or 1.0
    where = (
        f"pinned to CPUs {params['pinned_to']}"
        if params["pinned_to"]
        else f"all {params['machine_cpus']} CPUs, shared with the client and Azurite"
    )
    result = Table(
        title=(
            f"through the queue: a pod of {params['browsers']} browser(s) on {params['pod_cpus']} "
            f"CPU(s) ({where}), finishing {_finishing(params['finishing_processes'])}, "
            f"{params['rounds']} interleaved rounds of {params['chunk']} jobs; "
            f"load {params['load_before']} -> {params['load_after']}"
        )
    )
    for column in (
        "kind",
        "PDFs/s",
        "x first",
        "CPU ms/PDF",
        "client + Azurite CPU ms/PDF",
        "CPUs busy",
        "finishing CPU ms/PDF (by stage)",
        "p50 ms",
        "p95 ms",
        "loop lag p99 / max ms",
        f"oldest lease s (timeout {params['visibility_timeout_s']})",
    ):
        result.add_column(column)
    for name, row in kinds.items():
        stages = row["finish_cpu_ms_per_pdf"]
        result.add_row(
            name,
            f"{row['pdf_per_s']:.2f}",
            f"{row['pdf_per_s'] / base:.2f}",
            f"{row['cpu_ms_per_pdf']:.0f}",
            f"{row['outside_cpu_ms_per_pdf']:.0f}",
            "-" if row.get("cpus_busy") is None else f"{row['cpus_busy']:.2f}",
            ", ".join(f"{stage.removeprefix('finish_')} {ms:.0f}" for stage, ms in stages.items())
            or "-",
            f"{row['p50_ms']}",
            f"{row['p95_ms']}",
            f"{row['loop_lag_p99_ms']} / {row['loop_lag_max_ms']}",
            f"{row['lease_age_max_s']}",
        )
    return result


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--chunk", type=int, default=16, help="jobs of each kind a round")
    parser.add_argument(
        "--pod-cpus", type=int, default=2, help="the pod's CPUs and browsers (pinned if fewer)"
    )
    parser.add_argument(
        "--signatures",
        action="store_true",
        help="instead: signatures (none, invisible, visible) on a light and a heavy document",
    )
    parser.add_argument(
        "--tsa",
        action="store_true",
        help="signatures are PAdES B-T, timestamped by a loopback authority (or --tsa-url)",
    )
    parser.add_argument("--tsa-url", default=None, help="a timestamp authority of your own")
    parser.add_argument(
        "--finishing-processes",
        type=int,
        default=None,
        help="the renderer's finishing processes (default: its CPUs; 0: a thread, as before)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def command(args: argparse.Namespace) -> int:
    return main(
        as_json=args.json,
        rounds=args.rounds,
        chunk=args.chunk,
        pod_cpus=args.pod_cpus,
        signatures=args.signatures,
        tsa=args.tsa or args.tsa_url is not None,
        tsa_url=args.tsa_url,
        finishing_processes=args.finishing_processes,
    )
