#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, lints, type-checks, then runs
# every test against the real parts: Chromium, Azurite, Prometheus and a Kubernetes control plane
# (built from Go modules on first use, cached outside the repo; KUBECONFIG may name your cluster).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not kube"`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
if [ -x scripts/kube/build.sh ]; then
  bash scripts/kube/build.sh
fi

echo "== ruff"
python3 -m ruff check .
python3 -m ruff format --check .
echo "== mypy"
python3 -m mypy
echo "== pytest"
python3 -m pytest -ra -q -p no:cacheprovider "$@"
