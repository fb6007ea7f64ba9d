#!/usr/bin/env bash
# veraPDF, the PDF Association's reference PDF/A validator, for the finishing tests
# (tests/finishing/verapdf.py): its command-line application as Maven Central publishes it,
# org.verapdf.apps:cli (one jar holding its dependencies, main class GreenfieldCliWrapper, the
# "greenfield" parser), fetched with Maven and run by the system's Java (17 here).
#
# Usage: install.sh
#   VERAPDF_VERSION picks another version of org.verapdf.apps:cli (its checksum is then only
#   Maven's, not the one pinned here).
#
# Output: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/verapdf/<version>/ with the jar, a
# launcher `verapdf` (veraPDF's own options: --flavour 2b --format json FILE...; its settings
# folder is kept beside it, not in ~/.verapdf) and VERSION. Idempotent and offline once cached:
# a cached version is neither fetched nor checked again. Needs java and mvn: Debian's
# default-jre-headless and maven are installed (apt, as root or with sudo) if either is missing.
# Prints the launcher's path as the last line of stdout.
set -euo pipefail

VERSION="${VERAPDF_VERSION:-1.30.2}"
# sha256 of org.verapdf.apps:cli:1.30.2's jar, as first fetched from Maven Central.
PINNED_VERSION=1.30.2
PINNED_SHA256=287cc9c9757f99dcff4a2d39b68268245b48103fb6af443162d5a29df2afa332
CACHE="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/verapdf"
TARGET="$CACHE/$VERSION"
JAR="cli-$VERSION.jar"

log() { printf '[verapdf-install] %s\n' "$*" >&2; }

if [ -x "$TARGET/verapdf" ] && [ -f "$TARGET/$JAR" ]; then
  log "veraPDF $VERSION is cached in $TARGET"
  echo "$TARGET/verapdf"
  exit 0
fi

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  log "apt-get install default-jre-headless maven (java or mvn is missing)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    default-jre-headless maven >/dev/null
fi

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
log "fetching org.verapdf.apps:cli:$VERSION from Maven Central (about 16 MB)"
# A throwaway local repository: the jar is all that is kept. -C: a bad checksum fails the fetch.
(cd "$WORK" && mvn -B -q -C -Dmaven.repo.local="$WORK/m2" dependency:copy \
  -Dartifact="org.verapdf.apps:cli:$VERSION" -DoutputDirectory="$WORK/dist") >&2
if [ "$VERSION" = "$PINNED_VERSION" ]; then
  echo "$PINNED_SHA256  $WORK/dist/$JAR" | sha256sum --check --quiet >&2
fi

cat >"$WORK/dist/verapdf" <<LAUNCHER
#!/bin/sh
# veraPDF $VERSION (org.verapdf.apps:cli from Maven Central), made by scripts/verapdf/install.sh.
here="\$(cd "\$(dirname "\$0")" && pwd)"
exec java -Duser.home="\$here/home" -XX:+UseSerialGC -jar "\$here/$JAR" "\$@"
LAUNCHER
chmod +x "$WORK/dist/verapdf"
echo "$VERSION" >"$WORK/dist/VERSION"
"$WORK/dist/verapdf" --version 2>/dev/null | grep -q "veraPDF $VERSION" || {
  log "the fetched veraPDF does not run: $("$WORK/dist/verapdf" --version 2>&1 | tail -n 3)"
  exit 1
}

# Another install may have finished meanwhile: keep the first, it is the same version.
mv -T "$WORK/dist" "$TARGET" 2>/dev/null || log "another install put $VERSION in place first"
log "veraPDF $VERSION in $TARGET"
echo "$TARGET/verapdf"
