#!/usr/bin/env bash
# Build the binaries of the real Kubernetes test control plane from Go modules:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, kubeconform;
# with the argument `node`, also the kubelet of a real node (scripts/node/).
#
# Output: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/kube/<k8s version>/bin/
# Idempotent: a binary is rebuilt only when missing or built from another pinned version
# (each binary has a `.<name>.version` stamp next to it). Go's own module and build caches
# (GOPATH, GOCACHE) stay at their defaults and are reused across runs.
# Prints the bin dir as the last line of stdout; progress and timings go to stderr.
set -euo pipefail

# Pinned versions; each can be overridden from the environment.
# v1.37.2 is the newest k8s.io/kubernetes release on the proxy and builds with Go 1.26.
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
KUBECONFORM_VERSION="${KUBECONFORM_VERSION:-v0.8.0}"
# Parallel compile jobs (the machines have 2 cores; more only costs memory).
BUILD_JOBS="${BUILD_JOBS:-$(nproc)}"

CACHE_ROOT="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/kube/${K8S_VERSION}"
BIN="${CACHE_ROOT}/bin"
mkdir -p "${BIN}"

log() { printf '[kube-build] %s\n' "$*" >&2; }

# One build at a time per version (pytest workers and a user's shell may race).
exec 9>"${CACHE_ROOT}/.build.lock"
flock 9

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

# up_to_date NAME VERSION: the binary exists and was built from VERSION.
up_to_date() {
  [[ -x "${BIN}/$1" && "$(cat "${BIN}/.$1.version" 2>/dev/null)" == "$2" ]]
}

stamp() { printf '%s\n' "$2" >"${BIN}/.$1.version"; }

# timed LABEL CMD...: run CMD, report how long it took.
timed() {
  local label="$1" start=${SECONDS}
  shift
  log "building ${label} ..."
  "$@"
  log "built ${label} in $((SECONDS - start))s"
}

# A throwaway wrapper module under the cache (removed on exit).
WORK="$(mktemp -d "${CACHE_ROOT}/work.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT

# kube_wrapper: write the wrapper module into ${WORK}/kubernetes (once) and set KUBE_LDFLAGS.
kube_wrapper() {
  local minor patch gomod dir="${WORK}/kubernetes"
  [[ -f "${dir}/go.mod" ]] && return 0
  minor="$(cut -d. -f2 <<<"${K8S_VERSION}")"
  patch="$(cut -d. -f3 <<<"${K8S_VERSION}")"
  # k8s.io/kubernetes replaces its staging modules with ./staging/... paths, which `go install`
  # refuses. Re-create those replaces against the published v0.<minor>.<patch> modules.
  gomod="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "${gomod}" ]] || { log "cannot find go.mod of k8s.io/kubernetes@${K8S_VERSION}"; exit 1; }
  mkdir -p "${dir}"
  {
    echo "module reportfarm.invalid/kubebuild"
    grep -E '^(go|godebug) ' "${gomod}"
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo "replace ("
    sed -n -E "s#^[[:space:]]*(k8s\.io/[^[:space:]]+) => \./staging/.*#\t\1 => \1 v0.${minor}.${patch}#p" \
      "${gomod}"
    echo ")"
  } >"${dir}/go.mod"
  log "wrapper go.mod has $(grep -c '=> k8s.io/' "${dir}/go.mod") staging replaces"
  local pkg="k8s.io/component-base/version"
  KUBE_LDFLAGS="-s -w -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1"
  KUBE_LDFLAGS+=" -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
}

# build_k8s NAME...: build k8s.io/kubernetes/cmd/NAME for each NAME into the bin dir.
build_k8s() {
  local dir="${WORK}/kubernetes" name packages=()
  kube_wrapper
  for name in "$@"; do packages+=("k8s.io/kubernetes/cmd/${name}"); done
  (
    cd "${dir}"
    go build -mod=mod -p "${BUILD_JOBS}" -trimpath -ldflags "${KUBE_LDFLAGS}" -o "${dir}/out/" \
      "${packages[@]}"
  )
  for name in "$@"; do
    mv -f "${dir}/out/${name}" "${BIN}/${name}"
    stamp "${name}" "${K8S_VERSION}"
  done
}

build_kubernetes() {
  build_k8s kube-apiserver kube-controller-manager kube-scheduler kubectl
}

build_etcd() {
  local dir="${WORK}/etcd"
  mkdir -p "${dir}"
  printf 'module reportfarm.invalid/etcdbuild\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" "${ETCD_VERSION}" >"${dir}/go.mod"
  (
    cd "${dir}"
    go build -mod=mod -p "${BUILD_JOBS}" -trimpath -ldflags "-s -w" -o "${dir}/etcd" \
      go.etcd.io/etcd/server/v3
  )
  mv -f "${dir}/etcd" "${BIN}/etcd"
  stamp etcd "${ETCD_VERSION}"
}

# go_install NAME PACKAGE VERSION [VERSION_VAR]: plain `go install` into the bin dir;
# VERSION_VAR is the Go variable the tool prints as its version (set with -X).
go_install() {
  local gobin="${WORK}/gobin-$1" ldflags="-s -w"
  if [[ -n "${4:-}" ]]; then ldflags+=" -X $4=$3"; fi
  GOBIN="${gobin}" go install -p "${BUILD_JOBS}" -trimpath -ldflags "${ldflags}" "$2@$3"
  mv -f "${gobin}/$1" "${BIN}/$1"
  stamp "$1" "$3"
}

# kwok has no built-in behaviour: it needs Stage objects. Ship the upstream "fast" set
# (node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete) next to the
# binary, collected from that kwok version's kustomize/stage/fast/kustomization.yaml.
build_kwok_stages() {
  local src out="${WORK}/kwok-stages.yaml" part file
  src="$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/kustomize/stage"
  : >"${out}"
  while read -r part; do
    while read -r file; do
      printf -- '---\n' >>"${out}"
      cat "${src}/${part}/${file}" >>"${out}"
    done < <(sed -n 's#^- \(.*\.yaml\)$#\1#p' "${src}/${part}/kustomization.yaml")
  done < <(sed -n 's#^- \.\./##p' "${src}/fast/kustomization.yaml")
  grep -q '^kind: Stage' "${out}" || { log "no kwok stages found under ${src}"; exit 1; }
  mv -f "${out}" "${BIN}/kwok-stages.yaml"
}

total_start=${SECONDS}
log "go: $(go version); jobs: ${BUILD_JOBS}; bin dir: ${BIN}"

k8s_ok=1
for name in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  up_to_date "${name}" "${K8S_VERSION}" || k8s_ok=0
done
if [[ ${k8s_ok} == 1 ]]; then log "kubernetes ${K8S_VERSION}: up to date"; else
  timed "kubernetes ${K8S_VERSION}" build_kubernetes
fi

# The kubelet only when asked (`build.sh node`): the control-plane tests do not need it.
if [[ " $* " == *" node "* ]]; then
  if up_to_date kubelet "${K8S_VERSION}"; then log "kubelet ${K8S_VERSION}: up to date"; else
    timed "kubelet ${K8S_VERSION}" build_k8s kubelet
  fi
fi

if up_to_date etcd "${ETCD_VERSION}"; then log "etcd ${ETCD_VERSION}: up to date"; else
  timed "etcd ${ETCD_VERSION}" build_etcd
fi

while read -r name pkg version version_var; do
  if up_to_date "${name}" "${version}"; then log "${name} ${version}: up to date"; else
    timed "${name} ${version}" go_install "${name}" "${pkg}" "${version}" "${version_var}"
  fi
done <<EOF
kwok sigs.k8s.io/kwok/cmd/kwok ${KWOK_VERSION}
helm helm.sh/helm/v3/cmd/helm ${HELM_VERSION} helm.sh/helm/v3/internal/version.version
kubeconform github.com/yannh/kubeconform/cmd/kubeconform ${KUBECONFORM_VERSION} main.version
EOF

if [[ ! -f "${BIN}/kwok-stages.yaml" || "${BIN}/.kwok.version" -nt "${BIN}/kwok-stages.yaml" ]]; then
  build_kwok_stages
fi

log "done in $((SECONDS - total_start))s"
echo "${BIN}"
