#!/usr/bin/env bash
# Build KEDA's operator and metrics adapter (the real ones, for the side by side with our
# operator on the real node) from the Go module proxy.
#
# KEDA's go.mod asks for a newer Go than the machine's: GOTOOLCHAIN fetches that toolchain from
# the proxy. `go install` of KEDA's commands is refused (its go.mod has replace lines), so the
# module source is copied out of the module cache into a writable folder and built there with
# -mod=mod, which applies KEDA's own replaces. The proxy refuses one genproto zip KEDA's
# dependencies name; the copy's go.mod points that module at a served version (only the Google
# Cloud scalers use it).
#
# Output: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/keda/<version>/bin/{keda,keda-adapter} and,
# beside them, crds/ (KEDA's CustomResourceDefinitions from the same module source).
# Idempotent: a binary is rebuilt only when missing or built from another pinned version.
# Cold: ~25 min for the operator and ~3 min for the adapter on 2 cores, and several GB of Go
# build cache; instant when cached. Prints the bin dir as the last line of stdout.
set -euo pipefail

KEDA_VERSION="${KEDA_VERSION:-v2.21.1}"
KEDA_GO="${KEDA_GO:-go1.27.4}"
GENPROTO_PIN="${GENPROTO_PIN:-v0.0.0-20250603155806-513f23925822}"
BUILD_JOBS="${BUILD_JOBS:-$(nproc)}"

CACHE_ROOT="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/keda/${KEDA_VERSION}"
BIN="${CACHE_ROOT}/bin"
mkdir -p "${BIN}"

log() { printf '[keda-build] %s\n' "$*" >&2; }

exec 9>"${CACHE_ROOT}/.build.lock"
flock 9

up_to_date() {
  [[ -x "${BIN}/$1" && "$(cat "${BIN}/.$1.version" 2>/dev/null)" == "${KEDA_VERSION}" ]]
}

if up_to_date keda && up_to_date keda-adapter && [[ -f "${BIN}/crds/keda.sh_scaledobjects.yaml" ]]; then
  log "keda ${KEDA_VERSION}: up to date"
  echo "${BIN}"
  exit 0
fi

export GOTOOLCHAIN="${KEDA_GO}"
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"

start=${SECONDS}
src="$(GOFLAGS= go mod download -json "github.com/kedacore/keda/v2@${KEDA_VERSION}" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "${src}" ]] || { log "cannot find the module source of keda ${KEDA_VERSION}"; exit 1; }

WORK="${CACHE_ROOT}/src"
rm -rf "${WORK}"
cp -r "${src}" "${WORK}"
chmod -R u+w "${WORK}"
trap 'rm -rf "${WORK}"' EXIT
printf '\nreplace google.golang.org/genproto => google.golang.org/genproto %s\n' "${GENPROTO_PIN}" \
  >>"${WORK}/go.mod"

pkg="github.com/kedacore/keda/v2/version"
ldflags="-s -w -X ${pkg}.Version=${KEDA_VERSION#v} -X ${pkg}.GitCommit=module-proxy"
build() {
  local name="$1" cmd="$2" t=${SECONDS}
  if up_to_date "${name}"; then log "${name}: up to date"; return 0; fi
  log "building ${name} (${cmd}) with ${GOTOOLCHAIN} ..."
  (cd "${WORK}" && go build -p "${BUILD_JOBS}" -trimpath -ldflags "${ldflags}" -o "${BIN}/${name}.new" "./${cmd}")
  mv -f "${BIN}/${name}.new" "${BIN}/${name}"
  printf '%s\n' "${KEDA_VERSION}" >"${BIN}/.${name}.version"
  log "built ${name} in $((SECONDS - t))s"
}
build keda cmd/operator
build keda-adapter cmd/adapter
rm -rf "${BIN}/crds"
mkdir -p "${BIN}/crds"
cp "${WORK}"/config/crd/bases/*.yaml "${BIN}/crds/"
log "done in $((SECONDS - start))s"
echo "${BIN}"
