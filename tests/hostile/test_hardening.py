"""The holes issue 11 found, end to end: job messages on the queue, a real renderer and Chromium.

1. A document error (a header template Chromium cannot print) fails its job once, as a document
   error with its reason; no browser is replaced.
2. No sequence of documents crashes the warm browser: jobs with subframes, one after another.
3. A job reads only its own payload and writes only its own outputs, whoever wrote the message.

Messages go on the queue raw (JSON, base64), as any other producer could send them: the client
refuses the same jobs before sending (tests/contract).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from reportfarm import azurite, contract
from reportfarm.client import Submission
from tests.harness import metrics

from .conftest import Farm, farm, pdf_text, record_of, write_templates

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.azurite,
    pytest.mark.asyncio(loop_scope="module"),
]

TEMPLATES = {
    "page.html": "<p>JOB-{{ case }}</p>{{ body | safe }}",
    "plain.html": "<p>{{ name }}</p>",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hardened(
    azurite_server: azurite.Azurite, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Farm]:
    templates = write_templates(tmp_path_factory.mktemp("hardening") / "templates", TEMPLATES)
    async with farm(azurite_server, templates, max_dequeue_count=5) as started:
        yield started


async def send_raw(hardened: Farm, body: dict[str, Any]) -> str:
    await hardened.queue.send(base64.b64encode(json.dumps(body).encode()).decode())
    return str(body["job_id"])


def restarts(hardened: Farm) -> float:
    registry = hardened.renderer.parts.metrics.registry
    return metrics.total(registry, "reportfarm_browser_restarts")


async def ends(hardened: Farm, job_id: str) -> contract.ResultRecord:
    return record_of(await hardened.client.wait([job_id], timeout_s=120), job_id)  # type: ignore[no-any-return]


# -- 1. the document's fault is the document's ----------------------------------------------------


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        pytest.param(
            '<link rel="stylesheet" href="data:text/css,@import url(http://127.0.0.1:9/x.css);">',
            # Chromium's own words, whichever client call carried the print (Page.pdf before the
            # streamed print, CDPSession.send since)
            r"DocumentError: printing the document failed: \S+: Protocol error "
            r"\(Page\.printToPDF\): Printing failed",
            id="print-fails",
        ),
        pytest.param(
            '<link rel="stylesheet" href="http://127.0.0.1:9/x.css">',
            re.escape("invalid message: pdf.header_template references 'http://127.0.0.1:9/x.css'"),
            id="external-stylesheet",
        ),
    ],
)
async def test_a_header_the_browser_cannot_print_fails_once_and_replaces_no_browser(
    hardened: Farm, header: str, reason: str
) -> None:
    before = restarts(hardened)
    job_id = await send_raw(
        hardened,
        {
            "job_id": contract.new_job_id(),
            "template": "plain",
            "data": {"name": "with a header"},
            "pdf": {"display_header_footer": True, "header_template": header},
        },
    )
    record = await ends(hardened, job_id)
    assert (record.state, record.attempts, record.error_kind) == ("failed", 1, "permanent")
    assert record.error is not None and re.match(reason, record.error), record.error
    assert await hardened.poison_reason(job_id) == record.error
    assert restarts(hardened) == before, "a document error replaced a browser"
    await hardened.serving()


# -- 2. no sequence of documents crashes the browser ------------------------------------------------

SEQUENCE = [
    ("data-iframe", '<iframe src="data:text/html,<p>frame</p>"></iframe>'),
    ("srcdoc", '<iframe srcdoc="<p>srcdoc</p>"></iframe>'),
    ("data-object", '<object data="data:text/html,<p>object</p>"></object>'),
    ("srcdoc-again", '<iframe srcdoc="<p>srcdoc</p>"></iframe>'),
    ("both", '<iframe src="data:text/html,x"></iframe><iframe srcdoc="<p>y</p>"></iframe>'),
    ("plain", "<p>plain</p>"),
]


async def test_jobs_with_subframes_one_after_another_never_crash_the_browser(
    hardened: Farm,
) -> None:
    """Job two used to pay for job one: a data: subframe then an <iframe srcdoc> on the warm page
    killed Chromium during job two's set_content, and job two was delivered again."""
    before = restarts(hardened)
    for case, body in SEQUENCE:  # one at a time: each on the page the one before left
        job_id = await hardened.client.submit(
            Submission(template="page", data={"case": case, "body": body})
        )
        record = await ends(hardened, job_id)
        assert (record.state, record.attempts) == ("succeeded", 1), (case, record.error)
        assert f"JOB-{case}" in pdf_text(await hardened.client.download(record))
    assert restarts(hardened) == before, "a browser was replaced during the sequence"


# -- 3. a job touches only its own blobs ------------------------------------------------------------


async def victim(hardened: Farm) -> tuple[str, dict[str, bytes]]:
    """A job that succeeded, with a large payload and a gateway-style note, and their bytes."""
    job_id = contract.new_job_id()
    secret = "VICTIM-SECRET " * 4000  # past the inline limit: travels as a payload blob
    await hardened.client.submit(Submission(template="plain", data={"name": secret}, job_id=job_id))
    record = await ends(hardened, job_id)
    assert record.state == "succeeded"
    blobs = hardened.client.blobs
    await blobs.put(
        contract.job_note_blob(job_id), b'{"tenant": "victim"}', content_type="application/json"
    )
    await blobs.put(
        contract.batch_manifest_blob(f"{job_id}-batch"),
        b'{"count": 1}',
        content_type="application/json",
    )
    names = [
        contract.result_blob(job_id),
        contract.default_output_blob(job_id),
        contract.payload_blob(job_id),
        contract.job_note_blob(job_id),
        contract.batch_manifest_blob(f"{job_id}-batch"),
    ]
    return job_id, {name: await blobs.get(name) for name in names}


async def test_a_message_cannot_overwrite_or_read_another_jobs_blobs(hardened: Farm) -> None:
    target, before = await victim(hardened)
    attacks = {
        f"output_blob={name}": {"data": {"name": "OVERWRITTEN"}, "output_blob": name}
        for name in before
    }
    attacks["data_blob=victim's payload"] = {"data_blob": contract.payload_blob(target)}
    attacks["output_blob=poison/x.txt"] = {"data": {"name": "x"}, "output_blob": "poison/x.txt"}
    reasons = {}
    for attack, fields in attacks.items():
        job_id = await send_raw(
            hardened, {"job_id": contract.new_job_id(), "template": "plain", **fields}
        )
        record = await ends(hardened, job_id)
        assert (record.state, record.attempts) == ("failed", 1), (attack, record)
        assert record.output_blob is None, attack
        reasons[attack] = await hardened.poison_reason(job_id)
    for attack, reason in reasons.items():
        assert reason.startswith("invalid message: "), reason
        assert "a job writes only its own outputs" in reason or (
            "a job reads only its own payload" in reason
        ), (attack, reason)
    after = {name: await hardened.client.blobs.get(name) for name in before}
    assert after == before, "a victim's blob changed"
    record = record_of(await hardened.client.wait([target], timeout_s=5), target)
    assert "VICTIM-SECRET" in pdf_text(await hardened.client.download(record))


async def test_a_job_writes_an_output_it_names_in_its_own_folder(hardened: Farm) -> None:
    job_id = contract.new_job_id()
    output = contract.named_output_blob(job_id, "q3.report.pdf")
    await send_raw(
        hardened,
        {"job_id": job_id, "template": "plain", "data": {"name": "named"}, "output_blob": output},
    )
    record = await ends(hardened, job_id)
    assert (record.state, record.output_blob) == ("succeeded", output)
    assert "named" in pdf_text(await hardened.client.blobs.get(output))
