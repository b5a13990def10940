"""The dashboard's HTTP server: GET only, two paths, bound to loopback unless told otherwise.

Rules: ``/`` is the constant page (with its Content-Security-Policy header), ``/api/overview`` the one JSON
document; every other path is 404 and every other method 405, so nothing can be changed through it. The
document is made by ``Overview``: at most one at a time, in a worker thread (a dry run of the engine
takes a while on a big cluster, and the event loop must keep serving watches), and reused for
``min_interval_s`` so that several open pages cost one dry run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from kai.dashboard._page import CSP, page
from kai.k8s._httpd import Answer
from kai.k8s._httpd import serve as http_serve


class Overview:
    """The latest overview document, recomputed on demand (not more often than *min_interval_s*):
    ``capture()`` runs on the event loop (take what the loop's writers change, e.g. the Store's lists),
    then ``compute(captured)`` in a worker thread."""

    def __init__(
        self,
        compute: Callable[[Any], dict[str, Any]],
        capture: Callable[[], Any] = lambda: None,
        min_interval_s: float = 2.0,
    ) -> None:
        self._compute = compute
        self._capture = capture
        self._min = min_interval_s
        self._doc: bytes | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> bytes:
        async with self._lock:
            if self._doc is None or time.monotonic() - self._at >= self._min:
                doc = await asyncio.to_thread(self._compute, self._capture())
                self._doc = json.dumps(doc).encode()
                self._at = time.monotonic()
            return self._doc


def split_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:8090' -> ('127.0.0.1', 8090); ':8090' -> loopback; ValueError if not host:port."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not host:port")
    return (host.strip("[]") or "127.0.0.1"), int(port)


async def serve(host: str, port: int, overview: Overview) -> asyncio.Server:
    html = page().encode()
    plain = "text/plain; charset=utf-8"

    async def route(method: str, path: str) -> Answer:
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        if method not in ("GET", "HEAD"):
            return 405, plain, b"read-only: GET only", {**headers, "Allow": "GET, HEAD"}
        if path in ("/", "/index.html"):
            return 200, "text/html; charset=utf-8", html, {**headers, "Content-Security-Policy": CSP}
        if path == "/api/overview":
            try:
                return 200, "application/json", await overview.get(), headers
            except Exception as e:  # a failed dry run is a 503 the page shows, not a dead server
                return 503, plain, f"overview failed: {e}".encode(), headers
        return 404, plain, b"not found", headers

    return await http_serve(host, port, route, timeout=10)
