#!/usr/bin/env bash
# Build the node's sandbox image localhost/reportfarm-pause:<key> from pause/pause.go: one static
# binary in an empty image, saved as an OCI archive for `ctr images import`.
# Cache: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/images/pause-<key>.oci.tar (key: the source
# and the Go version). Prints NAME REFERENCE ARCHIVE SIZE like build.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/images"
export CONTAINERS_CONF="${CONTAINERS_CONF:-${HERE}/containers.conf}"
mkdir -p "${CACHE}"

key="$({ cat "${HERE}/pause/pause.go" "${HERE}/pause.sh"; go env GOVERSION; } | sha256sum | cut -c1-16)"
ref="localhost/reportfarm-pause:${key}"
archive="${CACHE}/pause-${key}.oci.tar"
if [[ ! -f "${archive}" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  (cd "${work}" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o pause "${HERE}/pause/pause.go")
  container="$(buildah from scratch)"
  buildah copy "${container}" "${work}/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "${container}"
  buildah commit --quiet "${container}" "${ref}" >/dev/null
  buildah rm "${container}" >/dev/null
  podman save --format oci-archive --output "${archive}.part" "${ref}" >&2
  mv -f "${archive}.part" "${archive}"
fi
podman image exists "${ref}" || podman load --quiet --input "${archive}" >&2
printf 'pause %s %s %s\n' "${ref}" "${archive}" "$(podman image inspect --format '{{.Size}}' "${ref}")"
