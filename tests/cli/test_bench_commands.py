"""``reportfarm bench``: the top-level help holds a user's commands and one ``bench`` group; the
group lists every benchmark, each with the options it had as ``reportfarm bench-NAME``; bad words
get a one-line error. Nothing runs a benchmark here (tests/renderer/test_bench*.py do)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from reportfarm_bench import commands

from reportfarm import cli

USER_COMMANDS = {
    "worker",
    "submit",
    "status",
    "up",
    "init",
    "preview",
    "gateway",
    "batch",
    "operator",
    "simulate",
}

OPTIONS = {
    "strategies": {"--jobs", "--json", "--plot", "--pool-size", "--samples"},
    "gotenberg": {
        "--gotenberg-bin",
        "--gotenberg-chromium",
        "--gotenberg-pid",
        "--gotenberg-url",
        "--jobs",
        "--json",
        "--plot",
        "--pool-size",
        "--samples",
    },
    "sync": {
        "--concurrency",
        "--gotenberg-bin",
        "--gotenberg-concurrency",
        "--gotenberg-hidden",
        "--idle-s",
        "--count-requests",
        "--jobs",
        "--json",
        "--pages-per-browser",
        "--plot",
        "--polling",
        "--pool-size",
        "--rounds",
    },
    "finish": {"--json", "--repeats"},
    "print": {
        "--flag-shape",
        "--flags",
        "--jobs",
        "--json",
        "--loading",
        "--plot",
        "--shapes",
        "--with",
    },
    "lanes": {"--bulk", "--interactive", "--json", "--pool-size", "--rounds"},
    "pages": {"--json", "--pages", "--plot", "--repeat", "--rounds"},
    "pod": {"--jobs", "--json", "--plot", "--pod-cpus", "--pool-size"},
    "einvoice": {
        "--chunk",
        "--finishing-processes",
        "--json",
        "--pod-cpus",
        "--rounds",
        "--signatures",
        "--tsa",
        "--tsa-url",
    },
}
"""Each benchmark's options, as its ``bench-NAME`` command had them before the group."""


def _top_level_commands() -> set[str]:
    parser = cli._parser()
    (group,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(group.choices)


def test_the_top_level_lists_the_user_commands_and_one_bench_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _top_level_commands() == USER_COMMANDS | {"bench"}
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert "bench-" not in shown
    assert "reportfarm bench --list" in shown


def test_the_list_shows_each_benchmark_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [bench.name for bench in commands.BENCHMARKS]
    assert {bench.name for bench in commands.BENCHMARKS} == set(OPTIONS)
    assert all(len(line.split()) > 2 for line in lines)  # a name, then what it measures


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_benchmark_has_its_options_and_its_help(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    benchmark = commands.by_name(name)
    assert benchmark is not None
    parser = commands.parser(benchmark)
    declared = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}
    assert declared == OPTIONS[name]
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench", name, "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: reportfarm bench {name} ")
    assert all(option in shown for option in OPTIONS[name])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(["bench", "nope"], "no benchmark 'nope'", id="unknown-name"),
        pytest.param(["bench", "bench-print"], "no benchmark 'bench-print'", id="old-name"),
        pytest.param(["bench"], "usage: reportfarm bench NAME", id="no-name"),
    ],
)
def test_a_wrong_word_is_one_clear_error(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err


def test_bad_option_values_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["sync", "--gotenberg-bin", "x", "--concurrency", "1,two"],
        ["pod", "--jobs", "x"],
    ):
        with pytest.raises(SystemExit) as exited:
            cli.main(["bench", *argv])
        assert exited.value.code == 2
        error = capsys.readouterr().err
        assert f"reportfarm bench {argv[0]}: error:" in error


def test_the_old_commands_are_gone(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench-gotenberg", "--help"])
    assert exited.value.code == 2
    assert "invalid choice: 'bench-gotenberg'" in capsys.readouterr().err


def test_the_help_and_the_list_import_no_benchmark() -> None:
    """``reportfarm --help`` does not import reportfarm_bench, ``--list`` no benchmark module."""
    probe = (
        "import sys, contextlib, io\n"
        "from reportfarm import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'])\n"
        "print('top', sorted(m for m in sys.modules if m.startswith('reportfarm_bench')))\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['bench', '--list'])\n"
        "print('list', sorted(m for m in sys.modules if m.startswith('reportfarm_bench')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "top []",
        "list ['reportfarm_bench', 'reportfarm_bench.commands']",
    ]


def test_where_the_benchmarks_are_not_installed_the_group_says_so_in_one_line() -> None:
    """As in an image (none ships reportfarm_bench): one line, exit code 2, no traceback."""
    probe = (
        "import sys\n"
        "sys.modules['reportfarm_bench'] = None\n"
        "from reportfarm import cli\n"
        "sys.exit(cli.main(['bench', '--list']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [cli._NO_BENCH]
