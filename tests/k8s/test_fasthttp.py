"""The own HTTP/1.1 client's watch stream against a local HTTP server that answers in raw chunks.

The real API server sends one event per chunk; these cases check the framing a proxy or a busy server
may produce instead: an event split over chunks, several events in one chunk, an error status, a
connection that goes silent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kai.k8s._fasthttp import FastHttp, HttpError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _serve(handler: Handler) -> tuple[asyncio.Server, FastHttp]:
    async def wrapped(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        await handler(r, w)

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, FastHttp("127.0.0.1", port, None, lambda refresh: "t0k")


async def _collect(handler: Handler, read_timeout: float = 5.0) -> list[bytes] | tuple[int, bytes]:
    server, http = await _serve(handler)
    try:
        lines = await http.stream_lines("/api/v1/pods?watch=1", read_timeout)
        if isinstance(lines, tuple):
            return lines
        return [line async for line in lines]
    finally:
        server.close()


def test_events_split_and_joined_across_chunks_come_out_one_per_line() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (b'{"type":"ADDED","n":1}\n{"type":"MOD', b'IFIED","n":2}\n', b'{"n":3}\n{"n":4}\n', b'{"n":5}'):
            w.write(_chunk(part))
            await w.drain()
        w.write(b"0\r\n\r\n")
        await w.drain()
        w.close()

    assert asyncio.run(_collect(handler)) == [
        b'{"type":"ADDED","n":1}',
        b'{"type":"MODIFIED","n":2}',
        b'{"n":3}',
        b'{"n":4}',
        b'{"n":5}',
    ]


def test_an_error_status_comes_back_with_its_body() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        body = b'{"kind":"Status","code":403,"reason":"Forbidden","message":"no"}'
        w.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await w.drain()
        w.close()

    status, body = asyncio.run(_collect(handler))  # type: ignore[misc]
    assert status == 403 and b"Forbidden" in body


def test_a_silent_connection_times_out() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(b'{"n":1}\n'))
        await w.drain()
        await r.read()  # silent until the client gives up and closes

    async def run() -> list[bytes]:
        server, http = await _serve(handler)
        seen: list[bytes] = []
        try:
            lines = await http.stream_lines("/w", 0.3)
            assert not isinstance(lines, tuple)
            with pytest.raises(HttpError, match="TimeoutError"):
                async for line in lines:
                    seen.append(line)
        finally:
            server.close()
        return seen

    assert asyncio.run(run()) == [b'{"n":1}']


def test_a_connection_cut_mid_chunk_is_an_http_error() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"40\r\n" + b'{"n":')
        await w.drain()
        w.close()

    with pytest.raises(HttpError):
        asyncio.run(_collect(handler))
