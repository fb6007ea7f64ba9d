"""The template catalog: loading at start-up, the sandbox, the bounds, and the example reports."""

from __future__ import annotations

import json
import threading
import types
from pathlib import Path
from typing import Any

import jinja2.sandbox
import jinja2.utils
import markupsafe
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from reportfarm_bench import documents, statements
from reportfarm_renderer import templates

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(folder: Path, files: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def catalog(sources: dict[str, str], **kwargs: Any) -> templates.TemplateCatalog:
    return templates.TemplateCatalog.from_sources(sources, **kwargs)


def render_error(source: str, data: dict[str, Any] | None = None) -> templates.TemplateRenderError:
    with pytest.raises(templates.TemplateRenderError) as caught:
        catalog({"report.html": source}).render("report", data or {})
    return caught.value


# Loading


def test_loads_job_templates_by_file_name_and_skips_partials_and_other_files(
    tmp_path: Path,
) -> None:
    folder = write(
        tmp_path,
        {
            "achievement.html": "{% import '_macros.html' as m %}{{ m.hello(name) }}",
            "outlook.html.j2": "outlook {{ name }}",
            "_macros.html": "{% macro hello(who) %}你好 {{ who }}{% endmacro %}",
            "README.md": "not a template",
            ".hidden.html": "{% broken",
        },
    )
    (folder / "subfolder").mkdir()
    loaded = templates.TemplateCatalog.load(folder)
    assert loaded.names == ["achievement", "outlook"]
    assert loaded.render("achievement", {"name": "林雨桐"}) == "你好 林雨桐"
    assert loaded.render("outlook", {"name": "x"}) == "outlook x"


def test_loads_a_configmap_mount_with_its_symlinks(tmp_path: Path) -> None:
    # How the kubelet lays out a ConfigMap volume: real files in a timestamped dot-folder,
    # `..data` pointing at it, and one symlink per key pointing into `..data`.
    write(tmp_path / "..2026_05_08_10_00_00.123", {"report.html": "v1", "_part.html": "p"})
    (tmp_path / "..data").symlink_to("..2026_05_08_10_00_00.123")
    for name in ("report.html", "_part.html"):
        (tmp_path / name).symlink_to(f"..data/{name}")
    loaded = templates.TemplateCatalog.load(tmp_path)
    assert loaded.names == ["report"]
    assert loaded.render("report", {}) == "v1"


def test_templates_are_read_once_and_kept_in_memory(tmp_path: Path) -> None:
    folder = write(tmp_path, {"report.html": "{% include '_part.html' %}", "_part.html": "v1"})
    loaded = templates.TemplateCatalog.load(folder)
    (folder / "report.html").write_text("v2")
    (folder / "_part.html").unlink()
    assert loaded.render("report", {}) == "v1"


@pytest.mark.parametrize(
    ("files", "named", "line"),
    [
        pytest.param(None, "no-such-folder", None, id="missing-folder"),
        pytest.param({}, "templates", None, id="empty-folder"),
        pytest.param({"_only.html": "x", "notes.txt": "x"}, "templates", None, id="only-partials"),
        pytest.param({"ok.html": "fine", "bad.html": "a\nb\n{% if %}"}, "bad.html", 3, id="syntax"),
        pytest.param({"bad.html": "{{ x | no_such_filter }}"}, "bad.html", 1, id="unknown-filter"),
        pytest.param({"bad.html": "a\n{% include '_gone.html' %}"}, "bad.html", 2, id="include"),
        pytest.param(
            {"bad.html": "{% from '_gone.html' import m %}"}, "bad.html", 1, id="from-import"
        ),
        pytest.param({"_part.html": "{% for %}", "ok.html": "x"}, "_part.html", 1, id="partial"),
        pytest.param({"a.html": "x", "a.html.j2": "y"}, "a.html", None, id="duplicate-name"),
        pytest.param({"bad.html": "{# reportfarm: javascirpt #}"}, "bad.html", 1, id="option"),
        pytest.param({"bad.html": b"\xff\xfe caf\xe9"}, "bad.html", None, id="not-utf8"),
    ],
)
def test_start_up_fails_naming_the_file_and_line(
    tmp_path: Path, files: dict[str, str | bytes] | None, named: str, line: int | None
) -> None:
    folder = tmp_path / ("no-such-folder" if files is None else "templates")
    if files is not None:
        write(folder, files)
    with pytest.raises(templates.TemplateLoadError) as caught:
        templates.TemplateCatalog.load(folder)
    assert named in caught.value.file
    assert named in str(caught.value)
    assert caught.value.line == line
    if line is not None:
        assert f"line {line}" in str(caught.value)


def test_a_broken_symlink_fails_start_up(tmp_path: Path) -> None:
    write(tmp_path, {"ok.html": "x"})
    (tmp_path / "gone.html").symlink_to("..data/gone.html")
    with pytest.raises(templates.TemplateLoadError, match=r"gone\.html"):
        templates.TemplateCatalog.load(tmp_path)


# Rendering errors


def test_an_unknown_template_lists_the_known_names() -> None:
    loaded = catalog({"achievement.html": "a", "outlook.html": "o", "_charts.html": "c"})
    with pytest.raises(templates.UnknownTemplateError) as caught:
        loaded.render("_charts", {})
    assert caught.value.known == ["achievement", "outlook"]
    assert "achievement, outlook" in str(caught.value)
    assert isinstance(caught.value, templates.TemplateError)
    with pytest.raises(templates.UnknownTemplateError):
        loaded.wants_javascript("nope")


def test_a_missing_field_names_the_template_the_line_and_the_field() -> None:
    error = render_error(
        "<h1>{{ student.name }}</h1>\n<p>{{ student.school }}</p>", {"student": {"name": "林雨桐"}}
    )
    assert error.name == "report"
    assert (error.file, error.line) == ("report.html", 2)
    assert "'report'" in str(error) and "line 2" in str(error) and "school" in str(error)
    assert "UndefinedError" in str(error)
    assert isinstance(error, templates.TemplateError)


def test_an_error_inside_a_partial_points_at_the_partial() -> None:
    loaded = catalog(
        {
            "report.html": "{% import '_m.html' as m %}\n{{ m.row(item) }}",
            "_m.html": "{% macro row(r) %}\n<td>{{ r.missing }}</td>\n{% endmacro %}",
        }
    )
    with pytest.raises(templates.TemplateRenderError) as caught:
        loaded.render("report", {"item": {}})
    assert (caught.value.name, caught.value.file, caught.value.line) == ("report", "_m.html", 2)


def test_a_wrong_type_in_the_data_is_a_render_error() -> None:
    error = render_error("{{ score + 1 }}", {"score": "九十"})
    assert "TypeError" in str(error)


# Escaping and the sandbox


def test_data_is_html_escaped() -> None:
    html = catalog({"report.html": "<p>{{ name }}</p>"}).render(
        "report", {"name": "<script>alert('x')</script>"}
    )
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("{{ ''.__class__.__mro__[1].__subclasses__() }}", id="mro-subclasses"),
        pytest.param("{{ cycler.__init__.__globals__ }}", id="cycler-globals"),
        pytest.param("{{ lipsum.__globals__['os'] }}", id="lipsum-globals"),
        pytest.param("{{ '{0.__class__}'.format(name) }}", id="format-attribute"),
        pytest.param("{{ items.append(1) }}", id="mutate-data"),
        pytest.param("{{ items.__len__() }}", id="dunder-call"),
    ],
)
def test_sandbox_escapes_fail_cleanly(source: str) -> None:
    error = render_error(source, {"name": "x", "items": [1, 2]})
    assert error.name == "report"
    assert isinstance(error.__cause__, jinja2.sandbox.SecurityError)
    assert "SecurityError" in str(error)


def test_an_escape_fails_again_after_a_safe_read_of_the_same_type() -> None:
    """The sandbox keeps its verdict per type and attribute name: a safe read of a list does not
    make the list's unsafe attributes safe, and a refused read is refused every time."""
    loaded = catalog(
        {
            "safe.html": "{{ items.index(2) }} {{ items.count(1) }} {{ name.upper() }}",
            "unsafe.html": "{{ items.append(1) }}",
            "dunder.html": "{{ name.__class__ }}",
        }
    )
    data = {"name": "x", "items": [1, 2]}
    for _ in range(3):
        assert loaded.render("safe", data) == "1 1 X"
        for name in ("unsafe", "dunder"):
            with pytest.raises(templates.TemplateRenderError, match="SecurityError") as caught:
                loaded.render(name, data)
            assert isinstance(caught.value.__cause__, jinja2.sandbox.SecurityError)
    assert data["items"] == [1, 2]


class _Claims:
    """An object that says it is of another type, each its own (``isinstance`` reads
    ``__class__``): claiming a code object, its every attribute is internal."""

    name = "a name"

    def __init__(self, claims: type) -> None:
        self._claims = claims

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        return self._claims


_CLAIMS_STR = _Claims(str)
_CLAIMS_CODE = _Claims(types.CodeType)


def _a_function() -> None: ...


def _a_generator() -> Any:
    yield 1


_SUBJECTS: list[Any] = [
    {"name": "x", "items": 1},
    [1, 2],
    "text",
    3,
    2.5,
    None,
    (1, 2),
    {1, 2},
    _a_function,
    "x".upper,
    [].append,
    dict,
    str,
    _a_generator(),
    jinja2.utils.Namespace(total=1),
    _CLAIMS_STR,
    _CLAIMS_CODE,
    markupsafe.Markup("<b>"),
]
_NAMES = sorted(
    {n for subject in _SUBJECTS for n in dir(subject)}
    | {"mro", "gi_frame", "func_code", "name", "items", "total", "append", "clear", "update"}
)


@given(
    asks=st.lists(
        st.tuples(st.sampled_from(range(len(_SUBJECTS))), st.sampled_from(_NAMES)),
        min_size=1,
        max_size=60,
    )
)
@example(asks=[(_SUBJECTS.index(_CLAIMS_STR), "name"), (_SUBJECTS.index(_CLAIMS_CODE), "name")])
@settings(max_examples=200, deadline=None)
def test_the_kept_verdicts_are_jinjas_in_any_order(asks: list[tuple[int, str]]) -> None:
    """Whatever was asked before, the sandbox answers an attribute as Jinja's immutable sandbox
    does: the verdicts it keeps per type and name never answer for another object."""
    ours = templates._Sandbox({}, max_html_bytes=1000)
    jinjas = jinja2.sandbox.ImmutableSandboxedEnvironment()
    for index, name in asks + asks:
        subject = _SUBJECTS[index]
        value = getattr(subject, name, None)
        assert ours.is_safe_attribute(subject, name, value) == jinjas.is_safe_attribute(
            subject, name, value
        ), (type(subject).__name__, name)


@given(
    data=st.dictionaries(
        st.sampled_from(["name", "items", "keys", "get", "__class__", "total", "x"]),
        st.integers(),
    ),
    name=st.sampled_from(["name", "items", "keys", "get", "__class__", "total", "missing"]),
)
@settings(max_examples=200, deadline=None)
def test_a_dicts_attribute_reads_as_jinjas_sandbox_reads_it(
    data: dict[str, int], name: str
) -> None:
    """``row.name`` of a dict: its item, unless a dict has an attribute of that name (``items``
    is the method, whatever the data holds), as Jinja's sandbox reads it."""
    sources = {"report.html": "{{ row." + name + " }}"}
    ours = catalog(sources)
    jinjas = jinja2.sandbox.ImmutableSandboxedEnvironment(
        autoescape=True, undefined=jinja2.StrictUndefined
    ).from_string(sources["report.html"])
    try:
        expected = jinjas.render(row=data)
    except Exception as error:
        with pytest.raises(templates.TemplateRenderError) as caught:
            ours.render("report", {"row": data})
        assert type(caught.value.__cause__) is type(error)
        return
    assert ours.render("report", {"row": data}) == expected


# Bounds


RECURSIVE = (
    "{% macro walk(node) %}<li>{{ node.name }}"
    "{% if node.child %}<ul>{{ walk(node.child) }}</ul>{% endif %}</li>{% endmacro %}"
    "{{ walk(tree) }}"
)


def nested(depth: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"name": "leaf", "child": None}
    for i in range(depth):
        tree = {"name": f"n{i}", "child": tree}
    return tree


def test_reasonable_recursion_renders() -> None:
    html = catalog({"tree.html": RECURSIVE}).render("tree", {"tree": nested(20)})
    assert html.count("<li>") == 21


def test_too_deep_recursion_is_a_render_error_also_in_a_worker_thread() -> None:
    loaded = catalog({"tree.html": RECURSIVE})
    errors: list[BaseException] = []

    def render() -> None:
        try:
            loaded.render("tree", {"tree": nested(5000)})
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=render)  # the worker renders with asyncio.to_thread
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], templates.TemplateRenderError)
    assert "recursion" in str(errors[0])
    # The catalog still works afterwards.
    assert loaded.render("tree", {"tree": nested(1)}).count("<li>") == 2


def test_output_larger_than_the_bound_is_a_render_error() -> None:
    loaded = catalog(
        {"rows.html": "{% for row in rows %}<tr><td>{{ row }}</td></tr>{% endfor %}"},
        max_html_bytes=10_000,
    )
    assert len(loaded.render("rows", {"rows": ["行"] * 100}).encode()) < 10_000
    # 500 rows: 9,500 characters, 10,500 bytes of UTF-8. The bound is in bytes.
    with pytest.raises(templates.TemplateRenderError, match="larger than 10000 bytes"):
        loaded.render("rows", {"rows": ["行"] * 500})
    with pytest.raises(templates.TemplateRenderError, match="larger than 10000 bytes"):
        loaded.render("rows", {"rows": ["行"] * 1000})


def test_the_default_bound_stops_a_runaway_loop() -> None:
    source = (
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ line }}{% endfor %}{% endfor %}"
    )
    error = render_error(source, {"line": "x" * 1000})
    assert str(templates.DEFAULT_MAX_HTML_BYTES) in str(error)


@pytest.mark.parametrize(
    ("source", "data"),
    [
        pytest.param("{{ '█' * width }}", {"width": 10**12}, id="string-repetition"),
        pytest.param("{{ ([0] * width) | length }}", {"width": 10**12}, id="list-repetition"),
        pytest.param("{{ 10 ** power }}", {"power": 10**9}, id="huge-power"),
    ],
)
def test_data_cannot_blow_up_one_value(source: str, data: dict[str, Any]) -> None:
    error = render_error(source, data)
    assert isinstance(error.__cause__, jinja2.sandbox.SecurityError)


def test_ordinary_repetition_and_powers_still_work() -> None:
    html = catalog({"r.html": "{{ '█' * 3 }} {{ 3 * 'ab' }} {{ 2 ** 10 }} {{ 1.5 * 2 }}"})
    assert html.render("r", {}) == "███ ababab 1024 3.0"


# The JavaScript declaration


@pytest.mark.parametrize(
    ("source", "wanted"),
    [
        pytest.param("<p>static</p>", False, id="default-off"),
        pytest.param("{# reportfarm: javascript #}\n<script></script>", True, id="declared"),
        pytest.param("\n  {#- reportfarm:javascript -#}\nx", True, id="whitespace-and-trim"),
        pytest.param("{# reportfarm: #}\nx", False, id="no-options"),
        pytest.param("{# just a comment #}\n{# reportfarm: javascript #}", False, id="not-first"),
        pytest.param("<p>{# reportfarm: javascript #}</p>", False, id="not-at-top"),
        pytest.param("{% include '_js.html' %}", False, id="only-own-file-counts"),
    ],
)
def test_javascript_is_declared_at_the_top_of_the_template(source: str, wanted: bool) -> None:
    loaded = catalog({"report.html": source, "_js.html": "{# reportfarm: javascript #}"})
    assert loaded.wants_javascript("report") is wanted
    loaded.render("report", {})  # the declaration is a comment: it renders to nothing


# Filters


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("{{ 1234567 | number }}", "1,234,567", id="number"),
        pytest.param("{{ 1234.56 | number(1) }}", "1,234.6", id="number-digits"),
        pytest.param("{{ 0.874 | percent }}", "87%", id="percent"),
        pytest.param("{{ 0.8745 | percent(1) }}", "87.5%", id="percent-digits"),
        pytest.param("{{ '2026-05-08' | date('%-m月%-d日') }}", "5月8日", id="date-chinese"),
        pytest.param("{{ '2026-05-08T21:30:00+08:00' | date }}", "2026-05-08", id="datetime"),
        pytest.param("{{ '2026-05-10' | date('%w') }}", "0", id="weekday"),
    ],
)
def test_filters(source: str, expected: str) -> None:
    assert catalog({"f.html": source}).render("f", {}) == expected


# The example reports


@pytest.fixture(scope="module")
def examples() -> templates.TemplateCatalog:
    return templates.TemplateCatalog.load(EXAMPLES / "templates")


def sample(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "data" / f"{name}.json").read_text("utf-8"))
    return data


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "achievement",
            ["临考词汇突击", "成果报告", "林雨桐", "每日学习明细", "高频易错词", "老师点评"],
            id="achievement",
        ),
        pytest.param(
            "outlook",
            ["临考词汇突击", "考前展望报告", "林雨桐", "成绩走势与预测", "冲刺计划", "待巩固词汇"],
            id="outlook",
        ),
    ],
)
def test_examples_render_their_sample_data(
    examples: templates.TemplateCatalog, name: str, expected: list[str]
) -> None:
    html = examples.render(name, sample(name))
    assert html.startswith("<!DOCTYPE html>")
    for text in expected:
        assert text in html
    assert html.count("<svg") >= 1
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert not examples.wants_javascript(name)


def test_examples_catalog_holds_exactly_the_four_reports(
    examples: templates.TemplateCatalog,
) -> None:
    assert examples.names == ["achievement", "invoice", "outlook", "statement"]


@pytest.mark.parametrize("lines", [1, 30, 2000])
def test_the_statement_has_a_row_per_line_and_its_balance(
    examples: templates.TemplateCatalog, lines: int
) -> None:
    """The big report's size follows its data (its rows), and it ends with the closing balance
    and its number, which ``reportfarm bench pages`` looks for on the last page."""
    data = statements.statement(lines)
    html = examples.render("statement", data)
    assert html.count("<tr><td>") == lines
    balance = data["opening_balance"] + sum(line["points"] for line in data["lines"])
    assert f"期末积分 {balance} · 账单编号 {statements.report_no(lines)}" in html
    assert not examples.wants_javascript("statement")


def test_every_batch_line_renders(examples: templates.TemplateCatalog) -> None:
    lines = (EXAMPLES / "data" / "batch.jsonl").read_text("utf-8").splitlines()
    assert len(lines) >= 10
    seen = set()
    for line in lines:
        item = json.loads(line)
        html = examples.render(item["template"], item["data"])
        assert item["data"]["student"]["name"] in html
        seen.add(item["template"])
    assert seen == {"achievement", "outlook"}


def test_every_example_renders_as_jinjas_own_sandbox_renders_it(
    examples: templates.TemplateCatalog,
) -> None:
    """The kept verdicts and a dict's items read first change no report: every example and
    every batch line renders the same HTML as with Jinja's immutable sandbox's own reads."""
    jinjas = documents.load_with_jinjas_reads(EXAMPLES / "templates")
    reads = documents.JinjasReads
    assert type(next(iter(jinjas._entries.values())).template.environment) is reads
    assert type(next(iter(examples._entries.values())).template.environment) is not reads
    lines = (EXAMPLES / "data" / "batch.jsonl").read_text("utf-8").splitlines()
    jobs = [(name, sample(name)) for name in ("achievement", "outlook", "invoice")]
    jobs += [(item["template"], item["data"]) for item in map(json.loads, lines)]
    jobs += [("statement", statements.statement(40))]
    for name, data in jobs:
        assert examples.render(name, data) == jinjas.render(name, data), name


def test_an_example_with_a_field_missing_names_the_template(
    examples: templates.TemplateCatalog,
) -> None:
    data = sample("outlook")
    del data["prediction"]
    with pytest.raises(templates.TemplateRenderError) as caught:
        examples.render("outlook", data)
    assert caught.value.name == "outlook"
    assert "prediction" in str(caught.value)


@pytest.mark.parametrize(
    ("values", "top_label"),
    [
        pytest.param([3, 7, 9], "10", id="small"),
        pytest.param([120, 480, 310], "500", id="hundreds"),
        pytest.param([12_000, 47_500], "50,000", id="thousands"),
    ],
)
def test_the_example_bar_chart_scales_its_axis_to_the_data(
    values: list[int], top_label: str
) -> None:
    charts = (EXAMPLES / "templates" / "_charts.html").read_text("utf-8")
    loaded = catalog(
        {
            "_charts.html": charts,
            "chart.html": "{% import '_charts.html' as c %}{{ c.bar_chart(labels, values) }}",
        }
    )
    svg = loaded.render("chart", {"labels": [str(v) for v in values], "values": values})
    assert svg.count("<rect") == len(values)
    assert f">{top_label}</text>" in svg
    heights = [float(part.split('"')[0]) for part in svg.split('height="')[2:]]
    assert max(heights) <= 250  # the tallest bar stays inside the chart
