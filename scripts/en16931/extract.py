"""EN 16931's CII rules (XSLT) out of Mustang's command-line jar, fetched from Maven Central when
not given: used by install.sh (on the cached jar) and by Dockerfile.renderer's build stage.

Usage: extract.py OUT [JAR]   (no JAR: download Mustang-CLI VERSION and check its SHA-256)
"""

from __future__ import annotations

import hashlib
import io
import sys
import urllib.request
import zipfile

VERSION = "2.26.0"
SHA256 = "42d7868cb68264874a7b8cab4c3587b03b23ccc7cd72373da917f66758bb9736"
URL = (
    "https://repo1.maven.org/maven2/org/mustangproject/Mustang-CLI/"
    f"{VERSION}/Mustang-CLI-{VERSION}.jar"
)
ENTRY = "xslt/en16931schematron/EN16931-CII-validation.xslt"


def main(out: str, jar: str | None = None) -> None:
    if jar is None:
        with urllib.request.urlopen(URL, timeout=300) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != SHA256:
            raise SystemExit(f"{URL}: SHA-256 mismatch")
        archive = zipfile.ZipFile(io.BytesIO(data))
    else:
        archive = zipfile.ZipFile(jar)
    with archive, open(out, "wb") as target:
        target.write(archive.read(ENTRY))


if __name__ == "__main__":
    main(*sys.argv[1:3])
