"""kai's Api over its two transports against the real API server: the own HTTP/1.1 client (tokens and
client certificates) and the httpx fallback (made on first use, for auth kinds the own client does not
handle). Both must give the same answers, errors and watch lines."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kai.k8s._api import Api, ApiError, load_config
from kai.k8s.envtest import ControlPlane


async def _exercise(api: Api, ns: str) -> dict[str, object]:
    name = f"cm-{uuid.uuid4().hex[:6]}"
    base = f"/api/v1/namespaces/{ns}/configmaps"
    created = await api.request("POST", base, body={"metadata": {"name": name}, "data": {"k": "v"}})
    got = await api.request("GET", f"{base}/{name}")
    listed = await api.request("GET", base, params={"labelSelector": "absent=yes"})
    raw = await api.get_raw(base, {"limit": "10"})
    with pytest.raises(ApiError) as missing:
        await api.request("GET", f"{base}/not-there")
    lines = []
    params = {"watch": "1", "resourceVersion": created["metadata"]["resourceVersion"], "timeoutSeconds": "5"}

    async def watch() -> None:
        async for line in api.stream_lines(base, params, read_timeout=10):
            lines.append(line)
            return

    task = asyncio.ensure_future(watch())
    await asyncio.sleep(0.2)
    await api.request("PATCH", f"{base}/{name}", body={"data": {"k": "w"}}, content_type="application/merge-patch+json")
    await asyncio.wait_for(task, 10)
    return {
        "created": created["data"],
        "got": got["data"],
        "listed": listed["items"],
        "raw_has_name": name.encode() in raw,
        "missing": (missing.value.code, missing.value.reason),
        "event": b'"MODIFIED"' in lines[0] and b'"w"' in lines[0],
    }


@pytest.mark.parametrize("fast", [True, False], ids=["own-client", "httpx"])
def test_both_transports_give_the_same_answers(control_plane: ControlPlane, namespace: str, fast: bool) -> None:
    async def run() -> tuple[dict[str, object], bool]:
        api = Api(load_config(str(control_plane.kubeconfig)), fast=fast)
        try:
            out = await _exercise(api, namespace)
            return out, api._http_client is not None
        finally:
            await api.close()

    out, made_httpx = asyncio.run(run())
    assert out == {
        "created": {"k": "v"},
        "got": {"k": "v"},
        "listed": [],
        "raw_has_name": True,
        "missing": (404, "NotFound"),
        "event": True,
    }
    # The own client answers everything but the query-parameter request; httpx is made for that one.
    assert made_httpx


def test_the_own_client_makes_no_httpx_client_for_the_scheduler_s_calls(control_plane: ControlPlane) -> None:
    async def run() -> bool:
        api = Api(load_config(str(control_plane.kubeconfig)))
        try:
            await api.request("GET", "/api/v1/namespaces/default")
            await api.get_raw("/api/v1/nodes", {"resourceVersion": "0"})
            return api._http_client is None
        finally:
            await api.close()

    assert asyncio.run(run())


def test_new_connections_resume_the_tls_session_and_keep_the_client_identity(
    control_plane: ControlPlane, namespace: str
) -> None:
    """kai's connections after the first resume its TLS session (no certificate signatures on either side),
    and the API server still knows who they are: creates that RBAC must allow succeed on all of them."""

    async def run() -> tuple[int, int, list[str]]:
        api = Api(load_config(str(control_plane.kubeconfig)))
        try:
            await api.request("GET", f"/api/v1/namespaces/{namespace}")  # a full handshake; its ticket follows
            base = f"/api/v1/namespaces/{namespace}/configmaps"
            made = await asyncio.gather(
                *(api.request("POST", base, body={"metadata": {"name": f"resumed-{i}"}}) for i in range(16))
            )
            assert api._fast is not None
            return api._fast.handshakes, api._fast.resumed, sorted(m["metadata"]["name"] for m in made)
        finally:
            await api.close()

    handshakes, resumed, names = asyncio.run(run())
    assert names == sorted(f"resumed-{i}" for i in range(16))
    assert handshakes >= 2  # the 16 creates at once took connections of their own
    assert resumed == handshakes - 1
