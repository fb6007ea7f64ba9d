#!/usr/bin/env bash
# veraPDF, the PDF Association's reference PDF/A validator, for the finishing tests
# (tests/finishing/verapdf.py): its command-line application as Maven Central publishes it,
# org.verapdf.apps:cli (one jar holding its dependencies, main class GreenfieldCliWrapper, the
# "greenfield" parser), run by the system's Java (17 here), cached by scripts/maven-jar.sh in
# ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/verapdf/<version>/.
#
# Usage: install.sh
#   VERAPDF_VERSION picks another version (its jar is then checked by Maven's checksum only,
#   not also by the sha256 pinned here).
# The launcher takes veraPDF's own options: verapdf --flavour 2b --format json FILE...
# Prints the launcher's path as the last line of stdout.
set -euo pipefail

VERSION="${VERAPDF_VERSION:-1.30.2}"
# sha256 of org.verapdf.apps:cli:1.30.2's jar, as first fetched from Maven Central.
PINNED_VERSION=1.30.2
PINNED_SHA256=287cc9c9757f99dcff4a2d39b68268245b48103fb6af443162d5a29df2afa332

sha=""
if [ "$VERSION" = "$PINNED_VERSION" ]; then sha="$PINNED_SHA256"; fi
launcher="$(bash "$(dirname "$0")/../maven-jar.sh" verapdf "org.verapdf.apps:cli:$VERSION" "$sha" |
  tail -n 1)"
if ! "$launcher" --version 2>/dev/null | grep -q "veraPDF $VERSION"; then
  echo "[verapdf-install] $launcher does not run: $("$launcher" --version 2>&1 | tail -n 3)" >&2
  exit 1
fi
echo "$launcher"
