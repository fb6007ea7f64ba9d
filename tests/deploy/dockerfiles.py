"""Just enough of a Dockerfile and .dockerignore reader for the image tests (no Docker engine here).

- :func:`instructions`: a Dockerfile as (INSTRUCTION, arguments) pairs, continuations joined,
  comments and parser directives dropped.
- :func:`ignored`: whether .dockerignore keeps a path out of the build context (last match wins,
  ``!`` re-includes, a pattern also covers everything under a matching directory).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import shlex
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper-case instruction: FROM, RUN, COPY, ..."""
    args: str
    """Everything after the keyword, continuations joined with a space."""

    def words(self) -> list[str]:
        """Exec form (a JSON array) or shell words."""
        if self.args.startswith("["):
            return list(json.loads(self.args))
        return shlex.split(self.args)


def instructions(path: Path) -> list[Instruction]:
    result: list[Instruction] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        keyword, _, args = line.partition(" ")
        result.append(Instruction(keyword.upper(), args.strip()))
    return result


@dataclasses.dataclass(frozen=True)
class Copy:
    sources: list[str]
    destination: str
    from_stage: str | None
    """``--from=`` (a build stage or image): its sources are not in the build context."""


def copies(path: Path) -> list[Copy]:
    found = []
    for instruction in instructions(path):
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        words = instruction.words()
        flags = [w for w in words if w.startswith("--")]
        paths = [w for w in words if not w.startswith("--")]
        from_stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        found.append(Copy(paths[:-1], paths[-1], from_stage))
    return found


def _matches(path: str, pattern: str) -> bool:
    pattern = pattern.strip("/")
    if pattern == "**":
        return True
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes) or (
        pattern.startswith("**/") and any(fnmatch.fnmatchcase(p, pattern[3:]) for p in parts)
    )


def ignored(path: str, dockerignore: Path) -> bool:
    """True when ``path`` (relative to the context root) is left out of the build context."""
    verdict = False
    for raw in dockerignore.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if _matches(path.strip("/"), line.lstrip("!")):
            verdict = not negated
    return verdict
