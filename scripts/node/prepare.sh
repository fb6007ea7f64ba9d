#!/usr/bin/env bash
# Everything the node tests (tests/node, marker `node`) need, installed, built and cached:
#   - Debian's podman, buildah, runc, containerd, CNI plugins, mmdebstrap (apt, as root);
#   - the kubelet, built beside the control plane by scripts/kube/build.sh node;
#   - the images: renderer, operator, gateway and the node's pause image
#     (scripts/images/build.sh, cached in ~/.cache/reportfarm/images by content).
# Idempotent and fast when warm. Then run the tests with REPORTFARM_NODE_TESTS=1:
#   bash scripts/node/prepare.sh && REPORTFARM_NODE_TESTS=1 python3 -m pytest -m node
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '[node-prepare] %s\n' "$*" >&2; }
start=${SECONDS}

packages=(podman buildah runc containerd containernetworking-plugins mmdebstrap uidmap
  poppler-utils iproute2)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("${package}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

bash scripts/kube/build.sh node >/dev/null
bash scripts/images/build.sh >&2
log "ready in $((SECONDS - start))s"
