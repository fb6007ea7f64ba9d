"""Workload identity on this machine: what AKS gives a pod, with loopback parts.

- :func:`certificate`: a self-signed certificate for 127.0.0.1 (Azurite's HTTPS, the token
  endpoint), which the SDK trusts through ``SSL_CERT_FILE`` (a process of its own) or
  :func:`trust` (this process).
- :class:`TokenEndpoint`: Entra ID's token endpoint as workload identity calls it: the federated
  service-account token (the file AKS mounts) is exchanged for a storage token. It answers with a
  JWT that Azurite's ``--oauth basic`` accepts (lifetime, issuer ``https://sts.windows.net/``,
  audience ``https://storage.azure.com``); Azurite does not check signatures.
- :func:`pod_identity_env`: the variables AKS's workload identity webhook injects into a pod whose
  service account is annotated and whose label asks for it; with them, azure-identity's
  ``DefaultAzureCredential`` takes its workload identity path.
"""

from __future__ import annotations

import http.server
import ipaddress
import json
import ssl
import threading
import time
import urllib.parse
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from reportfarm_bench import throwaway

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT_ID = "0b9a8f7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
STORAGE_AUDIENCE = "https://storage.azure.com"


def certificate(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) PEM files for 127.0.0.1 and localhost, its own trust anchor."""
    names = x509.SubjectAlternativeName(
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    )
    return throwaway.self_signed(
        folder,
        "reportfarm test 127.0.0.1",
        ec.generate_private_key(ec.SECP256R1()),
        (names, False),
        (x509.BasicConstraints(ca=True, path_length=None), True),
    )


def trust(cert: Path) -> None:
    """Make this process's aiohttp (the Azure SDK's transport) trust ``cert``.

    aiohttp builds its verifying SSL context once, at import, so ``SSL_CERT_FILE`` set by a test
    comes too late for this process (child processes read it at their start)."""
    import aiohttp.connector

    aiohttp.connector._SSL_CONTEXT_VERIFIED.load_verify_locations(cafile=str(cert))


def storage_token(*, audience: str = STORAGE_AUDIENCE, lifetime_s: int = 3600) -> str:
    now = int(time.time())
    claims = {
        "aud": audience,
        "iss": f"https://sts.windows.net/{TENANT}/",
        "iat": now - 60,
        "nbf": now - 60,
        "exp": now + lifetime_s,
        "appid": CLIENT_ID,
        "tid": TENANT,
        "oid": "5e2a4c1b-0000-4000-8000-000000000001",
    }
    return jwt.encode(claims, "azurite-checks-no-signature-so-any-key-will-do", algorithm="HS256")


class TokenEndpoint:
    """``POST /<tenant>/oauth2/v2.0/token`` over HTTPS on loopback, in a thread.

    It grants a storage token only for the client id and the federated token it was given (as
    Entra ID checks the federated credential's subject), and counts the grants."""

    def __init__(self, *, tls: tuple[Path, Path], federated_token: str) -> None:
        self.federated_token = federated_token
        self.grants = 0
        self.refusals: list[str] = []
        self.audience = STORAGE_AUDIENCE
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                status, body = endpoint._answer(self.path, form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def authority(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def _answer(self, path: str, form: dict[str, list[str]]) -> tuple[int, dict[str, object]]:
        def first(key: str) -> str:
            return (form.get(key) or [""])[0]

        problems = [
            problem
            for problem, bad in (
                (f"path {path}", path != f"/{TENANT}/oauth2/v2.0/token"),
                ("client id", first("client_id") != CLIENT_ID),
                ("federated token", first("client_assertion") != self.federated_token),
                ("scope", not first("scope").startswith(STORAGE_AUDIENCE)),
            )
            if bad
        ]
        if problems:
            self.refusals.append(", ".join(problems))
            return 401, {"error": "invalid_client", "error_description": ", ".join(problems)}
        self.grants += 1
        token = storage_token(audience=self.audience)
        return 200, {"token_type": "Bearer", "expires_in": 3600, "access_token": token}

    def __enter__(self) -> TokenEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def pod_identity_env(*, authority: str, token_file: Path) -> dict[str, str]:
    """What AKS's workload identity webhook adds to a pod (``azure.workload.identity/use``)."""
    return {
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_TENANT_ID": TENANT,
        "AZURE_FEDERATED_TOKEN_FILE": str(token_file),
        "AZURE_AUTHORITY_HOST": authority,
    }
