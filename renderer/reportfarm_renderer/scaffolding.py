"""``reportfarm init NAME``: a new template from a skeleton, with sample data, rendered once.

Writes ``DIR/templates/NAME.html`` and ``DIR/data/NAME.json`` (a styled one-page statement: a
header, a table with a total, filters), renders them to ``DIR/out/NAME.pdf`` on this machine
without a queue (:mod:`reportfarm_renderer.preview`, a few seconds), says where the PDF is, and
prints the commands for the next steps: preview again after an edit, then the farm.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from rich.console import Console

from reportfarm_renderer import preview

console = Console(stderr=True)
SKELETON = Path(__file__).resolve().parent / "skeleton"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


def write(*, name: str, folder: Path, force: bool) -> tuple[Path, Path]:
    """The new template and its data; refuses to overwrite unless ``force``."""
    if not _NAME.fullmatch(name):
        raise preview.PreviewError(
            f"{name!r} is not a template name: use letters, digits, - and _ (e.g. invoice)"
        )
    template = folder / "templates" / f"{name}.html"
    data = folder / "data" / f"{name}.json"
    existing = [str(path) for path in (template, data) if path.exists()]
    if existing and not force:
        raise preview.PreviewError(
            f"{' and '.join(existing)} already exist: pick another name, or --force to overwrite"
        )
    for path, source in ((template, "report.html"), (data, "report.json")):
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (SKELETON / source).read_text(encoding="utf-8").replace("NAME", name)
        path.write_text(text, encoding="utf-8")
    return template, data


def main(*, name: str, folder: Path, force: bool) -> int:
    preview.quiet()
    try:
        template, data = write(name=name, folder=folder, force=force)
        console.print(f"wrote {template} and {data}", highlight=False)
        out = folder / "out" / f"{name}.pdf"
        seconds = preview.render(templates_dir=template.parent, template=name, data=data, out=out)
    except preview.PreviewError as error:
        console.print(f"[red]error:[/] {error}", soft_wrap=True, highlight=False)
        return 2
    templates_dir, quoted = shlex.quote(str(template.parent)), shlex.quote(str(data))
    console.print(
        f"[bold]PDF: {out}[/] (rendered locally in {seconds:.1f} s, no queue)\n"
        "next:\n"
        f"  edit {template} and {data}, then render again:\n"
        f"    reportfarm preview --templates {templates_dir} --template {name} --data {quoted}"
        f" --out {shlex.quote(str(out))}\n"
        "  render it on the farm (a queue, a renderer, autoscaling):\n"
        f"    reportfarm up --templates {templates_dir} --data {quoted} --out out\n"
        "  or submit it to a farm already running (`reportfarm up --serve`) with those templates:\n"
        f"    reportfarm submit --template {name} --data {quoted} --out out",
        soft_wrap=True,
        highlight=False,
    )
    return 0
