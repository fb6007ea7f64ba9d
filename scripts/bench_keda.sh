#!/usr/bin/env bash
# The whole side by side of our operator and the real KEDA + HPA on the real node
# (tests/node/sidebyside.py): four traces (burst, sustained jump, small bursts, wake from zero),
# each replayed for ours, KEDA with a 60 s window and KEDA with a 120 s window, one after the
# other on the same node. As root (the real node). Writes the table, the figures as JSON and the
# replicas-over-time plot to ${REPORTFARM_KEDA_OUT:-out/keda}. About an hour on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export REPORTFARM_KEDA_FULL=1 REPORTFARM_NODE_TESTS=1
exec bash scripts/test.sh tests/node/test_keda_side_by_side.py -s "$@"
