"""``reportfarm bench NAME``: the benchmarks by name, one table, each imported only when it runs.

Every benchmark is a module ``reportfarm_bench.bench_NAME`` with two functions: ``arguments``
adds its options to its parser, ``command`` runs it with what was parsed and returns the exit
code. ``reportfarm bench --list`` reads this table alone (no benchmark is imported for it).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from typing import Protocol, cast

PROG = "reportfarm bench"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Benchmark:
    """One benchmark as the command line lists it."""

    name: str
    """Its word after ``reportfarm bench``; its module is ``reportfarm_bench.bench_<name>``."""
    summary: str
    """One line: what it measures (``--list`` and the parser's description)."""


BENCHMARKS = (
    Benchmark(
        name="strategies",
        summary="five ways to print, side by side, and the whole path through the queue",
    ),
    Benchmark(name="gotenberg", summary="the same documents through Gotenberg and through us"),
    Benchmark(
        name="sync", summary="a client waiting on POST /v1/reports vs on Gotenberg (same Chromium)"
    ),
    Benchmark(name="finish", summary="what each finishing option (PDF/A, signing...) costs"),
    Benchmark(name="print", summary="the print path: pool shapes, Chromium flags, loading"),
    Benchmark(name="lanes", summary="interactive latency on an idle farm vs beside a batch"),
    Benchmark(name="pages", summary="a statement of 2, 50 and 500 pages, memory and time"),
    Benchmark(name="pod", summary="end to end against the ceiling on one pod's CPUs"),
    Benchmark(name="einvoice", summary="signed PDF/A-3 Factur-X invoices vs plain prints"),
)
"""Every benchmark, in the order ``--list`` shows them."""


class Entry(Protocol):
    """What a ``bench_NAME`` module provides."""

    def arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def command(self, args: argparse.Namespace) -> int: ...


def by_name(name: str) -> Benchmark | None:
    return next((bench for bench in BENCHMARKS if bench.name == name), None)


def entry(benchmark: Benchmark) -> Entry:
    """Its module, imported now (Playwright, matplotlib... come with it)."""
    return cast(Entry, importlib.import_module(f"reportfarm_bench.bench_{benchmark.name}"))


def parser(benchmark: Benchmark) -> argparse.ArgumentParser:
    """Its parser, with the options its module declares."""
    found = argparse.ArgumentParser(
        prog=f"{PROG} {benchmark.name}", description=f"Benchmark: {benchmark.summary}."
    )
    entry(benchmark).arguments(found)
    return found


def listing() -> str:
    """``--list``: one line a benchmark, its name and what it measures."""
    width = max(len(bench.name) for bench in BENCHMARKS)
    return "\n".join(f"{bench.name:<{width}}  {bench.summary}" for bench in BENCHMARKS)


def usage() -> str:
    return (
        f"usage: {PROG} NAME [OPTIONS]   ({PROG} NAME --help: its options)\n"
        f"       {PROG} --list\n\nbenchmarks:\n" + listing()
    )


def main(argv: list[str]) -> int:
    """``reportfarm bench`` with the words after it."""
    word = argv[0] if argv else None
    if word == "--list":
        print(listing())
        return 0
    if word is None:
        print(usage(), file=sys.stderr)
        return 2
    if word in ("-h", "--help"):
        print(usage())
        return 0
    benchmark = by_name(word)
    if benchmark is None:
        names = ", ".join(bench.name for bench in BENCHMARKS)
        print(f"{PROG}: no benchmark {word!r} (there are: {names})", file=sys.stderr)
        return 2
    args = parser(benchmark).parse_args(argv[1:])
    from reportfarm import logs

    logs.configure()
    return entry(benchmark).command(args)
