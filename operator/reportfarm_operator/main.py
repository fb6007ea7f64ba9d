"""``reportfarm operator``: run the ReportPool operator (kopf) until interrupted.

Standalone by default, as kopf recommends for a single replica (the Helm chart runs one, with the
Recreate strategy). ``--peering NAME`` uses kopf's peering objects instead (their CRDs must be
installed) so that only one of several replicas acts.
"""

from __future__ import annotations

import argparse

import kopf

from reportfarm_operator.settings import OperatorSettings


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reportfarm operator", description="Run the ReportPool operator."
    )
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch this namespace (repeatable; default: REPORTFARM_OPERATOR_NAMESPACES, or all)",
    )
    parser.add_argument(
        "--peering",
        metavar="NAME",
        help="coordinate replicas through kopf's peering object NAME (default: standalone)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = OperatorSettings.from_env()
    namespaces = list(args.namespace or settings.namespaces)
    from reportfarm_operator import handlers  # noqa: F401  (registers the handlers with kopf)

    host = settings.bind_address
    host = f"[{host}]" if ":" in host else host
    liveness = f"http://{host}:{settings.health_port}/healthz" if settings.health_port else None
    kopf.run(
        standalone=args.peering is None,
        peering_name=args.peering,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=liveness,
    )
    return 0


if __name__ == "__main__":  # `reportfarm operator` configures logging itself
    from reportfarm import logs

    logs.configure()
    raise SystemExit(main())
