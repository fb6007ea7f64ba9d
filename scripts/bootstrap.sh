#!/usr/bin/env bash
# Installs everything reportfarm needs on a fresh Debian machine, idempotently:
# Debian's Chromium (+ CJK fonts), Prometheus, poppler-utils; the Python package with its dev extras;
# Azurite from npm into tools/ (git-ignored). Safe to run again: each step skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
[ -d /usr/share/fonts/opentype/noto ] || need_apt+=(fonts-noto-cjk)
[ -d /usr/share/fonts/truetype/wqy ] || need_apt+=(fonts-wqy-microhei)
command -v prometheus >/dev/null || need_apt+=(prometheus)
command -v pdftotext >/dev/null || need_apt+=(poppler-utils)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "bootstrap: apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Reinstall whenever pyproject.toml changed since the last install (a stamp in tools/).
mkdir -p tools
stamp="tools/.pip-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ] || ! python3 -c "import reportfarm, playwright, kopf" 2>/dev/null; then
  echo "bootstrap: pip install -e .[dev]"
  python3 -m pip install -q --root-user-action=ignore -e ".[dev]"
  rm -f tools/.pip-* && touch "$stamp"
fi

AZURITE_VERSION=3.37.0
if [ ! -x tools/node_modules/.bin/azurite ]; then
  echo "bootstrap: npm install azurite@${AZURITE_VERSION} into tools/"
  mkdir -p tools
  (cd tools && [ -f package.json ] || echo '{"private":true}' > package.json)
  npm install --prefix tools --no-audit --no-fund --silent "azurite@${AZURITE_VERSION}"
fi
echo "bootstrap: ready"
