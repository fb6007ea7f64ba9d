#!/usr/bin/env bash
# Build Gotenberg (the HTML-to-PDF server users pick instead of us) from source, for the side by
# side benchmark (`reportfarm bench gotenberg`): only its api, chromium, pdfengines, pdfcpu and
# prometheus modules, plus the pdfcpu binary its PDF engine module needs.
#
# Usage: build.sh [SOURCE]
#   SOURCE: a Gotenberg git repository (a clone or a bare mirror: its newest v8 release tag is
#   built, never a commit past it) or a plain source tree (then GOTENBERG_VERSION names it).
#   Without SOURCE (or GOTENBERG_SRC): the newest version the Go module proxy serves (the proxy
#   lags the repository's releases; say which version you compared against).
#
# Why a custom main: the stock `gotenberg` (and `gotenberg-chromium`) binaries refuse to start
# without LibreOffice, pdftk, qpdf and ExifTool; the Chromium module only needs one PDF engine,
# and pdfcpu is a Go module, so everything here comes from the Go module proxy.
#
# Output: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/gotenberg/<version>/ with `gotenberg`,
# `pdfcpu`, `chromium-hyphen-data/` (Gotenberg's Chromium module insists on that folder) and a
# VERSION file. Idempotent: a cached version is not rebuilt. Go's module and build caches stay at
# their defaults. Prints the version to stderr and the folder as the last line of stdout.
set -euo pipefail

MODULE="github.com/gotenberg/gotenberg/v8"
# The pdfcpu release the Gotenberg Dockerfile pins, when the source does not say.
PDFCPU_FALLBACK="${PDFCPU_FALLBACK:-v0.15.0}"
# The newest version the Go module proxy serves when it will not list them (checked: v8.20.1).
GOTENBERG_PROXY_VERSION="${GOTENBERG_PROXY_VERSION:-v8.20.1}"
SOURCE="${1:-${GOTENBERG_SRC:-}}"
CACHE="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/gotenberg"
mkdir -p "${CACHE}"

log() { printf '[gotenberg-build] %s\n' "$*" >&2; }

# The proxy has no checksum entries for gotenberg's newer versions.
export GONOSUMDB="${GONOSUMDB:+${GONOSUMDB},}github.com/gotenberg"
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
export CGO_ENABLED=0

WORK="$(mktemp -d "${CACHE}/work.XXXXXX")"
trap 'chmod -R u+w "${WORK}" 2>/dev/null; rm -rf "${WORK}"' EXIT
SRC="${WORK}/src"

# fetch_source: fill ${SRC} and set VERSION (without the leading v).
if [[ -n "${SOURCE}" ]] && git -C "${SOURCE}" rev-parse --git-dir >/dev/null 2>&1; then
  TAG="$(git -C "${SOURCE}" tag --list 'v8.*' --sort=-v:refname | head -n 1)"
  [[ -n "${TAG}" ]] || { log "no v8 release tag in ${SOURCE}"; exit 1; }
  VERSION="${TAG#v}"
  log "source: ${SOURCE} at its newest release tag ${TAG}"
elif [[ -n "${SOURCE}" ]]; then
  [[ -f "${SOURCE}/go.mod" ]] || { log "${SOURCE} is not a Gotenberg source tree"; exit 1; }
  VERSION="${GOTENBERG_VERSION:-source}"
  VERSION="${VERSION#v}"
  log "source: the tree ${SOURCE}, named ${VERSION} (GOTENBERG_VERSION)"
else
  # The proxy may refuse to list the versions (it answers 403 here): then the pinned one.
  TAG="$(go list -m -versions "${MODULE}" 2>/dev/null | tr ' ' '\n' | grep '^v8\.' | sort -V |
    tail -n 1 || true)"
  TAG="${TAG:-${GOTENBERG_PROXY_VERSION}}"
  VERSION="${TAG#v}"
  log "source: ${MODULE} ${TAG} from the Go module proxy"
fi

OUT="${CACHE}/${VERSION}"
mkdir -p "${OUT}"
exec 9>"${OUT}/.build.lock"
flock 9
if [[ -x "${OUT}/gotenberg" && -x "${OUT}/pdfcpu" && "$(cat "${OUT}/VERSION" 2>/dev/null)" == "${VERSION}" ]]; then
  log "gotenberg ${VERSION}: up to date"
  echo "${OUT}"
  exit 0
fi

mkdir -p "${SRC}"
if [[ -n "${SOURCE}" ]] && git -C "${SOURCE}" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "${SOURCE}" archive "${TAG}" | tar -x -C "${SRC}"
elif [[ -n "${SOURCE}" ]]; then
  cp -R "${SOURCE}/." "${SRC}"
else
  dir="$(go mod download -json "${MODULE}@${TAG}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "${dir}" ]] || { log "cannot download ${MODULE}@${TAG}"; exit 1; }
  cp -R "${dir}/." "${SRC}"
  chmod -R u+w "${SRC}"
fi

# The custom main: Gotenberg's own cmd.Run with its standard modules (pkg/standard/imports.go of
# this very version: the module list changes between releases) less those that need LibreOffice,
# pdftk, qpdf or ExifTool.
mkdir -p "${SRC}/cmd/gotenberg-reportfarm"
{
  echo "// Gotenberg without the modules that need LibreOffice, pdftk, qpdf or ExifTool."
  echo "package main"
  echo
  echo "import ("
  echo "	gotenbergcmd \"${MODULE}/cmd\""
  grep -E '^[[:space:]]*_ "' "${SRC}/pkg/standard/imports.go" | grep -Ev '/(libreoffice|exiftool|pdftk|qpdf)'
  echo ")"
  echo
  echo "func main() { gotenbergcmd.Run() }"
} >"${SRC}/cmd/gotenberg-reportfarm/main.go"
grep -q '/modules/chromium"' "${SRC}/cmd/gotenberg-reportfarm/main.go" ||
  { log "no chromium module in ${SRC}/pkg/standard/imports.go"; exit 1; }
log "modules: $(sed -n 's#.*/pkg/modules/\(.*\)"$#\1#p' "${SRC}/cmd/gotenberg-reportfarm/main.go" | tr '\n' ' ')"

start=${SECONDS}
log "building gotenberg ${VERSION} with $(go version | cut -d' ' -f3) ..."
(
  cd "${SRC}"
  go build -mod=mod -trimpath -o "${WORK}/gotenberg" \
    -ldflags "-s -w -X '${MODULE}/cmd.Version=${VERSION}'" ./cmd/gotenberg-reportfarm
)
log "built gotenberg in $((SECONDS - start))s"

PDFCPU="$(sed -n 's/^ARG PDFCPU_VERSION=\(v[0-9.]*\)$/\1/p' "${SRC}/build/Dockerfile" 2>/dev/null | head -n 1)"
PDFCPU="${PDFCPU:-${PDFCPU_FALLBACK}}"
start=${SECONDS}
log "building pdfcpu ${PDFCPU} ..."
GOBIN="${WORK}/bin" go install -trimpath -ldflags "-s -w" "github.com/pdfcpu/pdfcpu/cmd/pdfcpu@${PDFCPU}"
log "built pdfcpu in $((SECONDS - start))s"

rm -rf "${OUT}/chromium-hyphen-data"
if [[ -d "${SRC}/build/chromium-hyphen-data" ]]; then
  cp -R "${SRC}/build/chromium-hyphen-data" "${OUT}/chromium-hyphen-data"
else
  mkdir -p "${OUT}/chromium-hyphen-data"
fi
mv -f "${WORK}/bin/pdfcpu" "${OUT}/pdfcpu"
mv -f "${WORK}/gotenberg" "${OUT}/gotenberg"
echo "${VERSION}" >"${OUT}/VERSION"
log "gotenberg ${VERSION} (pdfcpu ${PDFCPU}) in ${OUT}"
echo "${OUT}"
