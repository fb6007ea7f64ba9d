"""`reportfarm init` and `preview`: a new template rendered once, locally, with errors that point
at the template's file and line (real Chromium)."""

from __future__ import annotations

import io
from pathlib import Path

import pypdf
import pytest

from reportfarm import cli

pytestmark = pytest.mark.chromium


def pdf_text(path: Path) -> str:
    reader = pypdf.PdfReader(io.BytesIO(path.read_bytes()))
    return "".join(page.extract_text() for page in reader.pages)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPORTFARM_LOG_LEVEL", raising=False)
    return tmp_path


def test_init_writes_a_template_and_renders_it(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["init", "invoice"]) == 0
    err = capsys.readouterr().err
    pdf = Path("reports/out/invoice.pdf")
    assert f"PDF: {pdf}" in err
    assert "reportfarm preview --templates reports/templates --template invoice" in err
    assert "reportfarm submit --template invoice --data reports/data/invoice.json" in err
    assert Path("reports/templates/invoice.html").is_file()
    assert Path("reports/data/invoice.json").is_file()
    text = pdf_text(pdf)
    assert "Monthly statement" in text and "林雨桐" in text and "2,390.50" in text
    assert "browser launched" not in err  # the renderer's start-up log lines stay quiet


def test_init_never_overwrites_without_force(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = Path("reports/templates/invoice.html")
    template.parent.mkdir(parents=True)
    template.write_text("mine", encoding="utf-8")
    assert cli.main(["init", "invoice"]) == 2
    assert "already exist" in capsys.readouterr().err
    assert template.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("name", ["../x", "a b", "_partial", ""])
def test_init_refuses_a_bad_name(
    folder: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["init", name]) == 2
    assert "not a template name" in capsys.readouterr().err
    assert not Path("reports").exists()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            "<p>{{ person.email.lower() }}</p>", "has no attribute 'email'", id="undefined"
        ),
        pytest.param("<p>{{ person.name }</p>", "unexpected '}'", id="syntax"),
        pytest.param("{% include '_missing.html' %}", "_missing.html", id="missing-partial"),
    ],
)
def test_a_template_error_names_the_file_and_line(
    folder: Path, line: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    templates = folder / "templates"
    templates.mkdir()
    (templates / "t.html").write_text("<h1>{{ title }}</h1>\n\n" + line + "\n", encoding="utf-8")
    data = folder / "t.json"
    data.write_text('{"title": "x", "person": {"name": "Ann"}}', encoding="utf-8")
    status = cli.main(
        ["preview", "--templates", "templates", "--template", "t", "--data", "t.json"]
    )
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("error: templates/t.html, line 3: ")
    assert expected in err
    assert not Path("out/t.pdf").exists()


def test_preview_renders_after_an_edit(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", "card", "--dir", "r"]) == 0
    template = Path("r/templates/card.html")
    template.write_text(
        template.read_text(encoding="utf-8").replace("Total", "Grand total"), encoding="utf-8"
    )
    args = ["--templates", "r/templates", "--template", "card", "--data", "r/data/card.json"]
    assert cli.main(["preview", *args, "--out", "r/out/edited.pdf"]) == 0
    assert "Grand total" in pdf_text(Path("r/out/edited.pdf"))
