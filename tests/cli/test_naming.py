"""PDF names a person can find: patterns, the job-id fallback, safe and unique names, the index."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from reportfarm import naming


def job(job_id: str, data: dict[str, object], *, template: str = "achievement", index: int = 1):
    return naming.Job(job_id=job_id, template=template, data=data, index=index)


STUDENT = {"student": {"name": "林雨桐", "no": 20231015}}


@pytest.mark.parametrize(
    ("pattern", "data", "expected"),
    [
        pytest.param("{template}-{data.student.name}", STUDENT, "achievement-林雨桐.pdf", id="cjk"),
        pytest.param("{data.student.no}", STUDENT, "20231015.pdf", id="number"),
        pytest.param(
            "{template}-{data.student.email}", STUDENT, "achievement-j1.pdf", id="missing"
        ),
        pytest.param("{data.student}", STUDENT, "j1.pdf", id="not-a-plain-value"),
        pytest.param("{data.name}", {"name": ""}, "j1.pdf", id="empty"),
        pytest.param("{data.name}", {"name": "a/b\\c:d*e"}, "a-b-c-d-e.pdf", id="separators"),
        pytest.param("{data.name}", {"name": "../../etc/passwd"}, "etc-passwd.pdf", id="traversal"),
        pytest.param("{data.name}", {"name": "  Ann  Lee\n"}, "Ann-Lee.pdf", id="whitespace"),
        pytest.param("{data.name}", {"name": ".."}, "j1.pdf", id="dots-only"),
        pytest.param("{index}-{template}", {}, "1-achievement.pdf", id="index"),
    ],
)
def test_a_pattern_names_a_file(pattern: str, data: dict[str, object], expected: str) -> None:
    assert naming.file_names([job("j1", data)], pattern=pattern) == {"j1": expected}


def test_names_are_unique_and_ordered_by_input() -> None:
    jobs = [job(f"j{n}", {"name": name}) for n, name in enumerate(["Ann", "ann", "Ann", "Bo"])]
    names = naming.file_names(jobs, pattern="{data.name}")
    assert list(names.values()) == ["Ann.pdf", "ann-2.pdf", "Ann-3.pdf", "Bo.pdf"]


def test_a_long_name_is_cut_at_a_character_boundary() -> None:
    (name,) = naming.file_names([job("j1", {"name": "桐" * 200})], pattern="{data.name}").values()
    assert len(name.encode()) <= 160
    assert name.endswith("桐.pdf")


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("{student.name}", id="unknown-field"),
        pytest.param("{data.}", id="empty-data-field"),
        pytest.param("report", id="no-field"),
        pytest.param("{template", id="unbalanced"),
    ],
)
def test_a_bad_pattern_says_what_to_use(pattern: str) -> None:
    with pytest.raises(naming.PatternError, match="--name"):
        naming.check(pattern)


def test_the_index_lists_every_job(tmp_path: Path) -> None:
    rows = [
        naming.IndexRow(file="a-林.pdf", job_id="j1", template="a", state="succeeded"),
        naming.IndexRow(file="", job_id="j2", template="a", state="failed", error="bad, data"),
    ]
    path = naming.write_index(tmp_path, rows)
    with path.open(encoding="utf-8") as handle:
        read = list(csv.DictReader(handle))
    assert read == [
        {"file": "a-林.pdf", "job_id": "j1", "template": "a", "state": "succeeded", "error": ""},
        {"file": "", "job_id": "j2", "template": "a", "state": "failed", "error": "bad, data"},
    ]
