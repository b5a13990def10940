"""A fault-injecting HTTP proxy in front of a real kube-apiserver, for chaos tests.

Theory of operation:

* Clients speak plain HTTP/1.1 to the proxy on 127.0.0.1 (a kubeconfig from ``kubeconfig()``: the
  same bearer token, ``http://`` server); the proxy forwards each request over TLS to the API server,
  one upstream connection per client connection, so keep-alive and watches behave as they would
  directly. The proxy runs its own event loop in a thread: tests stay synchronous.
* Every request is matched against the ``Fault`` rules in order; the first that matches and fires
  (its probability, drawn from the proxy's seeded generator, and its remaining count) decides what
  happens: a delay before forwarding, an answer made up by the proxy (5xx, 429, 410) without
  forwarding, a connection reset before forwarding or after it (the write happened, the answer is
  lost), or, for a watch, a stream that is cut, stalled (the connection stays up, no byte flows), or
  carries an injected line.
* ``log`` records every request the proxy forwarded, when it was sent upstream (monotonic and wall
  clock), by which client (the proxy's ``name``), and the status the API server answered; a test
  checks invariants from it, e.g. that two replicas never wrote within one lease period.
* A delayed request is forwarded even if its client hung up meanwhile: on a real network the bytes
  sent before a connection closed still arrive.

Test-only, like the rest of ``kai.k8s.envtest``: nothing in the scheduler imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

_STATUS_TEXT = {
    200: "OK",
    201: "Created",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class Fault:
    """One rule. ``method`` and ``path`` (a regular expression searched in the request target) select
    requests; ``watch`` True/False selects watches or non-watches only; ``p`` is the chance it fires
    on a matching request; ``times`` how often it may fire (None: without end).

    ``action`` is one of: ``delay`` (``seconds``, then forward), ``status`` (answer ``code`` without
    forwarding), ``reset`` (close the client's connection, nothing forwarded), ``reset_after`` (forward,
    then close without the answer), ``cut`` (a watch: forward ``seconds`` of it, then close),
    ``stall`` (a watch: forward ``seconds`` of it, then stop forwarding but keep the connection
    open), ``gone`` (a watch: answer an ERROR event with code 410), ``inject`` (a watch: forward it
    and send ``line`` first)."""

    action: str
    method: str | None = None
    path: str | None = None
    watch: bool | None = None
    p: float = 1.0
    times: int | None = None
    seconds: float = 0.0
    code: int = 503
    line: bytes = b""
    fired: int = 0

    def matches(self, method: str, target: str, is_watch: bool) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.method is not None and method != self.method:
            return False
        if self.watch is not None and is_watch != self.watch:
            return False
        return self.path is None or re.search(self.path, target) is not None


@dataclass(frozen=True)
class Logged:
    """A request the proxy forwarded upstream."""

    client: str
    method: str
    target: str
    sent_mono: float
    sent_wall: float
    status: int  # the upstream answer's status; 0 when none came (a reset, a broken connection)


@dataclass
class _Request:
    method: str
    target: str
    head: bytes
    body: bytes

    @property
    def is_watch(self) -> bool:
        return "watch=1" in self.target or "watch=true" in self.target


class FaultProxy:
    """``FaultProxy(name, upstream_host, upstream_port, ca_file, seed=...)``; ``start()``/``stop()``."""

    def __init__(self, name: str, host: str, port: int, ca_file: Path, *, seed: int = 0) -> None:
        self.name = name
        self.upstream = (host, port)
        self._ctx = ssl.create_default_context(cafile=str(ca_file))
        self._ctx.check_hostname = False  # the API server's self-signed certificate names 127.0.0.1 as an IP
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self.port = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        # Each connection's handler Task, held until it ends. asyncio keeps only weak references to Tasks: a
        # handler waiting on a connection nothing else references became garbage, and the collector, run by
        # whichever thread allocated (a test's client thread), ran its `finally` there: a TLS shutdown of the
        # upstream connection off the loop's thread, while the loop used OpenSSL too, aborted the process.
        self._handlers: set[asyncio.Task[None]] = set()
        self._stalled: list[asyncio.StreamWriter] = []

    # ---- control (any thread) --------------------------------------------------------------------

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._shutdown())
            self._loop.close()

        self._thread = threading.Thread(target=main, name=f"fault-proxy-{self.name}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """No more faults; watches stalled so far are closed (their clients reconnect)."""
        with self._lock:
            self.faults.clear()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._release_stalled)

    def drop_connections(self) -> None:
        """Close every client connection now (a network blip between kai and the API server)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._close_all)

    def writes(self) -> list[Logged]:
        with self._lock:
            return [e for e in self.log if e.method in ("POST", "PUT", "PATCH", "DELETE")]

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig that reaches the API server through this proxy with *token*."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "u"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path

    # ---- the proxy ---------------------------------------------------------------------------------

    def _pick(self, req: _Request) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.matches(req.method, req.target, req.is_watch) and self.rng.random() < f.p:
                    f.fired += 1
                    return f
        return None

    def _record(self, req: _Request, status: int, mono: float, wall: float) -> None:
        with self._lock:
            self.log.append(Logged(self.name, req.method, req.target, mono, wall, status))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
            handler.add_done_callback(self._handlers.discard)
        self._clients.add(writer)
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    return
                fault = self._pick(req)
                action = fault.action if fault is not None else ""
                if action == "delay" and fault is not None:
                    await asyncio.sleep(fault.seconds)  # forwarded even if the client hung up meanwhile
                elif action == "status" and fault is not None:
                    await _answer(
                        writer,
                        fault.code,
                        b'{"kind":"Status","apiVersion":"v1","status":"Failure",'
                        b'"message":"injected by the fault proxy","reason":"InternalError","code":%d}' % fault.code,
                    )
                    continue
                elif action == "reset":
                    return
                elif action == "gone" and req.is_watch:
                    await _gone(writer)
                    return
                if up is None:
                    up = await asyncio.open_connection(*self.upstream, ssl=self._ctx, server_hostname="127.0.0.1")
                mono, wall = time.monotonic(), time.time()
                up[1].write(req.head + req.body)
                await up[1].drain()
                status, head, length, chunked = await _read_response_head(up[0])
                self._record(req, status, mono, wall)
                if action == "reset_after":
                    return
                writer.write(head)
                if chunked:
                    keep = await self._stream(up[0], writer, fault if req.is_watch else None)
                    if not keep:
                        return
                else:
                    data = await up[0].readexactly(length) if length >= 0 else await up[0].read()
                    writer.write(data)
                    await writer.drain()
                    if length < 0:
                        return
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        except asyncio.CancelledError:  # the proxy is stopping: end quietly (asyncio logs a cancelled handler)
            return
        finally:
            self._clients.discard(writer)
            # a handler collected unfinished when the proxy's loop closes (GeneratorExit) finds its TLS transport
            # already unwrapped, and asyncio refuses to shut it down again: nothing is left to close then
            if up is not None:
                with contextlib.suppress(RuntimeError):
                    up[1].close()
            if writer not in self._stalled:
                with contextlib.suppress(RuntimeError):
                    writer.close()

    async def _stream(self, up: asyncio.StreamReader, writer: asyncio.StreamWriter, fault: Fault | None) -> bool:
        """Forward a chunked answer, chunk by chunk, with *fault* (a watch fault) applied. True if the
        connection may carry another request."""
        action = fault.action if fault is not None else ""
        if action == "inject" and fault is not None:
            line = fault.line if fault.line.endswith(b"\n") else fault.line + b"\n"
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
        start = time.monotonic()
        while True:
            if action in ("cut", "stall") and fault is not None and time.monotonic() - start >= fault.seconds:
                if action == "stall":
                    self._stalled.append(writer)
                    await asyncio.Event().wait()  # until the proxy stops or the fault is cleared
                return False
            size_line = await up.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                trailer = await up.readuntil(b"\r\n")
                writer.write(size_line + trailer)
                await writer.drain()
                return True
            data = await up.readexactly(size + 2)
            writer.write(size_line + data)
            await writer.drain()

    def _release_stalled(self) -> None:
        stalled, self._stalled = self._stalled, []
        for w in stalled:
            w.close()

    def _close_all(self) -> None:
        for w in list(self._clients):
            w.close()
        self._release_stalled()

    async def _shutdown(self) -> None:
        self._close_all()
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.split(b"\r\n")
    method, target, _ = lines[0].decode("latin-1").split(" ", 2)
    length = 0
    for h in lines[1:]:
        name, _, value = h.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return _Request(method, target, head, body)


async def _read_response_head(up: asyncio.StreamReader) -> tuple[int, bytes, int, bool]:
    head = await up.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, chunked = -1, False
    for h in lines[1:]:
        name, _, value = h.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return status, head, length, chunked


async def _answer(writer: asyncio.StreamWriter, code: int, body: bytes) -> None:
    extra = b"Retry-After: 1\r\n" if code == 429 else b""
    writer.write(
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
        % (code, _STATUS_TEXT.get(code, "Error").encode(), len(body), extra, body)
    )
    await writer.drain()


async def _gone(writer: asyncio.StreamWriter) -> None:
    """A watch answered as the watch cache answers a resourceVersion it no longer has."""
    event = (
        b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
        b'"message":"too old resource version (injected)","reason":"Expired","code":410}}\n'
    )
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event)
    )
    await writer.drain()


def deep_watch_line(kind: str, name: str, namespace: str, depth: int, resource_version: str = "1") -> bytes:
    """A MODIFIED watch event for *kind* whose spec nests *depth* levels deep (hostile bytes on the wire)."""
    meta = f'{{"name":"{name}","namespace":"{namespace}","uid":"deep-{name}","resourceVersion":"{resource_version}"}}'
    deep = '{"a":' * depth + "1" + "}" * depth
    return f'{{"type":"MODIFIED","object":{{"kind":"{kind}","metadata":{meta},"spec":{deep}}}}}'.encode()
