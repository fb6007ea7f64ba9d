"""Hostile documents end to end: job messages on the queue, a real renderer, PDFs in storage.

The browser-level tests (tests/chromium/test_browser.py) prove the network guard route by route.
Here the same attacks come the way a caller sends them, as job data rendered by templates, through
the whole path: queue -> worker -> template -> Chromium -> blob store. A canary (aiohttp, loopback)
records every request it gets; it must record none. Every hostile job still ends with its PDF
(a blocked resource never fails a job) and ``reportfarm_blocked_requests_total`` counts the blocks.

The allowlist is deliberately careless (``localhost``, a name that resolves to loopback, the cloud
metadata address): the guard decides by resolved address, so allowlisting those gains nothing.
The lab on 127.0.0.2 plays the allowed public host (the guard's test hooks make that one loopback
address count as public), serving a control page and redirects to forbidden places.

Template sandbox escapes come through data (data is never template code) and through attribute
tricks; they end in the poison queue with a one-line reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from reportfarm_renderer import network

from reportfarm import azurite
from reportfarm.client import Submission

from .conftest import (
    LAB_ADDRESS,
    LOOPBACK_NAME,
    METADATA,
    Canary,
    Farm,
    Lab,
    farm,
    lab_guard,
    pdf_text,
    poison_reasons,
    write_templates,
)

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.azurite,
    pytest.mark.asyncio(loop_scope="module"),
]

TEMPLATES = {
    # A template that embeds a caller's rich-text field as HTML: the caller owns the document.
    "page.html": "<p>HOSTILE-{{ case }}</p>{{ body | safe }}",
    "script.html": "{# reportfarm: javascript #}\n<p>HOSTILE-{{ case }}</p>{{ body | safe }}",
    # An ordinary letter whose logo URL comes from the data.
    "letter.html": (
        '<p>HOSTILE-{{ case }}</p><img src="{{ logo }}">'
        "<div style=\"height:9px;background-image:url('{{ logo }}')\"></div>"
    ),
    "plain.html": "<p>{{ name }}</p>",
    # Sandbox probes: attribute names and format strings chosen by the data.
    "by_attr.html": "<p>{{ user | attr(field) }}</p>",
    "by_item.html": "<p>{{ user[field][sub] }}</p>",
    "by_format.html": "<p>{{ pattern.format(user) }}</p>",
    "mutate.html": "<p>{{ items.append(1) }}{{ items }}</p>",
    "mro.html": "<p>{{ ''.__class__.__mro__[1].__subclasses__() }}</p>",
}

ALLOWED_HOSTS = (LAB_ADDRESS, "localhost", LOOPBACK_NAME, METADATA)
"""Careless on purpose: every one but the lab resolves to a forbidden address."""

seen = {"jobs": 0}
"""What the module saw, for the summary line."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def canary() -> AsyncIterator[Canary]:
    server = Canary()
    await server.start()
    yield server
    await server.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lab(canary: Canary) -> AsyncIterator[Lab]:
    server = Lab(canary)
    await server.start()
    yield server
    await server.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hostile(
    azurite_server: azurite.Azurite,
    tmp_path_factory: pytest.TempPathFactory,
    canary: Canary,
    lab: Lab,
) -> AsyncIterator[Farm]:
    templates = write_templates(tmp_path_factory.mktemp("hostile") / "templates", TEMPLATES)
    with pytest.MonkeyPatch.context() as patch:
        # The renderer builds its guard at start-up: the lab's test hooks go in, nothing else.
        patch.setattr(network, "NetworkGuard", lab_guard)
        async with farm(azurite_server, templates, allowed_hosts=ALLOWED_HOSTS) as started:
            yield started


def routes(canary: Canary, lab: Lab) -> dict[str, tuple[str, str, set[str]]]:
    """id -> (template, body, reasons the guard must report): every route a document has."""
    c = canary.url
    hold = f'<img src="{lab.url("/slow?s=0.8")}">'  # keeps the page loading while scripts run
    return {
        "img": ("page", f'<img src="{c("/img")}">', {"host"}),
        "iframe": ("page", f'<iframe src="{c("/iframe")}"></iframe>', {"host"}),
        "stylesheet": ("page", f'<link rel="stylesheet" href="{c("/style.css")}">', {"host"}),
        "css-import": ("page", f'<style>@import url("{c("/import.css")}");</style>', {"host"}),
        "css-url": (
            "page",
            f'<div style="height:9px;background:url({c("/bg.png")})"></div>',
            {"host"},
        ),
        "font-face": (
            "page",
            f"<style>@font-face{{font-family:x;src:url({c('/f.woff')})}}"
            "p{font-family:x}</style><p>font</p>",
            {"host"},
        ),
        "meta-refresh": (
            "page",
            f'<meta http-equiv="refresh" content="0;url={c("/refresh")}">{hold}',
            set(),  # fires whenever Chromium gets to it: the canary decides
        ),
        "fetch-xhr": (
            "script",
            f"<script>fetch('{c('/fetch')}').catch(() => 0);"
            f"const x = new XMLHttpRequest(); x.open('GET', '{c('/xhr')}'); x.send();"
            f"try {{ const s = new XMLHttpRequest(); s.open('GET', '{c('/sync')}', false);"
            f" s.send(); }} catch (e) {{}}</script>{hold}",
            {"host"},
        ),
        "redirect-to-canary": (
            "page",
            f'<img src="{lab.url("/to/canary")}"><iframe src="{lab.url("/to/canary")}"></iframe>',
            {"host"},
        ),
        "redirect-to-localhost": ("page", f'<img src="{lab.url("/to/localhost")}">', {"address"}),
        "redirect-to-loopback-name": (
            "page",
            f'<img src="{lab.url("/to/loopback-name")}">',
            {"address"},
        ),
        "redirect-to-metadata": ("page", f'<img src="{lab.url("/to/metadata")}">', {"address"}),
        "redirect-to-file": ("page", f'<iframe src="{lab.url("/to/file")}"></iframe>', {"scheme"}),
        "localhost-allowlisted": ("page", f'<img src="{c("/lh", host="localhost")}">', {"address"}),
        "loopback-name-allowlisted": (
            "page",
            f'<img src="{c("/name", host=LOOPBACK_NAME)}">',
            {"address"},
        ),
        "metadata-allowlisted": (
            "page",
            f'<img src="http://{METADATA}/latest/meta-data/">'
            f'<iframe src="http://{METADATA}/latest/user-data"></iframe>',
            {"address"},
        ),
        "file": (
            "page",
            '<iframe src="file:///etc/passwd"></iframe><img src="file:///etc/hostname">'
            '<link rel="stylesheet" href="file:///etc/passwd">',
            set(),  # Chromium refuses file: from a page itself, before the guard hears of it
        ),
        "file-fetch": (
            "script",
            "<p id=o></p><script>fetch('file:///etc/passwd').then(r => r.text())"
            ".then(t => document.getElementById('o').textContent = t).catch(() => 0)</script>"
            + hold,
            set(),
        ),
        "logo-from-data": ("letter", c("/logo.png"), {"host"}),
    }


ROUTES = list(routes(Canary(), Lab(Canary())))


async def run_job(hostile: Farm, template: str, data: dict[str, Any]) -> Any:
    job_id = await hostile.client.submit(Submission(template=template, data=data))
    record = (await hostile.client.wait([job_id], timeout_s=120))[job_id]
    assert record is not None, f"job {job_id} did not end"
    return record


@pytest.mark.parametrize("case", ROUTES)
async def test_a_hostile_document_reaches_nothing_and_still_prints(
    case: str, hostile: Farm, canary: Canary, lab: Lab
) -> None:
    template, body, reasons = routes(canary, lab)[case]
    data = {"case": case, "logo": body} if template == "letter" else {"case": case, "body": body}
    before = hostile.blocked()
    record = await run_job(hostile, template, data)
    seen["jobs"] += 1
    assert record.state == "succeeded", record.error  # blocked resources never fail a job
    text = pdf_text(await hostile.client.download(record))
    assert f"HOSTILE-{case}" in text  # the document itself, not an error page
    for leak in ("CANARY-REACHED", "root:x:0:0"):
        assert leak not in text
    await asyncio.sleep(0.3)  # let anything asynchronous land
    after = hostile.blocked()
    counted = {reason for reason, value in after.items() if value > before.get(reason, 0.0)}
    assert reasons <= counted, f"blocks counted: {counted}"
    assert canary.hits == []


async def test_control_an_allowed_host_is_fetched_end_to_end(hostile: Farm, lab: Lab) -> None:
    """Zero canary hits mean something: the same path does fetch what the allowlist allows."""
    hits = len(lab.hits)
    body = f'<img src="{lab.url("/img.gif")}"><iframe src="{lab.url("/page")}"></iframe>'
    record = await run_job(hostile, "page", {"case": "allowed", "body": body})
    assert record.state == "succeeded", record.error
    assert "ALLOWED-PAGE" in pdf_text(await hostile.client.download(record))
    assert {"/img.gif", "/page"} <= set(lab.hits[hits:])


async def test_data_is_never_template_code(hostile: Farm, canary: Canary) -> None:
    injected = (
        "{{ 'EVAL' * 2 }} {% for x in range(3) %}LOOP{% endfor %} {{ cycler.__init__.__globals__ }} "
        f"<script>fetch('{canary.url('/script')}')</script><img src=\"{canary.url('/tag')}\">"
    )
    record = await run_job(hostile, "plain", {"name": injected})
    assert record.state == "succeeded", record.error
    text = pdf_text(await hostile.client.download(record))
    assert "{{ 'EVAL' * 2 }}" in text and "{% for x in range(3) %}LOOP{% endfor %}" in text
    # letters, not digits: the canary's port is in the text and may contain any number
    assert "EVALEVAL" not in text and "LOOPLOOP" not in text and "<module" not in text
    assert "<script>fetch(" in text  # escaped: shown, not run, not loaded
    assert canary.hits == []


ESCAPES = {
    "attr-filter": ("by_attr", {"user": {"name": "x"}, "field": "__class__"}),
    "getitem": ("by_item", {"user": {"name": "x"}, "field": "__class__", "sub": "__subclasses__"}),
    "format-string": (
        "by_format",
        {"user": {"name": "x"}, "pattern": "{0.__class__.__init__.__globals__}"},
    ),
    "mutate-data": ("mutate", {"items": [1, 2]}),
    "mro-subclasses": ("mro", {}),
}


async def test_sandbox_escapes_end_in_poison_with_a_clean_reason(hostile: Farm) -> None:
    jobs = {
        await hostile.client.submit(Submission(template=template, data=data)): case
        for case, (template, data) in ESCAPES.items()
    }
    results = await hostile.client.wait(list(jobs), timeout_s=120)
    reasons = poison_reasons(await hostile.wait_poison(len(jobs)))
    for job_id, case in jobs.items():
        record = results[job_id]
        assert record is not None and record.state == "failed", (case, record)
        assert record.error_kind == "permanent", case
        reason = reasons[job_id]
        assert reason == record.error
        assert reason.startswith("TemplateRenderError: template "), reason
        assert "unsafe" in reason or "SecurityError" in reason, reason
        assert "\n" not in reason and "Traceback" not in reason and "<module" not in reason
    await hostile.serving()


async def test_summary_the_canary_counted_nothing(
    hostile: Farm, canary: Canary, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = {reason: int(value) for reason, value in sorted(hostile.blocked().items())}
    with capsys.disabled():
        print(
            f"\nhostile documents end to end: canary hits {len(canary.hits)} "
            f"after {seen['jobs']} hostile jobs; requests blocked by reason {blocked}"
        )
    assert canary.hits == []
