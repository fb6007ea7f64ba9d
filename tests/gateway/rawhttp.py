"""A bare HTTP/1.1 exchange over a socket, for requests aiohttp's client will not send (header
bytes that are not UTF-8, a Content-Length that lies, a body that stalls)."""

from __future__ import annotations

import asyncio
import dataclasses


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()


async def exchange(url: str, head: bytes, body: bytes = b"", *, timeout_s: float = 30.0) -> Answer:
    """Send ``head`` (request line and headers, without the blank line) and ``body``; read the
    answer until the server closes (``Connection: close`` is added)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.rstrip(b"\r\n") + b"\r\nConnection: close\r\n\r\n" + body)
        await writer.drain()
        raw = await asyncio.wait_for(_read_answer(reader), timeout=timeout_s)
    finally:
        writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    header_block, _, content = rest.partition(b"\r\n\r\n")
    headers = {}
    for line in header_block.split(b"\r\n"):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split()[1]), headers, content)


async def _read_answer(reader: asyncio.StreamReader) -> bytes:
    """Until EOF, or as much as the answer's Content-Length says (the server may keep reading a
    body it refused)."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = await reader.read(65536)
        if not chunk:
            return raw
        raw += chunk
    head, _, content = raw.partition(b"\r\n\r\n")
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while length is None or len(content) < length:
        chunk = await reader.read(65536)
        if not chunk:
            break
        content += chunk
    return head + b"\r\n\r\n" + content
