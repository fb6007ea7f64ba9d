#!/usr/bin/env python3
"""What a template render costs the renderer, against Jinja's own sandbox, in one run.

    PYTHONPATH=.:renderer:operator:gateway:bench python scripts/bench_templates.py [--rounds 20]

Two catalogs of the example templates, compiled the same way: ``ours`` (the renderer's sandbox,
which keeps Jinja's attribute verdicts per type and name and reads a data dict's items directly)
and ``jinja`` (``reportfarm_bench.documents.JinjasReads``: the same sandbox with Jinja's
``ImmutableSandboxedEnvironment`` attribute reads put back). Every benchmark document (the example
reports and the batch lines) is rendered by both in turn, the order flipped every round, after
checking that both give the same HTML. CPU time is this process's (``time.process_time``), per
document; compare the ratio, not the milliseconds (the machines are noisy).
"""

from __future__ import annotations

import argparse
import statistics
import time

from reportfarm_bench import documents
from reportfarm_renderer import templates


def _catalogs() -> dict[str, templates.TemplateCatalog]:
    ours, _ = documents.load()
    return {"ours": ours, "jinja": documents.load_with_jinjas_reads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    catalogs = _catalogs()
    _, docs = documents.load()
    for doc in docs:
        if catalogs["ours"].render(doc.template, doc.data) != catalogs["jinja"].render(
            doc.template, doc.data
        ):
            raise SystemExit(f"{doc.template}: the two sandboxes rendered different HTML")
    spent = {name: 0.0 for name in catalogs}
    per_round: list[float] = []
    for index in range(args.rounds):
        order = list(catalogs) if index % 2 else list(reversed(catalogs))
        this_round = {name: 0.0 for name in catalogs}
        for doc in docs:
            for name in order:
                started = time.process_time()
                catalogs[name].render(doc.template, doc.data)
                this_round[name] += time.process_time() - started
        for name, seconds in this_round.items():
            spent[name] += seconds
        per_round.append(this_round["ours"] / this_round["jinja"])
    renders = args.rounds * len(docs)
    for name, seconds in spent.items():
        print(f"{name:6s} {1000 * seconds / renders:6.2f} ms of CPU a document")
    print(
        f"ours / jinja: {spent['ours'] / spent['jinja']:.2f} over {args.rounds} rounds of "
        f"{len(docs)} documents (rounds {min(per_round):.2f}-{max(per_round):.2f}, "
        f"median {statistics.median(per_round):.2f})"
    )


if __name__ == "__main__":
    main()
