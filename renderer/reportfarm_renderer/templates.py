"""The template catalog: every report template, read and compiled once at start-up.

Templates live in one folder (in Kubernetes a mounted ConfigMap). At start-up
:meth:`TemplateCatalog.load` reads every file of that folder, compiles it and keeps it in memory;
the folder is never read again, so a ConfigMap that changes under a running pod changes nothing
until the pod restarts. Start-up fails with :class:`TemplateLoadError`, naming the file and line,
on a missing folder, a folder without templates, a template that does not compile, or a template
that includes or imports a file that is not there.

Files of the folder:

- ``NAME.html`` or ``NAME.html.j2`` is the job template ``NAME``.
- A file whose name starts with ``_`` (``_charts.html``) is a partial: other templates may
  ``{% include %}``, ``{% import %}`` or ``{% extends %}`` it by its file name; jobs can't name it.
- Dot-entries (ConfigMap's ``..data/`` and timestamped folders), sub-folders and other file types
  are skipped.

Templates are Jinja2 in an immutable sandbox (the data comes from callers): autoescaped HTML, and an
undefined variable is an error rather than a blank. A render that recurses too deep, produces more
than ``max_html_bytes`` of HTML, or repeats a string or list (``"-" * n``) past that size fails with
:class:`TemplateRenderError`. CPU time is not bounded here: templates are trusted, data is not.

Filters on top of Jinja's own:

- ``number(digits=0)``: ``1234.5 | number(1)`` gives ``1,234.5``.
- ``percent(digits=0)``: a ratio, ``0.874 | percent(1)`` gives ``87.4%``.
- ``date(fmt="%Y-%m-%d")``: an ISO date or datetime string, or a date; strftime, plus ``%-m`` and
  ``%-d`` for month and day without a leading zero: ``"2026-05-08" | date("%-m月%-d日")`` gives
  ``5月8日``.

Declarations: a template may start (nothing but whitespace before it) with a Jinja comment whose
text begins with ``reportfarm:``, followed by comma-separated options::

    {# reportfarm: javascript #}

The only option is ``javascript``: the page runs JavaScript when it prints (default: it does not).
Being a comment, the declaration renders to nothing. An unknown option fails at start-up, so a typo
does not silently leave JavaScript off. Only the job template's own file counts, not the files it
includes or extends.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import jinja2
import jinja2.nodes
import jinja2.sandbox

from reportfarm import outcomes

logger = logging.getLogger(__name__)

TEMPLATE_SUFFIXES = (".html.j2", ".html")
"""File names that are templates, and the suffix cut off to get the template's name."""

DEFAULT_MAX_HTML_BYTES = 20 * 1024 * 1024
"""The largest HTML (UTF-8 bytes) one render may produce."""

_DECLARATION = re.compile(r"\A\s*\{#-?\s*reportfarm:(?P<options>.*?)-?#\}", re.DOTALL)
_OPTIONS = frozenset({"javascript"})
_NAMES_HINT = "*.html, *.html.j2; partials _*.html"
_MAX_EXPONENT = 1024
_MAX_VERDICTS = 4096
"""Attribute verdicts a catalog keeps (type and name pairs; the example templates ask 16)."""
_DICT_ATTRIBUTES = frozenset(dir(dict))


class TemplateError(outcomes.PermanentError):
    """A template problem: permanent, the same template and data fail the same way again."""

    @property
    def description(self) -> str:
        return f"{type(self).__name__}: {self}"


class TemplateLoadError(TemplateError):
    """The template folder cannot be loaded; the service must not start."""

    default_kind = "templateloaderror"

    def __init__(self, file: str, reason: str, *, line: int | None = None) -> None:
        where = f"{file}, line {line}" if line is not None else file
        super().__init__(f"cannot load templates: {where}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason


class UnknownTemplateError(TemplateError):
    """A job names a template that the catalog does not have."""

    default_kind = "unknowntemplateerror"

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown template {name!r}; known templates: {', '.join(known)}")
        self.name = name
        self.known = known


class TemplateRenderError(TemplateError):
    """The data breaks the template: a missing field, a wrong type, a sandbox violation, a bound."""

    default_kind = "templaterendererror"

    def __init__(
        self, name: str, reason: str, *, file: str | None = None, line: int | None = None
    ) -> None:
        where = f" at {file}, line {line}" if file and line is not None else ""
        super().__init__(f"template {name!r} failed{where}: {reason}")
        self.name = name
        self.reason = reason
        self.file = file
        self.line = line


@dataclasses.dataclass(frozen=True)
class _Entry:
    file: str
    template: jinja2.Template
    javascript: bool


class TemplateCatalog:
    """The job templates, compiled; safe to share between threads and tasks."""

    def __init__(self, entries: Mapping[str, _Entry], *, max_html_bytes: int) -> None:
        self._entries = dict(entries)
        self._max_html_bytes = max_html_bytes

    @classmethod
    def load(cls, folder: Path, *, max_html_bytes: int = DEFAULT_MAX_HTML_BYTES) -> TemplateCatalog:
        """Read and compile every template of ``folder``, or raise :class:`TemplateLoadError`."""
        catalog = cls.from_sources(_read_folder(folder), max_html_bytes=max_html_bytes)
        logger.info(
            "loaded %d templates from %s: %s",
            len(catalog.names),
            folder,
            ", ".join(catalog.names),
            extra={"templates": catalog.names},
        )
        return catalog

    @classmethod
    def from_sources(
        cls, sources: Mapping[str, str], *, max_html_bytes: int = DEFAULT_MAX_HTML_BYTES
    ) -> TemplateCatalog:
        """Compile templates given as ``{file name: source}``, named as in a folder."""
        for file in sources:
            if not _template_name(file):
                raise TemplateLoadError(file, f"not a template file name ({_NAMES_HINT})")
        jobs = {_template_name(file): file for file in sources if not file.startswith("_")}
        if not jobs:
            raise TemplateLoadError("(sources)", f"no job templates ({_NAMES_HINT})")
        env = _Sandbox(sources, max_html_bytes=max_html_bytes)
        for file, source in sorted(sources.items()):
            _check(env, file, source, sources)
        entries = {
            name: _Entry(file, env.get_template(file), _wants_javascript(file, sources[file]))
            for name, file in sorted(jobs.items())
        }
        return cls(entries, max_html_bytes=max_html_bytes)

    @property
    def names(self) -> list[str]:
        """The job templates' names, sorted."""
        return sorted(self._entries)

    def wants_javascript(self, name: str) -> bool:
        """Whether the template declared ``{# reportfarm: javascript #}``."""
        return self._entry(name).javascript

    def render(self, name: str, data: Mapping[str, Any]) -> str:
        """Render template ``name``; the data's keys are the template's variables."""
        entry = self._entry(name)
        chunks: list[str] = []
        size = 0
        try:
            for chunk in entry.template.generate(dict(data)):
                # An ASCII chunk's length is its size in UTF-8 (and asking costs nothing).
                size += len(chunk) if chunk.isascii() else len(chunk.encode("utf-8"))
                if size > self._max_html_bytes:
                    raise TemplateRenderError(
                        name, f"the HTML is larger than {self._max_html_bytes} bytes"
                    )
                chunks.append(chunk)
        except TemplateRenderError:
            raise
        except RecursionError as e:
            raise _render_error(name, e, "recursion too deep") from None
        except Exception as e:
            raise _render_error(name, e, f"{type(e).__name__}: {e}") from e
        return "".join(chunks)

    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownTemplateError(name, self.names) from None


class _Sandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """The sandbox, with bounds on ``*`` repetition and ``**`` exponents, and our filters."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self, sources: Mapping[str, str], *, max_html_bytes: int) -> None:
        super().__init__(
            loader=_MemoryLoader(sources),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            cache_size=-1,  # never evict: everything is compiled once, at start-up
            auto_reload=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.max_html_bytes = max_html_bytes
        self.filters.update(number=_number, percent=_percent, date=_date)
        self._verdicts: dict[tuple[type, str], bool] = {}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """Jinja's verdict (``ImmutableSandboxedEnvironment``), kept per type and attribute name:
        it depends on nothing else (the name, and ``isinstance`` checks of the object against
        built-in types), and a template asks it for every attribute it reads, every time. Kept
        only for an object whose ``__class__`` is its type (what ``isinstance`` also reads), and
        for at most ``_MAX_VERDICTS`` pairs (names can come from data: ``attr(name)``)."""
        cls = type(obj)
        verdict = self._verdicts.get((cls, attr))
        if verdict is None:
            verdict = super().is_safe_attribute(obj, attr, value)
            if obj.__class__ is cls and len(self._verdicts) < _MAX_VERDICTS:
                self._verdicts[cls, attr] = verdict
        return verdict

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``row.name`` of a plain dict (the data, parsed from JSON) is its item, as Jinja's
        sandbox answers, without first failing to find an attribute of that name (an exception
        a read): a dict has no attributes but its type's."""
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        if operator == "*":
            if _repeated_size(left, right) > self.max_html_bytes:
                raise jinja2.sandbox.SecurityError("repetition larger than the HTML size bound")
            return left * right
        if isinstance(right, int) and abs(right) > _MAX_EXPONENT:  # "**": the only other one
            raise jinja2.sandbox.SecurityError(f"exponent larger than {_MAX_EXPONENT}")
        return super().call_binop(context, operator, left, right)


class _MemoryLoader(jinja2.BaseLoader):
    """Serves the sources read at start-up; the file name makes errors point at the right file."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self._sources = dict(sources)

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        if template not in self._sources:
            raise jinja2.TemplateNotFound(template)
        return self._sources[template], template, lambda: True


def _read_folder(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        raise TemplateLoadError(str(folder), "no such folder")
    sources: dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.name.endswith(TEMPLATE_SUFFIXES):
            continue
        if path.is_symlink() and not path.exists():
            raise TemplateLoadError(path.name, "broken symlink")
        if not path.is_file():
            continue
        try:
            sources[path.name] = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            raise TemplateLoadError(path.name, f"cannot read: {e}") from e
    if not any(not file.startswith("_") for file in sources):
        raise TemplateLoadError(str(folder), f"no job templates ({_NAMES_HINT})")
    return sources


def _check(env: _Sandbox, file: str, source: str, sources: Mapping[str, str]) -> None:
    """Compile one file, and check that the files it names exist."""
    name = _template_name(file)
    if not file.startswith("_") and sum(_template_name(f) == name for f in sources) > 1:
        raise TemplateLoadError(file, f"two files define the template {name!r}")
    try:
        tree = env.parse(source, file, file)
        env.get_template(file)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateLoadError(file, e.message or "syntax error", line=e.lineno) from e
    nodes = jinja2.nodes
    refs: list[nodes.Extends | nodes.Include | nodes.Import | nodes.FromImport]
    refs = [*tree.find_all(nodes.Extends), *tree.find_all(nodes.Include)]
    refs += [*tree.find_all(nodes.Import), *tree.find_all(nodes.FromImport)]
    for ref in refs:
        if isinstance(ref, nodes.Include) and ref.ignore_missing:
            continue
        if isinstance(ref.template, nodes.Const) and ref.template.value not in sources:
            raise TemplateLoadError(
                file, f"no template file {ref.template.value!r}", line=ref.lineno
            )
    _wants_javascript(file, source)


def _wants_javascript(file: str, source: str) -> bool:
    match = _DECLARATION.match(source)
    if match is None:
        return False
    options = {option.strip() for option in match["options"].split(",")} - {""}
    if unknown := options - _OPTIONS:
        raise TemplateLoadError(file, f"unknown reportfarm option(s) {sorted(unknown)}", line=1)
    return "javascript" in options


def _template_name(file: str) -> str:
    for suffix in TEMPLATE_SUFFIXES:
        if file.endswith(suffix):
            return file.removesuffix(suffix)
    return ""


def _render_error(name: str, error: BaseException, reason: str) -> TemplateRenderError:
    file, line = _template_location(error.__traceback__)
    return TemplateRenderError(name, reason, file=file, line=line)


def _template_location(tb: TracebackType | None) -> tuple[str | None, int | None]:
    """The innermost template frame of a traceback (Jinja rewrites them to point at the source)."""
    file: str | None = None
    line: int | None = None
    while tb is not None:
        if "__jinja_exception__" in tb.tb_frame.f_globals:
            file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next
    return file, line


def _repeated_size(left: Any, right: Any) -> int:
    if isinstance(left, int) and not isinstance(left, bool):
        left, right = right, left
    if isinstance(left, str | list | tuple) and isinstance(right, int):
        return len(left) * right
    return 0


def _number(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _percent(value: float, digits: int = 0) -> str:
    return f"{value * 100:.{digits}f}%"


def _date(value: str | datetime.date, fmt: str = "%Y-%m-%d") -> str:
    when = datetime.datetime.fromisoformat(value) if isinstance(value, str) else value
    fmt = fmt.replace("%-m", str(when.month)).replace("%-d", str(when.day))
    return when.strftime(fmt)
