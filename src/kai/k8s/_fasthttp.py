"""A small keep-alive HTTP/1.1 client for the API server's short requests (binds, deletes, patches, events).

Why: a bind is a ~200-byte POST answered by a ~300-byte JSON; httpx spends about 2 ms of CPU on each
(its request/response models, auth flow, pool bookkeeping), which caps a Python scheduler at a few
hundred binds per second on a busy 2-core machine. Here a request is one ``bytes`` write and a parse of
the status line, headers and a Content-Length or chunked body on a pooled TLS connection.

Rules: only what the API server needs: TLS with the kubeconfig's CA and client certificate (``kai.k8s._tls``
builds the context), a bearer token (static, or a token file re-read on 401 as
rotated ServiceAccount tokens require), keep-alive with at most ``max_connections`` connections. An
idle connection the server has closed (its end of stream already read) is not used again. A request
that fails on a reused connection before any answer arrived is sent once more, on a *new* connection,
and every other idle connection is closed first: what closed one (an API server restart, a proxy or
load balancer dropping its connections) has most likely closed them all, and trying them one by one
would fail request after request, up to ``max_connections`` of them. A bind sent twice is answered
409, which callers treat as bound. Other auth kinds (exec plugins, basic auth) are not handled: ``for_config`` returns
None and the caller keeps using httpx. Watches (``stream_lines``) each get a connection of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import urlsplit

from kai.k8s._kubeconfig import Config
from kai.k8s._tls import ResumingContext, tls_context

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Gate = Callable[[], None]  # raises to stop a request before it is written
# TCP keepalive: a peer that vanished (a node lost, a NAT entry dropped) is noticed after about
# KEEPIDLE + KEEPINTVL * KEEPCNT = 30 s of silence, instead of the kernel's two hours.
KEEPIDLE_S, KEEPINTVL_S, KEEPCNT = 15, 5, 3


def keepalive(sock: socket.socket | None) -> None:
    """Turn TCP keepalive on for *sock* (Linux's per-socket timings where the platform has them)."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt, value in (("TCP_KEEPIDLE", KEEPIDLE_S), ("TCP_KEEPINTVL", KEEPINTVL_S), ("TCP_KEEPCNT", KEEPCNT)):
            if hasattr(socket, opt):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)


class HttpError(ConnectionError):
    """The connection broke or the answer was not HTTP."""


class FastHttp:
    def __init__(
        self,
        host: str,
        port: int,
        ssl_ctx: ssl.SSLContext | None,
        token: Callable[[bool], str | None],
        *,
        max_connections: int = 64,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl_ctx
        self._token = token  # token(refresh) → bearer token or None
        self._idle: list[Conn] = []
        self._slots = asyncio.Semaphore(max_connections)
        self.max_connections = max_connections
        self._host_header = f"{host}:{port}".encode()
        self.handshakes = 0  # TLS connections opened
        self.resumed = 0  # of which resumed a session (``kai.k8s._tls``)

    @staticmethod
    def for_config(config: Config, max_connections: int = 64) -> FastHttp | None:
        """A FastHttp for *config*, or None when its auth kind is not one this client handles."""
        user = config.user
        url = urlsplit(config.cluster.server)
        if url.hostname is None:
            return None
        https = url.scheme == "https"
        port = url.port or (443 if https else 80)
        if user is not None and user.other_auth:
            return None
        ctx = tls_context(config) if https else None
        token_file = user.token_file if user is not None else None
        static = user.token if user is not None else None
        cache: list[str | None] = [None]

        def token(refresh: bool) -> str | None:
            if token_file is not None:
                if refresh or cache[0] is None:
                    cache[0] = Path(token_file).read_text().strip()
                return cache[0]
            return static

        return FastHttp(url.hostname, port, ctx, token, max_connections=max_connections)

    async def warm(self, n: int) -> int:
        """Open connections until *n* (at most ``max_connections``) are idle; how many were opened. For a
        start, while kai waits for its first lists: the TLS handshakes of the first burst of binds then
        cost neither kai nor the API server anything while the binds go out. A connection that fails to
        open is not tried again here (the request that needs one opens it)."""
        want = min(n, self.max_connections) - len(self._idle)
        if want <= 0:
            return 0
        opened = await asyncio.gather(*(self._connect() for _ in range(want)), return_exceptions=True)
        conns = [c for c in opened if not isinstance(c, BaseException)]
        self._idle.extend(conns)
        return len(conns)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, w in idle:
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()

    async def request(
        self, method: str, path: str, body: bytes | None, content_type: str, gate: Gate | None = None
    ) -> tuple[int, bytes]:
        """(status, body) of one request. *gate*, if given, is called just before the request's bytes are
        written (no await in between); whatever it raises stops the request unsent."""
        async with self._slots:
            status, data = await self._send(method, path, body, content_type, refresh=False, gate=gate)
            if status == 401 and self._token(False) is not None:
                status, data = await self._send(method, path, body, content_type, refresh=True, gate=gate)
            return status, data

    async def _send(
        self, method: str, path: str, body: bytes | None, content_type: str, *, refresh: bool, gate: Gate | None
    ) -> tuple[int, bytes]:
        raw = self._head(method, path, body, content_type, self._token(refresh)) + b"\r\n" + (body or b"")
        for attempt in range(2):
            conn = self._idle_conn() if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            try:
                status, data, keep = await self._exchange(conn, raw, gate)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, HttpError) as e:
                conn[1].close()
                if reused:  # the server had closed it, and likely every other idle one: once more on a new one
                    self._drop_idle()
                    continue
                raise HttpError(f"{type(e).__name__}: {e}") from e
            except BaseException:  # cancelled mid-exchange, or the gate refused: the connection's state is unknown
                conn[1].close()
                raise
            if keep:
                self._idle.append(conn)
            else:
                conn[1].close()
            return status, data
        raise AssertionError("unreachable")

    def _idle_conn(self) -> Conn | None:
        """An idle connection still open at both ends, or None (those the server closed are dropped)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn[0].at_eof() and not conn[1].is_closing():
                return conn
            conn[1].close()
        return None

    def sibling(self, max_connections: int) -> FastHttp:
        """A pool of its own to the same server, with the same TLS context and credentials: the kubeconfig's
        certificates are not loaded again, and its first connection resumes this one's TLS session."""
        return FastHttp(self.host, self.port, self._ssl, self._token, max_connections=max_connections)

    def _drop_idle(self) -> None:
        idle, self._idle = self._idle, []
        for _, w in idle:
            w.close()

    async def _connect(self) -> Conn:
        if isinstance(self._ssl, ResumingContext):
            self._ssl.session = self._ssl.offer()
        try:
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None
            )
        except OSError as e:
            raise HttpError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        keepalive(writer.get_extra_info("socket"))
        sslobj = writer.get_extra_info("ssl_object")
        if sslobj is not None:
            self.handshakes += 1
            if sslobj.session_reused:
                self.resumed += 1
            elif isinstance(self._ssl, ResumingContext):  # a full handshake (the first, or the ticket refused)
                self._ssl.source = sslobj  # its ticket is offered next
        return reader, writer

    async def stream_lines(self, path: str, read_timeout: float) -> AsyncIterator[bytes] | tuple[int, bytes]:
        """A watch on its own connection: the lines of the chunked answer, or (status, body) of an error.

        Each read waits at most *read_timeout* seconds (the API server sends bookmarks and events; a
        silent connection is a dead one). The connection is closed when the iteration ends."""
        token = self._token(False)
        raw = self._head("GET", path, None, "", token) + b"\r\n"
        reader, writer = await self._connect()
        try:
            async with asyncio.timeout(read_timeout):
                writer.write(raw)
                await writer.drain()
                status, length, chunked, _keep = await _read_head(reader)
                if status >= 400 or not chunked:
                    data = await _read_body(reader, length, chunked)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            writer.close()  # TimeoutError included (an OSError): the API server did not answer in time
            raise HttpError(f"{type(e).__name__}: {e}") from e
        except BaseException:
            writer.close()
            raise
        if status >= 400 or not chunked:
            writer.close()
            if status == 401:
                self._token(True)  # a rotated token: the caller's retry reads the new one
            return status, data
        return _lines(reader, writer, read_timeout)

    def _head(self, method: str, path: str, body: bytes | None, content_type: str, token: str | None) -> bytes:
        head = [f"{method} {path} HTTP/1.1".encode(), b"Host: " + self._host_header, b"Accept: application/json"]
        if token:
            head.append(f"Authorization: Bearer {token}".encode())
        if body is not None:
            head.append(f"Content-Type: {content_type}".encode())
            head.append(f"Content-Length: {len(body)}".encode())
        elif method in ("POST", "PUT", "PATCH"):
            head.append(b"Content-Length: 0")
        return b"\r\n".join(head) + b"\r\n"

    @staticmethod
    async def _exchange(conn: Conn, raw: bytes, gate: Gate | None = None) -> tuple[int, bytes, bool]:
        reader, writer = conn
        if gate is not None:
            gate()
        writer.write(raw)
        await writer.drain()
        status, length, chunked, keep = await _read_head(reader)
        data = await _read_body(reader, length, chunked)
        if length < 0 and not chunked:
            keep = False
        return status, data, keep


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, int, bool, bool]:
    """The status line and headers: (status, content length or -1, chunked, keep-alive). One read up to
    the blank line, then a split: a bind's answer costs one wake-up, not one per header line."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise HttpError(f"not an HTTP answer: {lines[0][:80]!r}")
    status = int(parts[1])
    length = -1
    chunked = False
    keep = parts[0] == b"HTTP/1.1"
    for h in lines[1:]:
        name, _, value = h.partition(b":")
        name = name.strip().lower()
        value = value.strip()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection":
            keep = value.lower() != b"close"
    return status, length, chunked, keep


async def _read_chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked body; b"" for the last one (its trailers are read too)."""
    size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
    if size == 0:
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass
        return b""
    data = await reader.readexactly(size + 2)
    return data[:-2]


async def _read_body(reader: asyncio.StreamReader, length: int, chunked: bool) -> bytes:
    if chunked:
        chunks = []
        while chunk := await _read_chunk(reader):
            chunks.append(chunk)
        return b"".join(chunks)
    if length >= 0:
        return await reader.readexactly(length)
    return await reader.read()


class _Dechunker:
    """Chunked transfer coding undone incrementally: ``feed`` bytes as they arrive, get the payload of
    every chunk completed so far. ``done`` once the last (zero-size) chunk has come."""

    __slots__ = ("_buf", "done")

    def __init__(self) -> None:
        self._buf = bytearray()
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        while not self.done:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(bytes(buf[pos:eol]).split(b";", 1)[0], 16)  # ValueError on a bad size line
            if size == 0:
                self.done = True  # trailers, if any, are not read: the stream ends here
                break
            end = eol + 2 + size
            if len(buf) < end + 2:
                break
            out += buf[eol + 2 : end]
            pos = end + 2
        del buf[:pos]
        return bytes(out)


async def _lines(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout: float
) -> AsyncIterator[bytes]:
    """The non-empty lines of a chunked body (a watch sends one JSON event per line).

    Reads whatever has arrived (up to 256 KiB) and undoes the chunking itself: during a burst of binds
    the API server sends thousands of events a second, and one read then carries many of them, where
    a read per chunk size line and per chunk cost a wake-up each."""
    chunks = _Dechunker()
    rest = b""
    try:
        while not chunks.done:
            async with asyncio.timeout(read_timeout):  # per read, never across a yield
                data = await reader.read(262144)
            if not data:
                raise asyncio.IncompleteReadError(b"", None)  # the connection ended mid-stream
            payload = chunks.feed(data)
            if not payload:
                continue
            if rest:
                payload = rest + payload
            *lines, rest = payload.split(b"\n")
            for line in lines:
                if line.strip():
                    yield line
        if rest.strip():
            yield rest
    except (OSError, asyncio.IncompleteReadError, ValueError) as e:
        raise HttpError(f"{type(e).__name__}: {e}") from e
    finally:
        writer.close()
