"""The admission webhooks' HTTPS server: asyncio, on an event loop of its own in a thread.

Rules: the server only frames HTTP/1.1 (keep-alive, Content-Length bodies, as the API server sends them)
and JSON; the answers come from ``_admission.Admission``, pure functions of the request and a Store that
run in well under a millisecond. ``kai scheduler`` runs it in a process of its own (``_webhookproc``), whose
main loop keeps that Store's Queues current and the certificate; the server's own loop and thread keep an
answer from waiting behind that loop's work. The threads share only the Store, which the webhooks only read
(single dict reads and copies, atomic under the GIL). The serving certificate comes from the Secret kept by
``_webhookcert.CertStore``, on the main loop (it owns the API connection): checked every ``refresh_s``,
reloaded into the TLS context on the server's thread when it changed (new connections get the new
certificate), renewed when due, and the configurations' ``caBundle`` kept current.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import os
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from kai.k8s._admission import Admission
from kai.k8s._api import Api, ApiError
from kai.k8s._metrics import Metrics
from kai.k8s._webhookcert import CertBundle, CertStore, service_hosts

log = logging.getLogger("kai.k8s.webhook")

IDLE_TIMEOUT_S = 120.0  # a kept-alive connection with no request for this long is closed
MAX_BODY = 8 * 1024 * 1024
REFRESH_S = 60.0
SWITCH_INTERVAL_S = 0.001
_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large"}


def _load_chain(ctx: ssl.SSLContext, bundle: CertBundle) -> None:
    """Load the certificate and key from memory: ssl reads only files, so they go through a memfd (no file
    on disk; the scheduler's root filesystem is read-only) or, where there is none, a private temp file."""
    data = bundle.cert + bundle.key
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kai-webhook-cert")
        try:
            os.write(fd, data)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(suffix=".pem") as f:  # pragma: no cover - non-Linux
        f.write(data)
        f.flush()
        ctx.load_cert_chain(f.name)


class AdmissionServer:
    """HTTPS for the admission webhooks; ``start`` makes sure a certificate exists and serves."""

    def __init__(
        self,
        api: Api,
        admission: Admission,
        metrics: Metrics,
        *,
        host: str,
        port: int,
        certs: CertStore,
        may_write: Callable[[], bool] = lambda: True,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.api = api
        self.admission = admission
        self.metrics = metrics
        self.host = host
        self.port = port
        self.certs = certs
        self.may_write = may_write
        self.refresh_s = refresh_s
        self.hosts = service_hosts(namespace=certs.namespace) + (
            (host,) if host not in ("", "0.0.0.0", "::", "localhost", "127.0.0.1") else ()
        )
        self.bundle: CertBundle | None = None
        self.latencies_ms: collections.deque[float] = collections.deque(maxlen=100_000)  # per request, for benchmarks
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self._server: asyncio.Server | None = None
        self._refresh: asyncio.Task[None] | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the server's own, in self._thread
        self._thread: threading.Thread | None = None

    async def start(self) -> int:
        """Make or read the certificate, keep the caBundle current, listen; the port (useful with port 0)."""
        self.bundle = await self.certs.ensure(self.hosts, may_write=True)
        _load_chain(self._ctx, self.bundle)
        with contextlib.suppress(ApiError):  # RBAC or a missing configuration: logged by refresh later
            await self.certs.sync_ca_bundle(self.bundle)
        # The server thread shares the GIL with its process's main loop; a thread that wants it waits up to the
        # switch interval (5 ms by default) each time, and an answer needs it a few times. 1 ms keeps an
        # answer's waits short.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="kai-webhook", daemon=True)
        self._thread.start()
        self.port = await asyncio.wrap_future(started)  # OSError (port taken) is raised here
        self._refresh = asyncio.ensure_future(self._refresh_loop())
        log.info("admission webhooks serving", extra={"address": f"{self.host}:{self.port}"})
        return self.port

    def _run(self, started: concurrent.futures.Future[int]) -> None:
        """The server thread: its own loop until close()."""
        loop = self._loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, self.host, self.port, ssl=self._ctx)
            )
        except OSError as e:
            started.set_exception(e)
            loop.close()
            return
        started.set_result(self._server.sockets[0].getsockname()[1])
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in list(self._connections):  # kept-alive connections: the API server must not reuse them
            w.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), timeout=2)
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def serving(self) -> bool:
        return self._server is not None and self._server.is_serving()

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            await asyncio.gather(self._refresh, return_exceptions=True)
        if self._loop is not None and self._thread is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            await asyncio.to_thread(self._thread.join, 5)

    async def refresh(self) -> None:
        """One check of the Secret: renew what is due (when this replica may write), reload a changed
        certificate, keep the caBundle current."""
        writer = self.may_write()
        bundle = await self.certs.ensure(self.hosts, may_write=writer)
        if self.bundle is None or bundle.cert != self.bundle.cert or bundle.key != self.bundle.key:
            await self._on_server_thread(lambda: _load_chain(self._ctx, bundle))  # where the handshakes run
            log.info("webhook certificate reloaded")
        self.bundle = bundle
        if writer:
            await self.certs.sync_ca_bundle(bundle)

    async def _on_server_thread(self, fn: Callable[[], None]) -> None:
        if self._loop is None or not self._loop.is_running():
            fn()
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                fn()
                done.set_result(None)
            except BaseException as e:
                done.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        await asyncio.wrap_future(done)

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await self.refresh()
            except (ApiError, ValueError, ssl.SSLError) as e:
                self.metrics.api_errors.labels("webhook-cert").inc()
                log.warning("webhook certificate check failed", extra={"error": str(e)})

    # ---- HTTP ------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=IDLE_TIMEOUT_S)
                except (TimeoutError, asyncio.IncompleteReadError):
                    return
                t0 = time.perf_counter()
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "/")
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name:
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                if length > MAX_BODY:
                    await self._reply(writer, 413, b"")
                    return
                body = await reader.readexactly(length) if length else b""
                status, payload, hook, allowed = self._answer(method, target.split("?", 1)[0], body)
                await self._reply(writer, status, payload, close=headers.get("connection", "").lower() == "close")
                ms = (time.perf_counter() - t0) * 1000
                self.latencies_ms.append(ms)
                self.metrics.admission_latency.observe(ms)
                self.metrics.admission_requests.labels(hook, allowed).inc()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError, ValueError):
            return
        except asyncio.CancelledError:  # the server is stopping: end quietly (asyncio 3.11 logs a cancelled
            return  # connection handler's exception as "Exception in callback ...")
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError, OSError):
                await writer.wait_closed()

    def _answer(self, method: str, path: str, body: bytes) -> tuple[int, bytes, str, str]:
        """(HTTP status, body, webhook path for the metrics, allowed "true"/"false"/"error")."""
        if method != "POST":
            return 405, b"", path, "error"
        try:
            doc: Any = _decode.decode(body)
            request = doc["request"]
        except (msgspec.DecodeError, KeyError, TypeError):
            return 400, b"not an AdmissionReview", path, "error"
        response = self.admission.review(path, request)
        version = doc.get("apiVersion", "admission.k8s.io/v1")
        out = {"apiVersion": version, "kind": "AdmissionReview", "response": response}
        return 200, _encode.encode(out), path, "true" if response.get("allowed") else "false"

    async def _reply(self, writer: asyncio.StreamWriter, status: int, body: bytes, *, close: bool = False) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()
