"""Data for the month-end statement example (``examples/templates/statement.html``) of any size.

The statement's page count follows its number of lines, so one template gives the 2-, 50- and
500-page documents of ``reportfarm bench pages``. The data is made up but deterministic (a seeded
generator), so every run prints the same documents.
"""

from __future__ import annotations

import random
from typing import Any

from reportfarm import contract

TEMPLATE = "statement"
LINES_PER_PAGE = 46
"""Lines in each page's table (the template's ``per_page``: what fits an A4 page)."""
FIRST_PAGE_LINES = 22
"""Lines on the first page, below the masthead, the student's card and the summary (the
template's ``first_page``)."""
_ACTIVITIES = ("新词", "复习", "测验")
_UNITS = (
    "必修一 Unit 3",
    "必修二 Unit 1",
    "选修三 Unit 5",
    "高频易错词",
    "阅读理解词汇",
    "完形填空词汇",
)


def lines_for(pages: int) -> int:
    """Lines for about ``pages`` pages (the first page also holds the masthead)."""
    return max(1, FIRST_PAGE_LINES + (pages - 1) * LINES_PER_PAGE)


def report_no(lines: int) -> str:
    """The statement's number, printed on its last line: a PDF that has it is whole."""
    return f"KS-STM-202605-{lines:05d}"


def statement(lines: int, *, seed: int = 2026) -> dict[str, Any]:
    """A month-end statement of ``lines`` practice sessions."""
    rng = random.Random(seed)
    entries = []
    for index in range(lines):
        items = rng.randint(10, 60)
        correct = rng.randint(items // 2, items)
        entries.append(
            {
                "date": f"2026-05-{1 + index * 31 // max(lines, 1):02d}",
                "time": f"{rng.randint(6, 22):02d}:{rng.randint(0, 59):02d}",
                "activity": rng.choice(_ACTIVITIES),
                "unit": rng.choice(_UNITS),
                "items": items,
                "correct": correct,
                "points": correct * 2 - (items - correct),
            }
        )
    return {
        "report_no": report_no(lines),
        "generated_at": "2026-06-01T02:00:00+08:00",
        "student": {
            "name": "林雨桐",
            "school": "浙江省杭州第十四中学",
            "class": "高三（2）班",  # noqa: RUF001 - Chinese punctuation
            "student_no": "20231015",
        },
        "exam": {"name": "2026年普通高等学校招生全国统一考试 · 英语", "date": "2026-06-07"},
        "month": "2026-05",
        "opening_balance": 1200,
        "lines": entries,
    }


def pdf_options() -> contract.PdfOptions:
    """The statement prints with the defaults: its CSS ``@page`` sets size and margins."""
    return contract.PdfOptions()
