#!/usr/bin/env bash
# Installs everything reportfarm needs on a fresh Debian machine, idempotently:
# Debian's Chromium (its headless shell and the full browser) with CJK fonts, Prometheus,
# poppler-utils, npm; a project virtualenv .venv/ (git-ignored) holding this package with its dev
# extras; Azurite from npm into tools/ (git-ignored).
# The system Python is never changed (on Debian/Ubuntu it is "externally managed", PEP 668): the
# only thing asked of it is `python3 -m venv`. Use the result as .venv/bin/reportfarm, or
# `source .venv/bin/activate`. Safe to run again: each step skips what is present.
# Needs: Python >= 3.11 (REPORTFARM_PYTHON names another interpreter), apt as root or via sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
apt_updated=""
apt_install() {
  echo "bootstrap: apt-get install $*"
  if [ -z "$apt_updated" ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need_apt=()
command -v chromium-headless-shell >/dev/null || need_apt+=(chromium-headless-shell)
# the full browser: what the benchmarks compare the headless shell with (and Gotenberg's image ships)
command -v chromium >/dev/null || need_apt+=(chromium)
[ -d /usr/share/fonts/opentype/noto ] || need_apt+=(fonts-noto-cjk)
# Noto Sans and its script faces: the signature stamp and the watermark (finishing/fonts.py)
[ -f /usr/share/fonts/truetype/noto/NotoSans-Regular.ttf ] || need_apt+=(fonts-noto-core)
[ -d /usr/share/fonts/truetype/wqy ] || need_apt+=(fonts-wqy-microhei)
command -v prometheus >/dev/null || need_apt+=(prometheus)
command -v pdftotext >/dev/null || need_apt+=(poppler-utils)
command -v npm >/dev/null || need_apt+=(npm)
if ((${#need_apt[@]})); then
  apt_install "${need_apt[@]}"
fi

# The project virtualenv. Debian and Ubuntu ship `venv` (ensurepip) as a separate package.
PYTHON="${REPORTFARM_PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: reportfarm needs Python >= 3.11; $PYTHON is $("$PYTHON" -V 2>&1)." >&2
  echo "bootstrap: install a newer one and set REPORTFARM_PYTHON=/path/to/python3.X" >&2
  exit 1
fi
VENV=.venv
if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' 2>/dev/null; then
  echo "bootstrap: creating the virtualenv $VENV/"
  rm -rf "$VENV"
  if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    apt_install "python${version}-venv" || apt_install python3-venv
    "$PYTHON" -m venv "$VENV"
  fi
fi

# Reinstall whenever pyproject.toml or the extras changed since the last install (a stamp in the
# venv). REPORTFARM_EXTRAS: "dev" (default: everything the tests need) or "renderer" (just the farm).
EXTRAS="${REPORTFARM_EXTRAS:-dev}"
stamp="$VENV/.reportfarm-$(cat pyproject.toml <(echo "$EXTRAS") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || ! "$VENV/bin/python" -c "import reportfarm, playwright" 2>/dev/null; then
  echo "bootstrap: pip install -e .[$EXTRAS] into $VENV/ (minutes the first time; pip's cache makes reinstalls fast)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
  rm -f "$VENV"/.reportfarm-* && touch "$stamp"
fi

AZURITE_VERSION=3.37.0
if [ ! -x tools/node_modules/.bin/azurite ]; then
  echo "bootstrap: npm install azurite@${AZURITE_VERSION} into tools/"
  mkdir -p tools
  (cd tools && [ -f package.json ] || echo '{"private":true}' > package.json)
  npm install --prefix tools --no-audit --no-fund --silent "azurite@${AZURITE_VERSION}"
fi
echo "bootstrap: ready ($VENV/bin/reportfarm; or: source $VENV/bin/activate)"
