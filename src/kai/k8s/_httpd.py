"""The one small HTTP/1.1 server kai runs (``/metrics`` and probes, the dashboard): one request per
connection, a route function per server, nothing else.

Rules: ``route(method, path)`` answers (status, content type, body, extra headers); the path comes without
its query string. A client that sends nothing within the timeout, or too long a request head, is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

Answer = tuple[int, str, bytes, dict[str, str]]
Route = Callable[[str, str], Awaitable[Answer]]
REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
MAX_HEAD = 8192


async def serve(host: str, port: int, route: Route, *, timeout: float = 5.0) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=timeout)
            parts = head.split(b"\r\n", 1)[0].split(b" ")
            method = parts[0].decode(errors="replace")
            path = parts[1].decode(errors="replace").split("?", 1)[0] if len(parts) > 1 else "/"
            status, ctype, body, headers = await route(method, path)
            extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            writer.write(
                f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"{extra}Connection: close\r\n\r\n".encode()
                + (body if method != "HEAD" else b"")
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEAD)
