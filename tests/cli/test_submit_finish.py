"""``reportfarm submit --finish/--file/--tagged/--outline``: the command line's way to finishing,
against a real renderer and Azurite; bad options are one line and exit 2, before anything is sent."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pypdf
import pytest
from reportfarm_renderer import service

from reportfarm.client import ReportFarmClient
from reportfarm.settings import StorageSettings

from ..renderer.conftest import renderer_settings
from .test_errors import assert_one_line, cli

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


def farm_env(storage: StorageSettings) -> dict[str, str]:
    return {"REPORTFARM_QUEUE": storage.queue, "REPORTFARM_CONTAINER": storage.container}


async def test_every_pdf_is_finished_as_the_file_says(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    tmp_path: Path,
) -> None:
    (tmp_path / "jobs.jsonl").write_text(
        '{"name": "Ann"}\n{"template": "plain", "data": {"name": "Bo"}, '
        '"finish": {"metadata": {"title": "Own title"}}}\n',
        encoding="utf-8",
    )
    # angle 0: text extractors split rotated text in some fonts (test_print_marks reads rotated)
    finish = {
        "metadata": {"title": "Zeugnis", "author": "Schule"},
        "watermark": {"text": "COPY", "angle": 0},
    }
    (tmp_path / "finish.json").write_text(json.dumps(finish), encoding="utf-8")
    args = ("submit", "--template", "plain", "--data", "jobs.jsonl", "--finish", "finish.json")
    args += ("--tagged", "--out", "out")
    async with service.running(renderer_settings(storage, template_dir)):
        done = await asyncio.to_thread(
            cli, *args, cwd=tmp_path, connection=storage.connection_string, **farm_env(storage)
        )
    assert done.returncode == 0, done.stderr
    pdfs = sorted((tmp_path / "out").glob("*.pdf"))
    assert len(pdfs) == 2
    marked = {}
    for path in pdfs:
        reader = pypdf.PdfReader(io.BytesIO(path.read_bytes()))
        assert reader.metadata is not None
        assert "/StructTreeRoot" in reader.trailer["/Root"]  # --tagged: every job
        marked[reader.metadata.title] = "COPY" in (reader.pages[0].extract_text() or "")
    assert marked == {"Zeugnis": True, "Own title": False}  # a line's own finish wins whole


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (("--finish", "missing.json"), ("cannot read missing.json",)),
        (("--finish", "bad.json"), ("unknown finish option(s): colour",)),
        (("--file", "a b=job.json"), ("--file", "must be 1-100 of")),
        (("--file", "x=nowhere.csv"), ("--file", "nowhere.csv")),
    ],
)
def test_bad_finishing_options_are_one_line_before_anything_is_sent(
    tmp_path: Path, extra: tuple[str, ...], words: tuple[str, ...]
) -> None:
    (tmp_path / "job.json").write_text('{"name": "Ann"}', encoding="utf-8")
    (tmp_path / "bad.json").write_text('{"colour": true}', encoding="utf-8")
    args = ("submit", "--template", "plain", "--data", "job.json", *extra)
    assert_one_line(cli(*args, cwd=tmp_path, connection=None), *words)
