"""How ``kai scheduler --shard`` reads its SchedulingShard (kai.k8s._shard), with a stand-in for the API client
that answers from a list of pages (no server: what is under test is the requests kai sends and what it makes
of odd answers; tests/k8s/test_shards.py reads real shards from a real API server).

The requests matter: kube-apiserver 1.31 on answers a list *with a selector* 429 "storage is (re)initializing"
while its cache of the kind initializes, and serves one with a ``limit`` and no selector from etcd
(k8s.io/apiserver ``shouldDelegateListOnNotReadyCache``). The shard gates the Lease and the first cycle."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kai.k8s import _shard
from kai.k8s._api import ApiError, Backoff
from kai.k8s._shard import SHARDS_PATH, ShardMissing, resolve_partition

KEY = "kai.scheduler/node-pool"


def shard(name: str, value: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"partitionLabelValue": value}}


class PagedApi:
    """Answers GETs of the shards' list with *answers* in turn (an ApiError is raised)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = list(answers)
        self.asked: list[dict[str, list[str]]] = []

    async def request(self, method: str, path: str, **_: Any) -> Any:
        url = urlsplit(path)
        assert method == "GET" and url.path == SHARDS_PATH
        self.asked.append(parse_qs(url.query))
        answer = self.answers.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return answer


def resolve(api: PagedApi, name: str) -> Any:
    return asyncio.run(resolve_partition(api, name, KEY, page_size=2))  # type: ignore[arg-type]


def test_the_read_has_a_limit_and_no_selector_and_follows_continue() -> None:
    api = PagedApi(
        [
            {"metadata": {"continue": "tok/1+="}, "items": [shard("a", "pa"), shard("b", "pb")]},
            {"metadata": {}, "items": [shard("c", "pc")]},
        ]
    )
    part = resolve(api, "c")
    assert part is not None and (part.value, part.key) == ("pc", KEY)
    assert api.asked == [{"limit": ["2"]}, {"limit": ["2"], "continue": ["tok/1+="]}]
    assert not any("fieldSelector" in q or "labelSelector" in q for q in api.asked)


def test_a_name_on_no_page_is_missing_and_the_default_shard_is_the_whole_cluster() -> None:
    with pytest.raises(ShardMissing, match='"d" does not exist'):
        resolve(PagedApi([{"metadata": {}, "items": [shard("a", "pa")]}]), "d")
    assert resolve(PagedApi([{"metadata": {}, "items": [shard("a", "pa")]}]), "default") is None


def test_a_retriable_answer_or_one_that_is_not_a_list_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shard, "RETRY_BACKOFF", Backoff(initial=0.0))
    initializing = ApiError(429, "storage is (re)initializing", "TooManyRequests")
    api = PagedApi([initializing, ["not", "a", "list"], {"metadata": {}, "items": [shard("b", "pb")]}])
    part = resolve(api, "b")
    assert part is not None and part.value == "pb"
    assert len(api.asked) == 3


def test_malformed_items_name_nothing_and_do_not_stop_the_read() -> None:
    api = PagedApi(
        [
            {
                "metadata": {"continue": 7},  # not a string: no next page
                "items": ["x", {"metadata": "y"}, {"metadata": {"name": 5}}, shard("b", "pb")],
            }
        ]
    )
    part = resolve(api, "b")
    assert part is not None and part.value == "pb"
    assert len(api.asked) == 1
    assert resolve(PagedApi([{"metadata": [], "items": {"a": 1}}]), "default") is None
