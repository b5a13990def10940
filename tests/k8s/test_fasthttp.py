"""The own HTTP/1.1 client and an informer against a local HTTP server that answers in raw bytes.

The real API server sends one event per chunk; these cases check the framing a proxy or a busy server
may produce instead: an event split over chunks, several events in one chunk, an error status, a
connection that goes silent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kai.k8s._api import load_config
from kai.k8s._fasthttp import FastHttp, HttpError
from kai.k8s._tls import ResumingContext, tls_context
from kai.k8s._webhookcert import issue_ca, issue_serving

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _answer(status: str, body: bytes) -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


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
        w.write(_answer("403 Forbidden", b'{"kind":"Status","code":403,"reason":"Forbidden","message":"no"}'))
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


def test_a_server_that_closes_before_answering_is_an_http_error() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()

    with pytest.raises(HttpError):
        asyncio.run(_collect(handler))


def test_an_answer_with_a_length_instead_of_chunks_comes_back_whole() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(_answer("200 OK", b'{"n":1}\n{"n":2}\n'))
        await w.drain()
        w.close()

    assert asyncio.run(_collect(handler)) == (200, b'{"n":1}\n{"n":2}\n')


def _kubeconfig(tmp_path: Path, port: int) -> str:
    """A kubeconfig for a plain-HTTP server on *port* with a static token."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: s, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t0k}}]\n"
        "contexts: [{name: c, context: {cluster: s, user: u}}]\n"
    )
    return str(path)


def test_the_api_layer_yields_the_lines_of_an_unstreamed_answer_and_raises_on_errors(tmp_path: Path) -> None:
    """Through Api.stream_lines (what the informers call): a 200 with a Content-Length still gives its
    lines; a 403 is an ApiError with the server's code."""
    from kai.k8s._api import Api, ApiError, load_config

    answers = iter(
        [
            _answer("200 OK", b'{"n":1}\n{"n":2}\n'),
            _answer("403 Forbidden", b'{"code":403,"reason":"Forbidden","message":"no"}'),
        ]
    )

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(next(answers))
        await w.drain()
        w.close()

    async def run() -> tuple[list[bytes], ApiError]:
        server, http = await _serve(handler)
        api = Api(load_config(_kubeconfig(tmp_path, http.port)))
        try:
            lines = [line async for line in api.stream_lines("/api/v1/pods", {"watch": "1"}, 5)]
            with pytest.raises(ApiError) as err:
                async for _ in api.stream_lines("/api/v1/pods", {"watch": "1"}, 5):
                    pass
            return lines, err.value
        finally:
            await api.close()
            server.close()

    lines, err = asyncio.run(run())
    assert lines == [b'{"n":1}', b'{"n":2}']
    assert err.code == 403 and err.reason == "Forbidden"


def test_an_informer_lists_again_after_a_malformed_watch_event(tmp_path: Path) -> None:
    """A watch line that is not JSON (a broken proxy, say) must not end the informer: it lists again,
    so the change that line carried is not lost (here: queue b, created meanwhile)."""
    import json

    from kai.k8s._api import Api, load_config
    from kai.k8s._decode import KINDS
    from kai.k8s._informer import Informer
    from kai.store import Store

    def queue(name: str, rv: str) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name, "resourceVersion": rv},
        }

    lists = iter([[queue("a", "1")], [queue("a", "1"), queue("b", "3")]])
    watches: list[str] = []

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        line = (await r.readuntil(b"\r\n")).decode()
        await r.readuntil(b"\r\n\r\n")
        if "watch=1" in line:
            watches.append(line)
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            if len(watches) == 1:
                w.write(_chunk(b'{"type":"ADDED","object":{"metadata":\n'))
            await w.drain()
            await r.read()  # open until the client closes it
            return
        items = next(lists)
        body = json.dumps({"metadata": {"resourceVersion": items[-1]["metadata"]["resourceVersion"]}, "items": items})
        w.write(_answer("200 OK", body.encode()))
        await w.drain()
        w.close()

    async def run() -> tuple[list[str], int, int]:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        api = Api(load_config(_kubeconfig(tmp_path, port)))
        store = Store()
        informer = Informer(api, next(k for k in KINDS if k.kind == "Queue"), store)
        task = asyncio.ensure_future(informer.run())
        try:
            for _ in range(100):
                if store.count("Queue") == 2 and len(watches) == 2:
                    break
                await asyncio.sleep(0.05)
            assert not task.done(), task
            return sorted(q.meta.name for q in store.list("Queue")), informer.relists, len(watches)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
            server.close()

    assert asyncio.run(run()) == (["a", "b"], 2, 2)


async def _read_request(r: asyncio.StreamReader) -> None:
    """One request with a Content-Length body, read and dropped."""
    head = await r.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    await r.readexactly(length)


def _client(server: asyncio.Server) -> FastHttp:
    return FastHttp("127.0.0.1", server.sockets[0].getsockname()[1], None, lambda refresh: "t0k")


async def _requests(answers: list[bytes], calls: int) -> tuple[list[tuple[int, bytes]], int]:
    """*calls* POSTs through one FastHttp against a server that sends *answers* in order on whatever
    connection asks; the results and the number of connections the client opened."""
    pending = list(answers)
    connections = 0

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while pending:
                await _read_request(r)
                w.write(pending.pop(0))
                await w.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    http = _client(server)
    try:
        out = [await http.request("POST", "/x", b"{}", "application/json") for _ in range(calls)]
        return out, connections
    finally:
        await http.close()
        server.close()


def test_requests_reuse_one_connection_whatever_the_header_case_and_framing() -> None:
    answers = [
        b'HTTP/1.1 201 Created\r\ncontent-length: 7\r\nDate: x\r\n\r\n{"a":1}',
        b"HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: chunked\r\n\r\n" + _chunk(b'{"b":') + _chunk(b"2}") + b"0\r\n\r\n",
        b"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}",
    ]
    out, connections = asyncio.run(_requests(answers, 3))
    assert out == [(201, b'{"a":1}'), (200, b'{"b":2}'), (409, b"{}")]
    assert connections == 1


def test_an_answer_that_is_not_http_is_an_http_error() -> None:
    with pytest.raises(HttpError, match="not an HTTP answer"):
        asyncio.run(_requests([b"SSH-2.0-OpenSSH\r\n\r\n"], 1))


def test_a_bad_content_length_is_an_http_error() -> None:
    with pytest.raises(HttpError):
        asyncio.run(_requests([b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n{}"], 1))


def test_the_dechunker_gives_the_same_payload_however_the_bytes_are_split() -> None:
    import random

    from kai.k8s._fasthttp import _Dechunker

    payloads = [b'{"type":"ADDED"}\n', b'{"type":"MODIFIED","x":"' + b"y" * 300 + b'"}\n', b"z"]
    wire = b"".join(_chunk(p) for p in payloads) + b"3;ext=1\r\nabc\r\n" + b"0\r\n\r\n"
    rng = random.Random(7)
    for _ in range(200):
        d = _Dechunker()
        got = b""
        i = 0
        while i < len(wire):
            j = i + rng.randint(1, 40)
            got += d.feed(wire[i:j])
            i = j
        assert got == b"".join(payloads) + b"abc"
        assert d.done


def test_the_dechunker_rejects_a_bad_size_line() -> None:
    from kai.k8s._fasthttp import _Dechunker

    with pytest.raises(ValueError):
        _Dechunker().feed(b"zz\r\nabc\r\n")


async def _after_a_drop(pause_s: float) -> tuple[list[int], int]:
    """Eight concurrent requests leave eight idle connections; the server then closes them all (as an
    API server restart or a proxy dropping its connections does); then three requests one by one.
    Their statuses, and the connections the client opened in all."""
    writers: list[asyncio.StreamWriter] = []

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        writers.append(w)
        try:
            while True:
                await _read_request(r)
                w.write(_answer("200 OK", b"{}"))
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    http = _client(server)
    try:
        await asyncio.gather(*(http.request("POST", "/x", b"{}", "application/json") for _ in range(8)))
        assert len(writers) == 8
        for w in list(writers):
            w.close()
        await asyncio.sleep(pause_s)
        out = [(await http.request("POST", "/x", b"{}", "application/json"))[0] for _ in range(3)]
        return out, len(writers)
    finally:
        await http.close()
        server.close()


def test_warmed_connections_serve_the_next_burst_without_opening_more() -> None:
    """``warm`` opens connections ahead of a burst (the first binds, at a start): the burst opens none, a
    second ``warm`` opens only what is missing, and it never opens more than ``max_connections``."""

    async def run() -> tuple[list[int], int, list[int]]:
        accepted: list[asyncio.StreamWriter] = []

        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            accepted.append(w)
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                while True:
                    await _read_request(r)
                    w.write(_answer("200 OK", b"{}"))
                    await w.drain()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        http = FastHttp("127.0.0.1", port, None, lambda refresh: None, max_connections=8)
        try:
            opened = [await http.warm(6), await http.warm(6)]
            await asyncio.gather(*(http.request("POST", "/x", b"{}", "application/json") for _ in range(6)))
            before_burst = len(accepted)
            opened.append(await http.warm(20))  # capped at max_connections: 8 idle in all
            return opened, before_burst, [len(accepted), len(http._idle)]
        finally:
            await http.close()
            server.close()

    opened, after_burst, counts = asyncio.run(run())
    assert opened == [6, 0, 2]
    assert after_burst == 6  # the six requests went out on the six warmed connections
    assert counts == [8, 8]


@pytest.mark.parametrize("pause_s", [0.0, 0.2])
def test_connections_the_server_dropped_cost_no_request(pause_s: float) -> None:
    """Whether the client has seen the connections close (a pause) or not yet (none), no request fails:
    a closed idle connection is skipped, and one found dead drops the others and the request goes out
    once more on a new connection (before, each request tried two dead ones and failed, until all eight
    were used up)."""
    out, opened = asyncio.run(_after_a_drop(pause_s))
    assert out == [200, 200, 200]
    assert opened == 9  # the eight, then one new connection for the three


async def _tls_server(ca: tuple[bytes, bytes], port: int, tmp_path: Path, name: str) -> asyncio.Server:
    """A TLS server on *port* (a new SSLContext: new session-ticket keys) that answers each request 200
    and closes the connection, so the client opens a new one for the next request."""
    cert, key = issue_serving(*ca, ["127.0.0.1"])
    (tmp_path / f"{name}.crt").write_bytes(cert)
    (tmp_path / f"{name}.key").write_bytes(key)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / f"{name}.crt", tmp_path / f"{name}.key")

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await w.drain()
        w.close()

    return await asyncio.start_server(serve, "127.0.0.1", port, ssl=ctx, reuse_address=True)


def test_a_ticket_the_server_refuses_costs_one_full_handshake_and_the_next_connections_resume(
    tmp_path: Path,
) -> None:
    """Real TLS 1.3 on both ends (OpenSSL): the second connection resumes the first one's session; a server
    restarted with new ticket keys refuses the old ticket, so that connection makes a full handshake (and
    its request is answered), and the connection after it resumes the new session."""
    ca = issue_ca()

    async def run() -> tuple[list[int], list[tuple[int, int]]]:
        server = await _tls_server(ca, 0, tmp_path, "first")
        port = server.sockets[0].getsockname()[1]
        ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=ca[0].decode())
        http = FastHttp("127.0.0.1", port, ctx, lambda refresh: None)
        statuses, counts = [], []
        try:
            for i in range(4):
                if i == 2:  # the server restarts: same CA, new process state
                    server.close()
                    await server.wait_closed()
                    server = await _tls_server(ca, port, tmp_path, "second")
                status, _ = await http.request("GET", "/version", None, "")
                statuses.append(status)
                counts.append((http.handshakes, http.resumed))
            return statuses, counts
        finally:
            await http.close()
            server.close()

    statuses, counts = asyncio.run(run())
    assert statuses == [200, 200, 200, 200]
    assert counts == [(1, 0), (2, 1), (3, 1), (4, 2)]


def test_a_sibling_pool_shares_the_tls_context_and_resumes_its_session(tmp_path: Path) -> None:
    """The Lease's pool (``sibling``, made before either pool connects) loads no certificate again: it wraps
    its connections with the same context, and they resume the session of the other pool's full handshake."""
    ca = issue_ca()

    async def run() -> tuple[bool, list[tuple[int, int]]]:
        server = await _tls_server(ca, 0, tmp_path, "sibling")
        ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=ca[0].decode())
        http = FastHttp("127.0.0.1", server.sockets[0].getsockname()[1], ctx, lambda refresh: None)
        lease = http.sibling(max_connections=2)
        try:
            await http.request("GET", "/version", None, "")
            await lease.request("GET", "/version", None, "")
            await lease.request("GET", "/version", None, "")
            offered = ctx.offer()
            assert offered is not None and offered.has_ticket
            assert ctx.offer() is offered  # read once per full handshake: a read copies it through DER
            return lease._ssl is ctx, [(h.handshakes, h.resumed) for h in (http, lease)]
        finally:
            await http.close()
            await lease.close()
            server.close()

    same_context, counts = asyncio.run(run())
    assert same_context
    assert counts == [(1, 0), (2, 2)]  # the server closes each connection: every lease request opens one


def test_the_kubeconfig_s_ca_makes_a_resuming_context_and_without_one_lightkube_s_is_kept(tmp_path: Path) -> None:
    ca_pem, _ = issue_ca()
    data = base64.b64encode(ca_pem).decode()
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: s, cluster: {{server: 'https://127.0.0.1:6443', certificate-authority-data: {data}}}}},"
        " {name: i, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t0k}}]\n"
        "contexts: [{name: c, context: {cluster: s, user: u}}, {name: i, context: {cluster: i, user: u}}]\n"
    )
    with_ca = tls_context(load_config(str(path)))
    assert isinstance(with_ca, ResumingContext)
    assert with_ca.verify_mode == ssl.CERT_REQUIRED and with_ca.check_hostname
    assert len(with_ca.get_ca_certs()) == 1
    insecure = tls_context(load_config(str(path), "i"))
    assert not isinstance(insecure, ResumingContext)
    assert insecure.verify_mode == ssl.CERT_NONE
