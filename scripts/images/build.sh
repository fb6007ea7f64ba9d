#!/usr/bin/env bash
# Build the container images from the repository's Dockerfiles, without a Docker engine or a
# registry: podman (runc, cgroupfs) and a local Debian base image in the role of
# python:3.11-slim-bookworm, passed as PYTHON_IMAGE (the only build argument that differs from
# `docker build`).
#
#   scripts/images/build.sh [renderer] [operator] [gateway] [pause]   (default: all four)
#
# Caches under ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/images:
#   base-<key>.tar          the mmdebstrap rootfs (key: suite, packages, this script's recipe)
#   <name>-<key>.oci.tar    each image as an OCI archive (key: the base, the Dockerfile and every
#                           file of the build context), ready for `ctr images import`
# An image is rebuilt only when its key changes; a cached archive is loaded back into podman's
# storage when podman lost it. Prints one line per image to stdout: NAME REFERENCE ARCHIVE SIZE.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
CACHE="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/images"
SUITE="${BASE_SUITE:-bookworm}"
MIRROR="${BASE_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${BASE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
# python:3.11-slim-bookworm's role: Python 3.11 with venv/pip (`python` on PATH), apt, certificates.
BASE_PACKAGES="python3,python3-venv,python3-pip,python-is-python3,ca-certificates"
# Tagged with its key (ensure_base): builds of other recipes on the same machine (other checkouts)
# share podman's storage and must not swap the base under this one.
BASE_NAME="localhost/reportfarm-python"
export CONTAINERS_CONF="${CONTAINERS_CONF:-${HERE}/containers.conf}"
mkdir -p "${CACHE}"

log() { printf '[images] %s\n' "$*" >&2; }

exec 9>"${CACHE}/.build.lock"
flock 9

# key FILE...: a short content hash of paths and contents.
key() {
  local f
  for f in "$@"; do printf '%s\n' "${f#"${ROOT}"/}"; sha256sum <"${f}"; done | sha256sum | cut -c1-16
}

# The files a Dockerfile's build context sends (what .dockerignore lets through), sorted.
context_files() {
  (cd "${ROOT}" && find pyproject.toml README.md reportfarm renderer operator gateway \
    examples/templates scripts/en16931/extract.py scripts/images/renderer-dpkg-excludes -type f \
    ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' |
    LC_ALL=C sort) |
    sed "s#^#${ROOT}/#"
}

# Build-time only: the host's CA bundle and pip/apt settings reach RUN steps through read-only
# volumes, so a build behind a TLS-inspecting proxy works without baking them into a layer.
build_mounts() {
  local mounts=() f
  for f in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
    [[ -f "${f}" ]] && mounts+=(--volume "${f}:${f}:ro")
  done
  printf '%s\n' "${mounts[@]}"
}

ensure_base() {
  local recipe base_key tar start
  recipe="${SUITE} ${MIRROR} ${SECURITY} ${BASE_PACKAGES} v2"
  base_key="$(printf '%s' "${recipe}" | sha256sum | cut -c1-16)"
  tar="${CACHE}/base-${base_key}.tar"
  if [[ ! -f "${tar}" ]]; then
    start=${SECONDS}
    log "making the base rootfs (${SUITE}: ${BASE_PACKAGES}) with mmdebstrap ..."
    # As Debian's slim images (python:*-slim's base): no documentation, man pages or translations
    # in this or any later package (dpkg's path-exclude stays in the image), and /usr merged by
    # the hook rather than by the usrmerge package, which would leave Perl (50 MB) behind.
    mmdebstrap --variant=minbase --format=tar --include="${BASE_PACKAGES}" \
      --aptopt='Acquire::Retries "3"' \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      "${SUITE}" "${tar}.part" \
      "deb ${MIRROR} ${SUITE} main" "deb ${MIRROR} ${SUITE}-updates main" \
      "deb ${SECURITY} ${SUITE}-security main" >&2
    mv -f "${tar}.part" "${tar}"
    log "base rootfs in $((SECONDS - start))s"
  fi
  BASE_REF="${BASE_NAME}:3.11-${SUITE}-${base_key}"
  if [[ "$(podman image inspect --format '{{index .Labels "reportfarm.key"}}' "${BASE_REF}" \
    2>/dev/null)" != "${base_key}" ]]; then
    podman import --change "LABEL reportfarm.key=${base_key}" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["python3"]' "${tar}" "${BASE_REF}" >&2
  fi
  BASE_KEY="${base_key}"
}

# prune NAME KEY: drop the archives and podman tags of NAME's other keys (older builds).
prune() {
  local old tag
  for old in "${CACHE}/$1"-*.oci.tar; do
    [[ "${old}" == "${CACHE}/$1-$2.oci.tar" ]] || rm -f "${old}"
  done
  while read -r tag; do
    [[ "${tag}" == *":$2" || "${tag}" == *":latest" ]] || podman rmi --force "${tag}" >/dev/null 2>&1 || true
  done < <(podman images --format '{{.Repository}}:{{.Tag}}' "localhost/reportfarm-$1")
}

# build_image NAME DOCKERFILE: build (or reuse) localhost/reportfarm-NAME:<key>.
build_image() {
  local name="$1" dockerfile="${ROOT}/$2" image_key ref archive start
  mapfile -t files < <(context_files)
  image_key="$(printf '%s %s\n' "${BASE_KEY}" "$(key "${dockerfile}" "${ROOT}/.dockerignore" \
    "${files[@]}")" | sha256sum | cut -c1-16)"
  ref="localhost/reportfarm-${name}:${image_key}"
  archive="${CACHE}/${name}-${image_key}.oci.tar"
  if [[ -f "${archive}" ]]; then
    podman image exists "${ref}" || podman load --quiet --input "${archive}" >&2
    log "${name}: cached (${image_key})"
  else
    start=${SECONDS}
    log "${name}: building ${ref} from $2 ..."
    mapfile -t mounts < <(build_mounts)
    podman build --network host --pull=never --layers \
      --build-arg "PYTHON_IMAGE=${BASE_REF}" "${mounts[@]}" \
      --label "reportfarm.key=${image_key}" \
      -f "${dockerfile}" -t "${ref}" "${ROOT}" >&2
    podman save --format oci-archive --output "${archive}.part" "${ref}" >&2
    mv -f "${archive}.part" "${archive}"
    log "${name}: built in $((SECONDS - start))s"
    prune "${name}" "${image_key}"
  fi
  podman tag "${ref}" "localhost/reportfarm-${name}:latest"
  printf '%s %s %s %s\n' "${name}" "${ref}" "${archive}" \
    "$(podman image inspect --format '{{.Size}}' "${ref}")"
}


wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(renderer operator gateway pause)
total=${SECONDS}
for name in "${wanted[@]}"; do
  case "${name}" in
  renderer | operator | gateway)
    ensure_base
    build_image "${name}" "Dockerfile.${name}"
    ;;
  pause) "${HERE}/pause.sh" ;;  # the node's sandbox image
  *) log "unknown image ${name} (renderer, operator, gateway, pause)" && exit 2 ;;
  esac
done
log "done in $((SECONDS - total))s"
