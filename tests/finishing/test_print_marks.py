"""Finishing that needs no archival tool, end to end through the queue (real Chromium, real
Azurite, the real worker): tagged PDF and outline, metadata, the watermark and permissions,
each read back by an independent reader (poppler's pdfinfo and pdftotext, pypdf)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pypdf
import pytest
from reportfarm_renderer import service

from reportfarm import contract, finishing
from reportfarm.client import ReportFarmClient, Submission
from reportfarm.settings import StorageSettings

from ..renderer.conftest import EXAMPLES, job_result_ok, renderer_settings

pytestmark = [pytest.mark.chromium, pytest.mark.azurite]


def example(name: str) -> dict[str, Any]:
    return dict(json.loads((EXAMPLES / "data" / f"{name}.json").read_text(encoding="utf-8")))


def pdfinfo(pdf: bytes, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "out.pdf"
    path.write_bytes(pdf)
    shown = subprocess.run(
        ["pdfinfo", "-isodates", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return {
        key.strip(): value.strip()
        for key, _, value in (line.partition(":") for line in shown.splitlines())
    }


def page_texts(pdf: bytes, tmp_path: Path) -> list[str]:
    path = tmp_path / "text.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(
        ["pdftotext", "-raw", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    return [page for page in text.split("\f") if page.strip()]


async def render(
    client: ReportFarmClient,
    storage: StorageSettings,
    template_dir: Path,
    items: list[Submission],
) -> list[tuple[contract.ResultRecord, bytes]]:
    async with service.running(renderer_settings(storage, template_dir)):
        job_ids = [await client.submit(item) for item in items]
        results = await client.wait(job_ids, timeout_s=120)
    done = []
    for job_id in job_ids:
        record = results[job_id]
        assert job_result_ok(record), record
        assert record is not None
        done.append((record, await client.download(record)))
    return done


async def test_tagged_pdf_and_outline_come_from_the_headings(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient, tmp_path: Path
) -> None:
    data = example("achievement")
    tagged = Submission(
        template="achievement", data=data, pdf=contract.PdfOptions(tagged=True, outline=True)
    )
    plain = Submission(template="achievement", data=data)
    [(record, pdf), (_, untagged)] = await render(client, storage, template_dir, [tagged, plain])
    info = pdfinfo(pdf, tmp_path)
    assert info["Tagged"] == "yes"
    assert pdfinfo(untagged, tmp_path)["Tagged"] == "no"
    document = pypdf.PdfReader(io.BytesIO(pdf))
    root = document.trailer["/Root"]
    assert bool(root["/MarkInfo"]["/Marked"])
    kinds = set(_structure_kinds(root["/StructTreeRoot"]))
    assert {"/H1", "/H2", "/Table", "/TH", "/TD"} <= kinds, kinds
    titles = [item.title for item in _flatten(document.outline)]
    assert any("每日学习明细" in title for title in titles), titles
    assert not pypdf.PdfReader(io.BytesIO(untagged)).outline
    assert not [stage for stage in record.stages_ms if stage.startswith("finish_")]


def _structure_kinds(node: Any, depth: int = 0) -> list[str]:
    node = node.get_object() if hasattr(node, "get_object") else node
    kinds: list[str] = []
    if isinstance(node, dict):
        if "/S" in node:
            kinds.append(str(node["/S"]))
        children = node.get("/K")
        if children is not None and depth < 60:
            for child in children if isinstance(children, list) else [children]:
                kinds += _structure_kinds(child, depth + 1)
    return kinds


def _flatten(outline: list[Any]) -> list[Any]:
    items: list[Any] = []
    for item in outline:
        items += _flatten(item) if isinstance(item, list) else [item]
    return items


async def test_metadata_reaches_document_info_xmp_and_lang(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient, tmp_path: Path
) -> None:
    metadata = finishing.Metadata(
        title="学习成果报告 · 林雨桐",
        author="临考词汇突击",
        subject="Exam-sprint achievement report",
        keywords=("report", "成果"),
        language="zh-CN",
        created="2026-12-03T10:00:00+08:00",
    )
    item = Submission(
        template="achievement",
        data=example("achievement"),
        finish=finishing.Finish(metadata=metadata),
    )
    [(record, pdf)] = await render(client, storage, template_dir, [item])
    info = pdfinfo(pdf, tmp_path)
    assert info["Title"] == metadata.title
    assert info["Author"] == metadata.author
    assert info["Subject"] == metadata.subject
    assert info["Keywords"] == "report, 成果"
    assert info["CreationDate"].startswith("2026-12-03T10:00:00+08")
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    assert reader.trailer["/Root"]["/Lang"] == "zh-CN"
    assert bool(reader.trailer["/Root"]["/ViewerPreferences"]["/DisplayDocTitle"])
    xmp = reader.xmp_metadata
    assert xmp is not None
    assert xmp.dc_title == {"x-default": metadata.title}
    assert xmp.dc_creator == [metadata.author]
    assert "finish_metadata" in record.stages_ms


async def test_the_watermark_is_on_every_page_and_only_where_asked(
    storage: StorageSettings, template_dir: Path, client: ReportFarmClient, tmp_path: Path
) -> None:
    data = example("achievement")
    mark = finishing.Watermark(text="ENTWURF <draft>", opacity=0.2)
    items = [
        Submission(template="achievement", data=data, finish=finishing.Finish(watermark=mark)),
        Submission(template="achievement", data=data),
    ]
    [(record, marked), (_, clean)] = await render(client, storage, template_dir, items)
    # pypdf reads the rotated text whole (poppler splits it); the mark fits the page (poppler
    # leaves out text off the page: an unfitted 96 pt mark was), so both find it on every page.
    pages = [page.extract_text() or "" for page in pypdf.PdfReader(io.BytesIO(marked)).pages]
    assert len(pages) >= 2
    assert all("ENTWURF <draft>" in page for page in pages)
    assert all("ENTW" in page for page in page_texts(marked, tmp_path))
    assert not any("ENTW" in page for page in page_texts(clean, tmp_path))
    assert len(pages) == len(page_texts(clean, tmp_path))  # the mark adds no page
    assert not [stage for stage in record.stages_ms if stage.startswith("finish_")]


@pytest.mark.parametrize(
    "permissions",
    [
        finishing.Permissions(print=False, copy=False, modify=False, annotate=False),
        finishing.Permissions(print=True, copy=False, modify=True, annotate=False),
    ],
)
async def test_permissions_lock_what_was_asked_and_open_without_a_password(
    storage: StorageSettings,
    template_dir: Path,
    client: ReportFarmClient,
    tmp_path: Path,
    permissions: finishing.Permissions,
) -> None:
    item = Submission(
        template="achievement",
        data=example("achievement"),
        finish=finishing.Finish(permissions=permissions),
    )
    [(record, pdf)] = await render(client, storage, template_dir, [item])
    info = pdfinfo(pdf, tmp_path)  # opens it with no password
    yes_no = {True: "yes", False: "no"}
    assert info["Encrypted"] == (
        f"yes (print:{yes_no[permissions.print]} copy:{yes_no[permissions.copy]} "
        f"change:{yes_no[permissions.modify]} addNotes:{yes_no[permissions.annotate]} "
        "algorithm:AES-256)"
    )
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    assert reader.is_encrypted
    assert reader.decrypt("") != pypdf.PasswordType.NOT_DECRYPTED
    assert example("achievement")["student"]["name"] in (reader.pages[0].extract_text() or "")
    assert "finish_permissions" in record.stages_ms
