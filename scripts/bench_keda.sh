#!/usr/bin/env bash
# The side by side of our operator and the real KEDA + HPA on the real node
# (tests/node/sidebyside.py). As root (the real node).
#   REPORTFARM_KEDA_TRACES  traces, comma-separated (default burst,jump,small,wake)
#   REPORTFARM_KEDA_SIDES   sides (default ours,keda-60,keda-120; also e.g. keda-60-q4,
#                           keda-60-up1: another queueLength or scale-up step)
#   REPORTFARM_KEDA_RUNS    trace:side pairs instead (e.g. burst:ours,jump:keda-60)
#   REPORTFARM_KEDA_OUT     folder the runs are added to (default out/keda): runs.json keeps every
#                           run, table.md, replicas.png and frontier.png are made from all of them
# Each (trace, side) takes the trace + 150 s + a pod start; all four traces x three sides about
# 50 min on 2 cores. The model beside the real runs: python -m tests.node.sidebyside_model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/kube/build.sh node >/dev/null
bash scripts/keda/build.sh >/dev/null
bash scripts/node/prepare.sh
export REPORTFARM_KEDA_FULL=1 REPORTFARM_NODE_TESTS=1
exec .venv/bin/python -m pytest -p no:cacheprovider -s -q --durations=5 \
  tests/node/test_keda_side_by_side.py::test_full_side_by_side "$@"
