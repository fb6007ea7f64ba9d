#!/usr/bin/env bash
# Mustang, the ZUGFeRD community's Factur-X / ZUGFeRD validator, for the Factur-X tests
# (tests/finishing/mustang.py): its command line as Maven Central publishes it,
# org.mustangproject:Mustang-CLI (one jar, ~60 MB). It checks an e-invoice PDF as a whole: PDF/A-3
# (with its own veraPDF), the Factur-X XMP, the XML against the profile's XSD and EN 16931's
# business rules (Schematron), and its arithmetic. Run by the system's Java, cached by
# scripts/maven-jar.sh in ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/mustang/<version>/.
#
# Usage: install.sh
#   MUSTANG_VERSION picks another version (checked by Maven's checksum only).
# The launcher takes Mustang's options: mustang --action validate --source FILE
# Prints the launcher's path as the last line of stdout.
set -euo pipefail

VERSION="${MUSTANG_VERSION:-2.26.0}"
# sha256 of org.mustangproject:Mustang-CLI:2.26.0's jar, as first fetched from Maven Central.
PINNED_VERSION=2.26.0
PINNED_SHA256=42d7868cb68264874a7b8cab4c3587b03b23ccc7cd72373da917f66758bb9736

sha=""
if [ "$VERSION" = "$PINNED_VERSION" ]; then sha="$PINNED_SHA256"; fi
bash "$(dirname "$0")/../maven-jar.sh" mustang "org.mustangproject:Mustang-CLI:$VERSION" "$sha" |
  tail -n 1
