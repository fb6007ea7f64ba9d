"""Webhook signatures and the network policy: pure checks, no I/O."""

from __future__ import annotations

import ipaddress

import pytest
from reportfarm_gateway.webhooks import signing

from reportfarm import netpolicy

BODY = b'{"job_id":"j1","state":"succeeded"}'


def test_a_signature_verifies_over_the_exact_body_and_timestamp() -> None:
    header = signing.sign("s3cret", BODY, timestamp=1_700_000_000)
    assert header.startswith("t=1700000000,v1=")
    assert signing.verify("s3cret", header, BODY, now=1_700_000_100) == 1_700_000_000


@pytest.mark.parametrize(
    ("secret", "body", "now", "why"),
    [
        pytest.param("other", BODY, 1_700_000_000, "does not match", id="wrong-secret"),
        pytest.param("s3cret", BODY + b" ", 1_700_000_000, "does not match", id="tampered"),
        pytest.param("s3cret", BODY, 1_700_001_000, "tolerance", id="replayed-late"),
    ],
)
def test_a_bad_signature_is_refused(secret: str, body: bytes, now: float, why: str) -> None:
    header = signing.sign("s3cret", BODY, timestamp=1_700_000_000)
    with pytest.raises(signing.SignatureError, match=why):
        signing.verify(secret, header, body, now=now)


@pytest.mark.parametrize("header", [None, "", "v1=abc", "t=x,v1=abc"])
def test_a_malformed_header_is_refused(header: str | None) -> None:
    with pytest.raises(signing.SignatureError):
        signing.verify("s3cret", header, BODY, now=1_700_000_000)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        pytest.param("93.184.216.34", True, id="public-v4"),
        pytest.param("2606:4700::1111", True, id="public-v6"),
        pytest.param("127.0.0.1", False, id="loopback"),
        pytest.param("10.1.2.3", False, id="private-10"),
        pytest.param("172.16.0.1", False, id="private-172"),
        pytest.param("192.168.1.1", False, id="private-192"),
        pytest.param("100.64.0.1", False, id="shared-cgnat"),
        pytest.param("169.254.169.254", False, id="metadata-link-local"),
        pytest.param("0.0.0.0", False, id="unspecified"),
        pytest.param("224.0.0.1", False, id="multicast"),
        pytest.param("240.0.0.1", False, id="reserved"),
        pytest.param("::1", False, id="loopback-v6"),
        pytest.param("fe80::1", False, id="link-local-v6"),
        pytest.param("fd00::1", False, id="unique-local-v6"),
        pytest.param("::ffff:127.0.0.1", False, id="v4-mapped-loopback"),
        pytest.param("2002:7f00:1::", False, id="6to4-loopback"),
        pytest.param("64:ff9b::a00:1", False, id="nat64-private"),
    ],
)
def test_only_public_addresses_are_public(address: str, public: bool) -> None:
    assert netpolicy.is_public_address(ipaddress.ip_address(address)) is public


async def test_the_policy_allows_listed_networks_and_refuses_the_rest() -> None:
    policy = netpolicy.NetworkPolicy(allowed_networks=netpolicy.parse_networks(["10.0.0.0/8"]))
    assert await policy.check_url("http://10.1.2.3:8080/hook")
    for url, reason in [
        ("http://192.168.0.1/", "address"),
        ("http://localhost/", "address"),
        ("file:///etc/passwd", "scheme"),
        ("http://user:pw@10.1.2.3/", "host"),
    ]:
        with pytest.raises(netpolicy.Refused) as refused:
            await policy.check_url(url)
        assert refused.value.reason == reason, url
    # Allowing every address, the policy looks nothing up (the connection's resolver still checks).
    assert await netpolicy.NetworkPolicy(allow_private=True).check_url("http://127.0.0.1:1/") == []
