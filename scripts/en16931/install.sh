#!/usr/bin/env bash
# EN 16931's business rules for CII invoices (the CEN schematron, compiled to XSLT by CEN's
# eInvoicing-EN16931 project, EUPL 1.2), which the renderer's facturx stage runs with saxonche:
# taken from Mustang's command-line jar on Maven Central (org.mustangproject:Mustang-CLI, which
# bundles it as xslt/en16931schematron/EN16931-CII-validation.xslt), fetched and checked by
# scripts/mustang/install.sh. The renderer image does the same in its build stage.
#
# Usage: install.sh
#   MUSTANG_VERSION picks another version (as for scripts/mustang/install.sh).
# Output: ${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/en16931/<mustang version>/
# EN16931-CII-validation.xslt; its path is the last line of stdout (REPORTFARM_EN16931_XSLT).
set -euo pipefail

launcher="$(bash "$(dirname "$0")/../mustang/install.sh" | tail -n 1)"
folder="$(dirname "$launcher")"
version="$(cat "$folder/VERSION")"
target="${REPORTFARM_CACHE:-$HOME/.cache/reportfarm}/en16931/$version"
if [ ! -s "$target/EN16931-CII-validation.xslt" ]; then
  mkdir -p "$target"
  jar="$(ls "$folder"/Mustang-CLI-*.jar)"
  python3 "$(dirname "$0")/extract.py" "$target/EN16931-CII-validation.xslt.part" "$jar"
  mv "$target/EN16931-CII-validation.xslt.part" "$target/EN16931-CII-validation.xslt"
  echo "[en16931-install] extracted EN 16931's CII rules from Mustang $version" >&2
fi
echo "$target/EN16931-CII-validation.xslt"
