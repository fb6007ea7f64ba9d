#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need (scripts/bootstrap.sh: .venv/),
# lints, type-checks, builds the documentation site, then runs every test against the real parts:
# Chromium, Azurite, Prometheus and a Kubernetes control plane (built from Go modules on first
# use, cached outside the repo; KUBECONFIG may name your cluster). Everything runs in the
# project's .venv/.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not kube"`.
# Time on 2 cores: ~36 min with the caches warm, the real-node tests included (as root): pytest
# 29 min (1,605 tests), the node's images rebuilt after a source change ~2-3 min, the rest ~2 min.
# The first run adds ~9 min for the Kubernetes build, ~10 min for KEDA, ~9 min for the images and
# the node's packages, and ~5 min for Gotenberg.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"

# step NAME CMD...: say what runs, then how long it took.
step() {
  local name="$1" start=$SECONDS
  shift
  echo "== $name"
  "$@"
  echo "== $name: done in $((SECONDS - start)) s"
}

# built NAME SCRIPT [ARGS...]: a build that caches its result outside the repo (instant when
# cached), run in the background with a line every minute, so a cold build or a wait for another
# build's lock is never silent. On success BUILT holds the last line of its stdout (where the
# result is); on failure the end of its output is shown and the status is non-zero.
BUILT=""
built() {
  local name="$1" log pid minutes=0
  shift
  log="$(mktemp)"
  bash "$@" >"$log" 2>&1 &
  pid=$!
  while ! wait_for "$pid" 60; do
    minutes=$((minutes + 1))
    echo "   ${name}, ${minutes} min: $(tail -n 1 "$log" | cut -c1-120 | grep . || echo "waiting for another build's lock")"
  done
  if wait "$pid"; then
    BUILT="$(tail -n 1 "$log")"
    rm -f "$log"
    return 0
  fi
  tail -n 40 "$log"
  rm -f "$log"
  return 1
}

# wait_for PID SECONDS: true once PID has exited, false if it still runs after SECONDS.
wait_for() {
  local i
  for ((i = 0; i < $2; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 1
  done
  ! kill -0 "$1" 2>/dev/null
}

# The Kubernetes binaries of the test control plane (~9 min cold on 2 cores). The tests need them.
kube_build() {
  echo "   cached in ${REPORTFARM_CACHE:-~/.cache/reportfarm}/kube; a first build takes ~9 min on 2 cores"
  built "Kubernetes binaries" scripts/kube/build.sh
  echo "   binaries in $BUILT"
}

if [ -x scripts/kube/build.sh ]; then
  step "Kubernetes test binaries" kube_build
fi

# Gotenberg for the side by side benchmark's test (tests/renderer/test_bench_gotenberg.py): the
# newest version the Go module proxy serves, or GOTENBERG_SRC (a source checkout: its newest
# release tag), built once (~5 min cold on 2 cores). A failed build does not stop the suite: that
# test then says why it skips.
gotenberg_build() {
  if built Gotenberg scripts/gotenberg/build.sh; then
    export REPORTFARM_GOTENBERG_BIN="$BUILT/gotenberg"
    echo "   Gotenberg $(cat "$BUILT/VERSION" 2>/dev/null); binary: $REPORTFARM_GOTENBERG_BIN"
  else
    echo "   Gotenberg build failed (its test will skip)"
  fi
}

if [ -x scripts/gotenberg/build.sh ]; then
  step "Gotenberg (side by side benchmark)" gotenberg_build
fi

# KEDA (operator + metrics adapter) for the side by side with the real KEDA and HPA
# (tests/kube/test_keda.py, tests/node/test_keda_side_by_side.py), built once from the Go module
# proxy (~10 min cold on 2 cores, Go 1.27.4 fetched by GOTOOLCHAIN). A failed build fails those
# tests, with the build's output.
keda_build() {
  if built KEDA scripts/keda/build.sh; then
    export REPORTFARM_KEDA_BIN="$BUILT"
    echo "   binaries in $REPORTFARM_KEDA_BIN"
  else
    echo "   KEDA build failed (its tests will fail and show this again)"
  fi
}

if [ -x scripts/keda/build.sh ]; then
  step "KEDA (the real KEDA beside our operator)" keda_build
fi

# The validators of the archival tests (tests/finishing), Java tools from Maven Central cached in
# ${REPORTFARM_CACHE:-~/.cache/reportfarm}/<name> (scripts/maven-jar.sh; ~10 s each the first
# time, instant when cached): veraPDF (PDF/A) and Mustang (Factur-X). A failed install does not stop
# the suite: the tests that need the tool then say why they skip.
validator_install() {
  local name="$1" variable="$2" log
  log="$(mktemp)"
  if bash "scripts/$name/install.sh" >"$log" 2>&1; then
    export "$variable=$(tail -n 1 "$log")"
    echo "   $name: ${!variable}"
  else
    echo "   $name install failed (the tests that need it will skip):"
    tail -n 20 "$log"
  fi
  rm -f "$log"
}

if [ -x scripts/verapdf/install.sh ]; then
  step "veraPDF (PDF/A validator)" validator_install verapdf REPORTFARM_VERAPDF
fi
if [ -x scripts/mustang/install.sh ]; then
  step "Mustang (Factur-X validator)" validator_install mustang REPORTFARM_MUSTANG
fi
# EN 16931's business rules (XSLT) the renderer runs in production, out of Mustang's jar.
if [ -x scripts/en16931/install.sh ]; then
  step "EN 16931 rules (renderer)" validator_install en16931 REPORTFARM_EN16931_XSLT
fi

# The real-node tests (tests/node): Debian's podman/containerd/runc/CNI plugins, the kubelet and
# the images (cached by content in ~/.cache/reportfarm/images). They need root, as CI runs;
# REPORTFARM_NODE_TESTS=0 leaves them out (skipped).
if [ "$(id -u)" = 0 ] && [ "${REPORTFARM_NODE_TESTS:-1}" != 0 ]; then
  step "real node: packages, kubelet, images" bash scripts/node/prepare.sh
  export REPORTFARM_NODE_TESTS=1
fi

step ruff bash -c 'python -m ruff check . && python -m ruff format --check .'
step mypy python -m mypy
# The layers (pyproject's [tool.importlinter]): this tree's packages, not whatever is installed.
step import-linter env PYTHONPATH=".:renderer:operator:gateway:bench" lint-imports --no-cache
# The documentation site (mkdocs.yml, docs/): a broken link or anchor, or an alert whose runbook
# page or runbook_url is wrong, fails the build. Offline, a few seconds; the site is thrown away.
docs_build() {
  local out status=0
  out="$(mktemp -d)"
  NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --quiet --site-dir "$out" || status=$?
  rm -rf "$out"
  return "$status"
}
step "docs site (mkdocs build --strict)" docs_build
# The slowest 15 tests are listed at the end.
step pytest python -m pytest -ra -q -p no:cacheprovider --durations=15 "$@"
