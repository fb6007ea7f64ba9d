"""One network guard: the same address spellings through both of its users, the same verdict.

The renderer's document guard (``NetworkGuard.fetch``, what an intercepted request runs) and the
webhook dispatcher (``delivering.post``) both connect through the core's ``NetworkPolicy``. Each
URL below is handed to both for real; a canary listens on 127.0.0.1, 127.0.0.2 and ::1 at one port
and records what reached it. The documents' host allowlist is their own addition, so here it lists
every host of the table: what is compared is the verdict on scheme, host and address.

Before the guard was one, the two disagreed on several rows here (user:password in a URL, a bad
port, an IPv6 zone): the document guard fetched or failed where the webhook side refused.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from reportfarm_gateway.webhooks import delivering
from reportfarm_renderer import network

from reportfarm import netpolicy

LAB = "127.0.0.2"
"""Stands for an allowed address: the policies below list it in allowed_networks."""

DNS = {
    "lab.test": [LAB],
    "loopback.test": ["127.0.0.1"],
    "mixed.test": [LAB, "10.0.0.5"],
    "metadata.test": ["169.254.169.254"],
    "v6loop.test": ["::1"],
}

ALLOWED = None
CASES = [
    pytest.param("http://{lab}/", ALLOWED, id="allowed-network-literal"),
    pytest.param("http://lab.test:{port}/", ALLOWED, id="allowed-name"),
    pytest.param("http://LAB.Test.:{port}/", ALLOWED, id="allowed-name-case-and-dot"),
    pytest.param("http://127.0.0.1:{port}/", "address", id="loopback"),
    pytest.param("http://2130706433:{port}/", "address", id="loopback-decimal"),
    pytest.param("http://0x7f000001:{port}/", "address", id="loopback-hex"),
    pytest.param("http://127.1:{port}/", "address", id="loopback-short"),
    pytest.param("http://[::1]:{port}/", "address", id="loopback-v6-bracketed"),
    pytest.param("http://[::ffff:127.0.0.1]:{port}/", "address", id="loopback-v4-mapped"),
    pytest.param("http://[::ffff:7f00:1]:{port}/", "address", id="loopback-v4-mapped-hex"),
    pytest.param("http://0.0.0.0:{port}/", "address", id="unspecified"),
    pytest.param("http://169.254.169.254/latest/meta-data/", "address", id="metadata"),
    pytest.param("http://metadata.test/latest/", "address", id="metadata-by-name"),
    pytest.param("http://[fe80::1]:{port}/", "address", id="link-local-v6"),
    pytest.param("http://[fe80::1%25lo]:{port}/", "host", id="link-local-v6-zone"),
    pytest.param("http://10.0.0.5:{port}/", "address", id="private-10"),
    pytest.param("http://172.16.3.4:{port}/", "address", id="private-172"),
    pytest.param("http://192.168.1.1:{port}/", "address", id="private-192"),
    pytest.param("http://100.64.0.1:{port}/", "address", id="shared-cgnat"),
    pytest.param("http://[fd00::1]:{port}/", "address", id="unique-local-v6"),
    pytest.param("http://loopback.test:{port}/", "address", id="name-to-loopback"),
    pytest.param("http://v6loop.test:{port}/", "address", id="name-to-v6-loopback"),
    pytest.param("http://mixed.test:{port}/", "address", id="one-private-answer"),
    pytest.param("http://gone.test:{port}/", "dns", id="unresolvable"),
    pytest.param("http://user:pw@lab.test:{port}/", "host", id="userinfo"),
    pytest.param("http://lab.test:99999/", "host", id="bad-port"),
    pytest.param("ftp://lab.test/", "scheme", id="ftp"),
    pytest.param("file:///etc/passwd", "scheme", id="file"),
]


async def lab_dns(host: str, port: int) -> list[netpolicy.IPAddress]:
    """The table's names; everything else (``2130706433``, ``0x7f000001``) from the system."""
    if host in DNS:
        return [ipaddress.ip_address(address) for address in DNS[host]]
    if host.endswith(".test"):
        raise OSError(f"{host}: name not known")
    return await netpolicy.resolve_host(host, port)


@contextlib.asynccontextmanager
async def canary() -> AsyncIterator[tuple[int, list[str]]]:
    """One port on 0.0.0.0 and ::1 that records each request's path."""
    hits: list[str] = []

    async def record(request: web.Request) -> web.Response:
        hits.append(request.path_qs)
        return web.Response(status=204)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    await web.TCPSite(runner, host="0.0.0.0", port=port).start()
    await web.TCPSite(runner, host="::1", port=port).start()
    try:
        yield port, hits
    finally:
        await runner.cleanup()


def _hosts(urls: list[str]) -> list[str]:
    """Every host of the table, IPv6 ones bracketed (the allowlist accepts either spelling)."""
    hosts = []
    for url in urls:
        host = urlsplit(url).hostname or ""
        hosts.append(f"[{host}]" if ":" in host else host)
    return hosts


async def document_verdict(guard: network.NetworkGuard, url: str) -> str | None:
    try:
        await guard.fetch(url, "GET")
    except netpolicy.Refused as refused:
        return refused.reason
    except Exception as error:  # shown in the table of verdicts, not as a crash
        return f"failed: {error!r}"
    return ALLOWED


async def webhook_verdict(policy: netpolicy.NetworkPolicy, url: str) -> str | None:
    webhook = delivering.Webhook(
        subject="job-1", event="job.finished", url=url, key="k-1", payload={"ok": True}
    )
    async with policy.session(timeout_s=5) as session:
        attempt = await delivering.post(session, policy, webhook, secret="s", attempt=1)
    if attempt.outcome == "refused":
        return (attempt.error or "").partition(":")[0]
    return ALLOWED if attempt.ok else f"{attempt.outcome}: {attempt.error}"


async def test_both_users_of_the_guard_give_the_same_verdict() -> None:
    networks = netpolicy.parse_networks([LAB])
    async with canary() as (port, hits):
        urls = [str(case.values[0]).format(port=port, lab=f"{LAB}:{port}") for case in CASES]
        documents = network.NetworkGuard(
            policy=netpolicy.NetworkPolicy.for_documents(
                _hosts(urls), allowed_networks=networks, resolver=lab_dns
            )
        )
        webhooks = netpolicy.NetworkPolicy(allowed_networks=networks, resolver=lab_dns)
        verdicts = {}
        try:
            for case, url in zip(CASES, urls, strict=True):
                verdicts[case.id] = (
                    await document_verdict(documents, url),
                    await webhook_verdict(webhooks, url),
                )
        finally:
            await documents.close()
    expected = {case.id: (case.values[1], case.values[1]) for case in CASES}
    assert verdicts == expected
    # Each allowed URL reached the canary twice (a GET and a POST); nothing refused reached it.
    assert len(hits) == 2 * sum(case.values[1] is ALLOWED for case in CASES)


@pytest.mark.parametrize(
    ("allowed", "url", "on_list"),
    [
        pytest.param(["lab.test"], "http://loopback.test/", False, id="exact-elsewhere"),
        pytest.param(["*.test"], "http://loopback.test/", True, id="wildcard"),
        pytest.param(["[::1]"], "http://[::1]/", True, id="bracketed-v6"),
        pytest.param(["::1"], "http://[::1]/", True, id="bare-v6"),
    ],
)
async def test_only_documents_have_a_host_allowlist(
    allowed: list[str], url: str, on_list: bool
) -> None:
    """Off the list documents are refused for the host; on it, for the address, as webhooks."""
    documents = netpolicy.NetworkPolicy.for_documents(allowed, resolver=lab_dns)
    webhooks = netpolicy.NetworkPolicy(resolver=lab_dns)
    reasons = []
    for policy in (documents, webhooks):
        with pytest.raises(netpolicy.Refused) as refused:
            await policy.check_url(url)
        reasons.append(refused.value.reason)
    assert reasons == ["address" if on_list else "host", "address"]
