"""The README stays a front page: at most 200 lines, the two commands as CI and a newcomer run
them, the site's address, and every relative link (and image) resolving to a file of the repo,
its anchor to a heading there. The manual is the site (docs/); a README growing back into one, or
a page moved without its link, fails here. Pure file reads: well under a second.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from markdown.extensions import toc

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 200
# The two commands: the main job and the tests (.ci/run runs the second, see below).
COMMANDS = (
    "bash scripts/bootstrap.sh && .venv/bin/reportfarm up --out out",
    "bash scripts/test.sh",
)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def site_url() -> str:
    """mkdocs.yml's site_url (read as text: its ``!!python/name:`` tags need no loader)."""
    found = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    assert found, "mkdocs.yml names no site_url"
    return found.group(1)


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings, as Python-Markdown's toc (mkdocs) makes them."""
    text = _FENCE.sub("", page.read_text())
    titles = re.findall(r"^#+ (.+?)\s*$", text, re.MULTILINE)
    return {toc.slugify(re.sub(r"[`*]|\]\([^)]*\)|\[", "", title), "-") for title in titles}


def front_page_faults(text: str, *, root: Path) -> list[str]:
    """What keeps ``text`` (a README at ``root``) from being the front page; empty when none."""
    faults: list[str] = []
    if (lines := len(text.splitlines())) > MAX_LINES:
        faults.append(f"{lines} lines, more than {MAX_LINES}: the manual belongs on the site")
    blocks = "\n".join(re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL))
    faults += [f"the command {c!r} is not in a bash block" for c in COMMANDS if c not in blocks]
    if site_url() not in text:
        faults.append(f"no link to the site, {site_url()}")
    for target in _LINK.findall(_FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not this test's to fetch
        path, _, anchor = target.partition("#")
        file = (root / path) if path else root / "README.md"
        if not file.is_file():
            faults.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            faults.append(f"{target}: no heading #{anchor} in {path}")
    return faults


def test_the_readme_is_a_front_page() -> None:
    assert front_page_faults((ROOT / "README.md").read_text(), root=ROOT) == []


def test_ci_runs_the_test_command_the_readme_names() -> None:
    """.ci/run runs the README's second command (scripts/test.sh), so CI tests what it says."""
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^exec bash scripts/test\.sh$", run, re.MULTILINE), run


@pytest.mark.parametrize(
    ("change", "said"),
    [
        pytest.param(lambda text: text + "more\n" * MAX_LINES, "more than 200", id="too-long"),
        pytest.param(
            lambda text: text.replace("bash scripts/test.sh\n", "make test\n"),
            "'bash scripts/test.sh'",
            id="no-test-command",
        ),
        pytest.param(
            lambda text: text + "\n[gone](docs/no-such-page.md)\n",
            "no file docs/no-such-page.md",
            id="broken-link",
        ),
        pytest.param(
            lambda text: text + "\n[gone](docs/getting-started.md#no-such-heading)\n",
            "no heading #no-such-heading",
            id="broken-anchor",
        ),
        pytest.param(
            lambda text: text.replace(site_url(), "https://example.com/"),
            "no link to the site",
            id="no-site",
        ),
    ],
)
def test_a_fault_is_found(change: Callable[[str], str], said: str) -> None:
    text = (ROOT / "README.md").read_text()
    faults = front_page_faults(change(text), root=ROOT)
    assert any(said in fault for fault in faults), faults
