"""A thin async HTTP layer over the Kubernetes API: JSON in and out, errors as ApiError, retries with backoff.

Rules: this module knows URLs, verbs and status codes, nothing about scheduling. The connection (server,
TLS, credentials, token rotation) comes from the kubeconfig (``kai.k8s._kubeconfig``) and requests go
through ``kai.k8s._fasthttp``; only credentials that client does not send (exec plugins, basic auth) and
requests with query parameters go through lightkube's httpx adapter, imported on first use. Requests are
plain JSON (msgspec encodes and decodes), because the scheduler's hot calls (bind, list, watch) need no
typed models and typed clients cost ~10x on 10k pods. ``retrying`` wraps a call with exponential backoff
for the errors worth retrying (connection errors, 429, 5xx); everything else is raised at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

import msgspec

from kai.k8s._fasthttp import FastHttp, HttpError
from kai.k8s._kubeconfig import Config, ConfigError, load_config

if TYPE_CHECKING:
    import httpx2 as httpx

__all__ = ["MAX_CONNECTIONS", "Api", "ApiError", "Backoff", "Config", "ConfigError", "load_config"]

log = logging.getLogger("kai.k8s.api")
T = TypeVar("T")

_json = msgspec.json.Encoder()
_decode_any = msgspec.json.Decoder()


class ApiError(Exception):
    """The API server answered with an error status (``code``), or could not be reached (``code`` 0)."""

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}" if reason else f"{code}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @property
    def retriable(self) -> bool:
        return self.code == 0 or self.code == 429 or self.code >= 500


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: ``initial`` doubling up to ``cap`` seconds."""

    initial: float = 0.2
    cap: float = 10.0

    def delay(self, attempt: int) -> float:
        base = min(self.cap, self.initial * (2**attempt))
        return base * (0.5 + random.random() / 2)


_DEFAULT_BACKOFF = Backoff()
MAX_CONNECTIONS = 128  # the scheduler's pool: 64 binds and 64 pod-grouper writes in flight


class Api:
    """JSON requests to one API server. ``max_connections`` bounds the HTTP connection pool."""

    def __init__(
        self,
        config: Config,
        *,
        max_connections: int = MAX_CONNECTIONS,
        timeout: float = 30.0,
        fast: bool | FastHttp = True,
    ) -> None:
        """*fast*: True for a FastHttp of its own, False for httpx alone, or a FastHttp made already (``sibling``)."""
        self._config = config
        self._max_connections = max_connections
        self._http_client: httpx.AsyncClient | None = None
        if isinstance(fast, FastHttp):
            self._fast: FastHttp | None = fast
        else:
            self._fast = FastHttp.for_config(config, max_connections=max_connections) if fast else None
        self.server = config.cluster.server
        self._timeout = timeout

    def sibling(self, max_connections: int) -> Api:
        """An Api for the same server and credentials on connections of its own (the Lease's: its renewals
        never queue behind a burst of binds), sharing this one's TLS context instead of building another."""
        fast = self._fast.sibling(max_connections) if self._fast is not None else False
        return Api(self._config, max_connections=max_connections, timeout=self._timeout, fast=fast)

    @property
    def _http(self) -> httpx.AsyncClient:
        """httpx, made on first use: only auth kinds FastHttp does not handle (exec plugins, basic auth)
        and requests with query parameters need it, and making it costs ~0.1 s (it loads the system's
        CA bundle) before the scheduler's first list could go out."""
        if self._http_client is None:
            import httpx2 as httpx
            from lightkube.config.client_adapter import ConnectionParams

            params = ConnectionParams(timeout=httpx.Timeout(self._timeout))
            n = self._max_connections
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
            self._http_client = httpx.AsyncClient(limits=limits, **params.httpx_params(self._config.lightkube()))
        return self._http_client

    async def warm(self, n: int) -> int:
        """Open up to *n* idle connections ahead of a burst of requests (``FastHttp.warm``); how many."""
        return await self._fast.warm(n) if self._fast is not None else 0

    async def close(self) -> None:
        if self._http_client is not None:
            await self._http_client.aclose()
        if self._fast is not None:
            await self._fast.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        gate: Callable[[], None] | None = None,
    ) -> Any:
        """Send one request; the decoded JSON answer, or ApiError (code 0 when the server is unreachable).

        *gate* is called just before the request is written and may raise to stop it (fencing: see
        ``kai.k8s._fence``)."""
        content = _json.encode(body) if body is not None else None
        if self._fast is not None and params is None:
            try:
                async with asyncio.timeout(self._timeout):  # no extra Task per request, as wait_for makes
                    status, data = await self._fast.request(method, path, content, content_type, gate)
            except (HttpError, TimeoutError) as e:
                raise ApiError(0, f"{type(e).__name__}: {e}") from e
            if status >= 400:
                raise _error(status, data)
            return _decode(data)
        import httpx2 as httpx  # the slow path only (see _http)

        headers = {"Accept": "application/json"}
        if content is not None:
            headers["Content-Type"] = content_type
        if gate is not None:
            gate()
        try:
            resp = await self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TransportError as e:
            raise ApiError(0, f"{type(e).__name__}: {e}") from e
        data = resp.content
        if resp.status_code >= 400:
            raise _error(resp.status_code, data)
        return _decode(data)

    async def get_raw(
        self, path: str, params: dict[str, str] | None = None, *, gate: Callable[[], None] | None = None
    ) -> bytes:
        """GET *path*; the undecoded body (the caller decodes it into its own structs). *gate* is called
        just before the request is written (``kai.k8s._early`` waits for it)."""
        if self._fast is not None:
            url = f"{path}?{urlencode(params)}" if params else path
            try:
                async with asyncio.timeout(self._timeout):
                    status, data = await self._fast.request("GET", url, None, "", gate)
            except (HttpError, TimeoutError) as e:
                raise ApiError(0, f"{type(e).__name__}: {e}") from e
            if status >= 400:
                raise _error(status, data)
            return data
        import httpx2 as httpx

        if gate is not None:
            gate()
        try:
            resp = await self._http.get(path, params=params, headers={"Accept": "application/json"})
        except httpx.TransportError as e:
            raise ApiError(0, f"{type(e).__name__}: {e}") from e
        if resp.status_code >= 400:
            raise _error(resp.status_code, resp.content)
        return resp.content

    async def stream_lines(
        self,
        path: str,
        params: dict[str, str],
        read_timeout: float,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[bytes]:
        """A watch: GET *path* and yield each line of the chunked answer (one JSON event per line).
        *on_open* is called once the API server has accepted the watch (its answer's head is in)."""
        if self._fast is not None:
            try:
                lines = await self._fast.stream_lines(f"{path}?{urlencode(params)}", read_timeout)
                if isinstance(lines, tuple):  # an error, or an answer that was not streamed (no chunks)
                    status, data = lines
                    if status >= 400:
                        raise _error(status, data)
                    for line in data.split(b"\n"):
                        if line.strip():
                            yield line
                    return
                if on_open is not None:
                    on_open()
                async for line in lines:
                    yield line
            except (HttpError, TimeoutError) as e:
                raise ApiError(0, f"{type(e).__name__}: {e}") from e
            return
        import httpx2 as httpx

        timeout = httpx.Timeout(10.0, read=read_timeout)
        try:
            async with self._http.stream("GET", path, params=params, timeout=timeout) as resp:
                if resp.status_code >= 400:
                    raise _error(resp.status_code, await resp.aread())
                if on_open is not None:
                    on_open()
                buf = b""
                async for chunk in resp.aiter_bytes():
                    buf += chunk
                    while True:
                        i = buf.find(b"\n")
                        if i < 0:
                            break
                        line, buf = buf[:i], buf[i + 1 :]
                        if line.strip():
                            yield line
        except httpx.TransportError as e:
            raise ApiError(0, f"{type(e).__name__}: {e}") from e


def _decode(data: bytes) -> Any:
    """A JSON answer; one the decoder cannot read (nested deeper than it recurses, or not JSON) is an
    ApiError, never a bare RecursionError in the caller's task."""
    if not data:
        return None
    try:
        return _decode_any.decode(data)
    except (msgspec.DecodeError, RecursionError) as e:
        raise ApiError(0, f"the answer does not decode: {type(e).__name__}: {e}", "Undecodable") from e


class _Status(msgspec.Struct):
    message: str = ""
    reason: str = ""
    code: int = 0


def _error(code: int, data: bytes) -> ApiError:
    try:
        st = msgspec.json.decode(data, type=_Status)
        return ApiError(code, st.message or data[:200].decode(errors="replace"), st.reason)
    except msgspec.DecodeError:
        return ApiError(code, data[:200].decode(errors="replace"))


async def retrying(
    what: str,
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int = 6,
    backoff: Backoff = _DEFAULT_BACKOFF,
) -> T:
    """Run *call*, retrying retriable ApiErrors with backoff; the last error is raised after *attempts*."""
    for attempt in range(attempts):
        try:
            return await call()
        except ApiError as e:
            if not e.retriable or attempt == attempts - 1:
                raise
            delay = backoff.delay(attempt)
            log.warning("retrying", extra={"call": what, "error": str(e), "delay_s": round(delay, 3)})
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")
