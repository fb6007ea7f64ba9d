#!/usr/bin/env bash
# Copy the CRDs (the single source: crds/*.yaml) into the Helm chart's crds/ folder.
#   scripts/sync-chart-crds.sh          copy, and remove chart CRDs that no longer exist upstream
#   scripts/sync-chart-crds.sh --check  change nothing; exit 1 (listing the files) on drift
# tests/deploy/test_chart.py fails when the chart's copy drifts: run this after editing crds/.
set -euo pipefail
cd "$(dirname "$0")/.."

src=crds
dst=charts/reportfarm/crds
check=0
[[ "${1:-}" == "--check" ]] && check=1

mkdir -p "${dst}"
drift=()
for file in "${src}"/*.yaml; do
  target="${dst}/$(basename "${file}")"
  if ! cmp -s "${file}" "${target}"; then
    drift+=("${target}")
    ((check)) || cp "${file}" "${target}"
  fi
done
for target in "${dst}"/*.yaml; do
  [[ -e "${target}" ]] || continue
  if [[ ! -e "${src}/$(basename "${target}")" ]]; then
    drift+=("${target} (stale)")
    ((check)) || rm -f "${target}"
  fi
done

if ((${#drift[@]})); then
  if ((check)); then
    printf 'chart CRDs drift from crds/: %s\n' "${drift[@]}" >&2
    echo "run scripts/sync-chart-crds.sh" >&2
    exit 1
  fi
  printf 'synced %s\n' "${drift[@]}"
fi
