"""An image's size per layer, and how long a node would take to pull it.

    python scripts/images/layers.py ARCHIVE [--bandwidth MBPS ...]

ARCHIVE is an OCI archive of ``scripts/images/build.sh`` (its third column). Per layer: the step
that made it (from the image's history), its size unpacked (the layer's tar, what the node's disk
holds) and compressed (the gzip blob a registry serves: what a pull transfers). The pull estimate
is the compressed size over each bandwidth; unpacking on the node comes on top of it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tarfile
from typing import IO, Any

MB = 1e6
CHUNK = 1 << 20


def _member(archive: tarfile.TarFile, digest: str) -> IO[bytes]:
    found = archive.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
    if found is None:
        raise SystemExit(f"{digest} is not in the archive")
    return found


def _json(archive: tarfile.TarFile, digest: str) -> Any:
    return json.load(_member(archive, digest))


def _unpacked(blob: IO[bytes]) -> int:
    size = 0
    with gzip.GzipFile(fileobj=blob) as stream:
        while chunk := stream.read(CHUNK):
            size += len(chunk)
    return size


def layers(path: str) -> list[dict[str, Any]]:
    """Each layer: ``step``, ``unpacked`` and ``compressed`` bytes."""
    with tarfile.open(path) as archive:
        index = json.load(archive.extractfile("index.json") or [])
        manifest = _json(archive, index["manifests"][0]["digest"])
        config = _json(archive, manifest["config"]["digest"])
        steps = [h.get("created_by", "") for h in config["history"] if not h.get("empty_layer")]
        found = []
        for step, layer in zip(steps, manifest["layers"], strict=True):
            found.append(
                {
                    "step": " ".join(step.replace("/bin/sh -c #(nop)", "").split())[:70],
                    "unpacked": _unpacked(_member(archive, layer["digest"])),
                    "compressed": layer["size"],
                }
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive")
    parser.add_argument(
        "--bandwidth", type=float, action="append", help="MB/s of the pull (default: 50 and 125)"
    )
    args = parser.parse_args()
    found = layers(args.archive)
    print("| layer | unpacked MB | compressed MB |\n|---|---|---|")
    for layer in found:
        print(
            f"| `{layer['step']}` | {layer['unpacked'] / MB:.0f} | {layer['compressed'] / MB:.0f} |"
        )
    unpacked = sum(layer["unpacked"] for layer in found)
    compressed = sum(layer["compressed"] for layer in found)
    print(f"| **total** | {unpacked / MB:.0f} | {compressed / MB:.0f} |")
    for bandwidth in args.bandwidth or [50.0, 125.0]:
        print(f"pull at {bandwidth:g} MB/s: {compressed / MB / bandwidth:.1f} s (+ unpacking)")


if __name__ == "__main__":
    main()
