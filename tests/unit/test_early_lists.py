"""An informer takes the answer to its first list from the lists sent at the process's start
(kai.k8s._early) only for the same request, once; one that failed is asked again. Checked with a stand-in
for the API client that counts its requests (no server: what is under test is the choice)."""

from __future__ import annotations

import asyncio

from kai.k8s._api import ApiError
from kai.k8s._decode import KINDS
from kai.k8s._early import FIRST_LIST_PARAMS, EarlyStart, list_key
from kai.k8s._informer import Informer
from kai.store import Store

POD = next(k for k in KINDS if k.kind == "Pod")


class CountingApi:
    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, str]]] = []

    async def get_raw(self, path: str, params: dict[str, str] | None = None) -> bytes:
        self.asked.append((path, dict(params or {})))
        return b"asked now"


def _page(early_answer: bytes | ApiError, params: dict[str, str]) -> tuple[list[bytes], CountingApi, bool]:
    async def run() -> tuple[list[bytes], CountingApi, bool]:
        api = CountingApi()
        sent: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if isinstance(early_answer, ApiError):
            sent.set_exception(early_answer)
        else:
            sent.set_result(early_answer)
        early = EarlyStart(runner=None, api=None, lists={list_key(POD.path(), FIRST_LIST_PARAMS): sent})  # type: ignore[arg-type]
        inf = Informer(api, POD, Store(), early=early)  # type: ignore[arg-type]
        pages = [await inf._get_page(params), await inf._get_page(params)]
        return pages, api, inf.listed_early

    return asyncio.run(run())


def test_the_same_first_request_takes_the_early_answer_once() -> None:
    params = {"resourceVersion": "0", "limit": "500"}  # the informer's own order: the key does not depend on it
    pages, api, early = _page(b"sent at start", params)
    assert pages == [b"sent at start", b"asked now"]  # a second list (a re-list) asks the API server
    assert api.asked == [(POD.path(), params)] and early


def test_a_failed_early_list_is_asked_again_and_another_request_is_never_served_early() -> None:
    pages, api, early = _page(ApiError(0, "connection refused"), FIRST_LIST_PARAMS)
    assert pages == [b"asked now", b"asked now"] and len(api.asked) == 2 and not early
    pages, api, early = _page(b"sent at start", {"limit": "500"})  # a list from etcd (after 410 Gone)
    assert pages == [b"asked now", b"asked now"] and not early
