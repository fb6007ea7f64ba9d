#!/usr/bin/env bash
# A Java command-line tool published on Maven Central as one jar holding its dependencies, fetched
# into the reportfarm cache with a launcher: the test validators (scripts/verapdf/install.sh,
# scripts/mustang/install.sh) use it.
#
# Usage: maven-jar.sh NAME GROUP:ARTIFACT:VERSION [SHA256]
#   SHA256: the jar's, checked when given (a wrapper pins the one of its default version).
#
# Output: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/NAME/VERSION/ with the jar, a launcher NAME
# (java -jar, with the tool's settings folder kept beside it instead of in the home folder) and
# VERSION. Idempotent and offline once cached: a cached version is neither fetched nor checked
# again. Needs java and mvn: Debian's default-jre-headless and maven are installed (apt, as root
# or with sudo) if either is missing. Prints the launcher's path as the last line of stdout.
set -euo pipefail

NAME="$1"
COORDINATES="$2"
SHA256="${3:-}"
VERSION="${COORDINATES##*:}"
ARTIFACT="${COORDINATES#*:}"
ARTIFACT="${ARTIFACT%%:*}"
JAR="$ARTIFACT-$VERSION.jar"
CACHE="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/$NAME"
TARGET="$CACHE/$VERSION"

log() { printf '[%s-install] %s\n' "$NAME" "$*" >&2; }

if [ -x "$TARGET/$NAME" ] && [ -f "$TARGET/$JAR" ]; then
  log "$COORDINATES is cached in $TARGET"
  echo "$TARGET/$NAME"
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
log "fetching $COORDINATES from Maven Central"
# A throwaway local repository: the jar is all that is kept. -C: a bad checksum fails the fetch.
(cd "$WORK" && mvn -B -q -C -Dmaven.repo.local="$WORK/m2" dependency:copy \
  -Dartifact="$COORDINATES" -DoutputDirectory="$WORK/dist") >&2
if [ -n "$SHA256" ]; then
  echo "$SHA256  $WORK/dist/$JAR" | sha256sum --check --quiet >&2
fi

cat >"$WORK/dist/$NAME" <<LAUNCHER
#!/bin/sh
# $COORDINATES from Maven Central, made by scripts/maven-jar.sh.
here="\$(cd "\$(dirname "\$0")" && pwd)"
exec java -Duser.home="\$here/home" -XX:+UseSerialGC -jar "\$here/$JAR" "\$@"
LAUNCHER
chmod +x "$WORK/dist/$NAME"
echo "$VERSION" >"$WORK/dist/VERSION"

# Another install may have finished meanwhile: keep the first, it is the same jar.
mv -T "$WORK/dist" "$TARGET" 2>/dev/null || log "another install put $VERSION in place first"
log "$COORDINATES in $TARGET"
echo "$TARGET/$NAME"
