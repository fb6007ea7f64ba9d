"""Resource abuse end to end: each job fails within its bound, with a clear reason in the poison
queue and in its result record, and the renderer serves the next job as before.

The bounds, tightened for the test (production defaults in brackets):

- render timeout 10 s [180 s], poisoned at the first timeout [after 2 deliveries]: an endless
  script; a document of 5,000 pages (Chromium needs far longer than 10 s to print it; should a
  fast machine print it in time, the PDF cap catches it instead: 5,000 pages are ~2.5 MB);
- PDF cap 1 MiB [100 MiB];
- data cap 2 MiB [16 MiB]: larger data travels as a payload blob (the client decides) and is
  refused before it is parsed; a small payload nested 5,000 levels deep is refused at once when
  parsed (not retried as if storage were away);
- the template bounds (not tunable): recursion depth (a template that recurses, or data that
  drives a recursive template too deep) and the sandbox's range cap (data asking for a billion
  rows; the 20 MiB HTML bound behind it is unit-tested in tests/templates).

"Serves as before": after each case a plain job succeeds, the pool has its full live count, no
browser is stuck busy, the worker's task runs and /readyz says 200. No timing is asserted.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from reportfarm import azurite, contract
from reportfarm.client import Submission

from .conftest import Farm, farm, write_templates

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.azurite,
    pytest.mark.asyncio(loop_scope="module"),
]

RENDER_TIMEOUT_S = 10.0
MAX_PDF_BYTES = 2**20
MAX_DATA_BYTES = 2 * 2**20

TEMPLATES = {
    "plain.html": "<p>{{ name }}</p>",
    "spin.html": "{# reportfarm: javascript #}\n<p>spinning</p><script>while (true) {}</script>",
    "pages.html": (
        "<style>div { height: 290mm; page-break-after: always; }</style>"
        "{% for i in range(rows) %}<div>row {{ i }}</div>{% endfor %}"
    ),
    "recurse.html": "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
    "tree.html": (
        "{% for node in [root] recursive %}<ul><li>{{ node.name }}"
        "{% if node.children %}{{ loop(node.children) }}{% endif %}</li></ul>{% endfor %}"
    ),
}

caught: dict[str, str] = {}
"""Case -> the bound that caught it, for the summary line."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def abuse(
    azurite_server: azurite.Azurite, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Farm]:
    templates = write_templates(tmp_path_factory.mktemp("abuse") / "templates", TEMPLATES)
    async with farm(
        azurite_server,
        templates,
        render_timeout=RENDER_TIMEOUT_S,
        max_render_timeouts=1,
        max_pdf_bytes=MAX_PDF_BYTES,
        max_data_bytes=MAX_DATA_BYTES,
    ) as started:
        yield started


async def send_raw(abuse: Farm, template: str, data: dict[str, Any]) -> str:
    """Put a job on the queue as another SDK would: its JSON, base64-encoded. (Our client's
    ``Job.to_dict`` copies the data with ``dataclasses.asdict``, which recurses: it cannot even
    send data nested a few hundred levels deep.)"""
    job_id = contract.new_job_id()
    body = {"job_id": job_id, "template": template, "data": data}
    await abuse.queue.send(base64.b64encode(json.dumps(body).encode()).decode())
    return job_id


async def fails(
    abuse: Farm, template: str, data: dict[str, Any], *, raw: bool = False
) -> tuple[Any, str]:
    """Submit one job; return its (failed) result record and its reason in the poison queue."""
    if raw:
        job_id = await send_raw(abuse, template, data)
    else:
        job_id = await abuse.client.submit(Submission(template=template, data=data))
    record = (await abuse.client.wait([job_id], timeout_s=180))[job_id]
    assert record is not None, f"job {job_id} did not end"
    assert record.state == "failed", record
    reason = await abuse.poison_reason(job_id)
    assert reason == record.error
    assert "\n" not in reason and "Traceback" not in reason
    return record, reason


async def test_an_endless_script_hits_the_render_timeout(abuse: Farm) -> None:
    record, reason = await fails(abuse, "spin", {})
    assert reason.startswith("render timed out on 1 deliveries"), reason
    assert f"{RENDER_TIMEOUT_S}s" in reason
    assert record.attempts == 1
    replaced = abuse.metric("reportfarm_browser_restarts_total", {"reason": "render_timeout"})
    assert replaced >= 1  # the hung browser was closed and replaced
    caught["endless script"] = f"render timeout ({RENDER_TIMEOUT_S:.0f} s)"
    await abuse.serving()


async def test_five_thousand_pages_fail_within_the_render_timeout_or_the_pdf_cap(
    abuse: Farm,
) -> None:
    record, reason = await fails(abuse, "pages", {"rows": 5000})
    if reason.startswith("render timed out"):
        caught["5,000 pages"] = f"render timeout ({RENDER_TIMEOUT_S:.0f} s)"
    else:
        assert reason.startswith("PDF is ") and f"over the limit of {MAX_PDF_BYTES}" in reason
        caught["5,000 pages"] = f"PDF cap ({MAX_PDF_BYTES} bytes)"
    assert not record.output_blob
    state = await abuse.serving()
    assert state["live"] == state["size"] and state["busy"] == 0


async def test_a_modest_document_of_the_same_template_still_prints(abuse: Farm) -> None:
    """The bounds refuse abuse, not work: 100 pages print well within both."""
    job_id = await abuse.client.submit(Submission(template="pages", data={"rows": 100}))
    record = (await abuse.client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None and record.state == "succeeded", record
    assert record.output_bytes is not None and 0 < record.output_bytes < MAX_PDF_BYTES


async def test_megabytes_of_data_travel_as_a_payload_and_the_cap_refuses_them(
    abuse: Farm,
) -> None:
    ballast = "数据" * (MAX_DATA_BYTES // 3)  # ~4 MiB of UTF-8: twice the cap
    job_id = await abuse.client.submit(
        Submission(template="plain", data={"name": "big", "ballast": ballast})
    )
    assert await abuse.client.blobs.exists(contract.payload_blob(job_id))
    record = (await abuse.client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None and record.state == "failed", record
    assert record.error_kind == "permanent"
    reason = await abuse.poison_reason(job_id)
    assert reason.startswith("payload is ") and f"limit of {MAX_DATA_BYTES} bytes" in reason
    caught["4 MiB of data"] = f"data cap ({MAX_DATA_BYTES} bytes), before parsing"
    await abuse.serving()


async def test_data_under_the_cap_travels_as_a_payload_and_renders(abuse: Farm) -> None:
    ballast = "x" * (MAX_DATA_BYTES // 2)
    job_id = await abuse.client.submit(
        Submission(template="plain", data={"name": "big but allowed", "ballast": ballast})
    )
    assert await abuse.client.blobs.exists(contract.payload_blob(job_id))
    record = (await abuse.client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None and record.state == "succeeded", record


async def test_a_payload_nested_too_deep_is_refused_at_once(abuse: Farm) -> None:
    job_id = contract.new_job_id()
    name = contract.payload_blob(job_id)
    deep = b'{"a": ' * 5000 + b"1" + b"}" * 5000
    await abuse.client.blobs.put(name, deep, content_type="application/json")
    body = {"job_id": job_id, "template": "plain", "data_blob": name}
    await abuse.queue.send(base64.b64encode(json.dumps(body).encode()).decode())
    record = (await abuse.client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None and record.state == "failed", record
    assert (record.attempts, record.error_kind) == (1, "permanent"), record.error
    caught["5,000-deep payload"] = "payload parsing (permanent)"
    await abuse.serving()


@pytest.mark.parametrize(
    ("template", "data", "bound", "expected"),
    [
        pytest.param(
            "recurse", {}, "template recursion", "recursion too deep", id="recursive-macro"
        ),
        pytest.param(
            "tree",
            {"root": json.loads('{"name": "n", "children": [' * 250 + "]}" * 250)},
            "template recursion (driven by 250-deep data)",
            "recursion too deep",
            id="250-deep-data",
        ),
        pytest.param(
            "pages",
            {"rows": 10**9},
            "the sandbox's range cap (100,000)",
            "Range too big",
            id="billion-rows",
        ),
    ],
)
async def test_runaway_templates_are_poisoned(
    abuse: Farm,
    template: str,
    data: dict[str, Any],
    bound: str,
    expected: str,
    request: pytest.FixtureRequest,
) -> None:
    record, reason = await fails(abuse, template, data, raw=True)
    assert record.error_kind == "permanent"
    assert reason.startswith(f"TemplateRenderError: template '{template}' failed"), reason
    assert expected in reason, reason
    caught[request.node.callspec.id] = bound
    await abuse.serving()


async def test_summary_what_caught_each_case(
    abuse: Farm, capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print("\nresource abuse, caught by:")
        for case, bound in caught.items():
            print(f"  {case}: {bound}")
    assert abuse.renderer.pool.live == abuse.renderer.pool.size
