#!/usr/bin/env bash
# A renderer pod's start on the real node, per phase, from its creation to its first PDF stored
# (tests/node/test_pod_start.py): ${REPORTFARM_POD_START_ROUNDS:-5} pods one after the other, each
# for one waiting job, then the image's size per layer and the pull estimate
# (scripts/images/layers.py). As root (the real node); prints the tables and writes the rounds to
# ${REPORTFARM_POD_START_OUT:-out/podstart/rounds.json}. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export REPORTFARM_NODE_TESTS=1
export REPORTFARM_POD_START_ROUNDS="${REPORTFARM_POD_START_ROUNDS:-5}"
export REPORTFARM_POD_START_OUT="${REPORTFARM_POD_START_OUT:-out/podstart/rounds.json}"
bash scripts/bootstrap.sh
.venv/bin/python -m pytest tests/node/test_pod_start.py -s "$@"
.venv/bin/python scripts/images/layers.py "$(bash scripts/images/build.sh renderer | cut -d" " -f3)"
