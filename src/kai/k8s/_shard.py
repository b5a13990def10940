"""``kai scheduler --shard NAME``: which node pool this process serves, and the Lease it holds for it.

Rules (KAI's, ``cmd/scheduler/app`` and the operator's ``resources_for_shard.go``):

* The SchedulingShard NAME is read once at start; its ``partitionLabelValue`` chooses the node pool
  (``kai.scheduler.partition``). KAI's operator passes the value to the scheduler as a flag, so a change
  means a new scheduler process; in kai a change applies at the process's next start.
* The Lease is ``kai-scheduler-<value>`` for a labelled pool and ``kai-scheduler`` for the unlabelled
  one, so the replicas of one shard elect one leader and shards never wait for each other.
* No SchedulingShard ``default`` (or none kai may read: RBAC): the process serves the whole cluster, as kai
  did before shards (a cluster with no shard object has no pools). Any other missing name is a set-up
  error: ``ShardMissing``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import quote

from kai.api.errors import ManifestError
from kai.api.objects import parse_shard
from kai.k8s._api import Api, ApiError, Backoff
from kai.scheduler.partition import Partition

log = logging.getLogger("kai.k8s.shard")

DEFAULT_SHARD = "default"
SHARDS_PATH = "/apis/kai.scheduler/v1/schedulingshards"
RETRY_BACKOFF = Backoff(initial=0.5, cap=10.0)  # an API server not up yet is waited for
PAGE_SIZE = 500  # shards per list page


class ShardMissing(RuntimeError):
    """The SchedulingShard named by --shard does not exist (or cannot be read); the message says so."""


async def resolve_partition(api: Api, name: str, label_key: str, *, page_size: int = PAGE_SIZE) -> Partition | None:
    """The node pool of SchedulingShard *name*; None (the whole cluster) when the default shard is absent.

    Read with a paginated list of every shard, filtered here by name: kai's RBAC grants list and watch on
    SchedulingShards, not get. Why no field selector: an API server whose watch cache for the kind is
    (re)initializing (just after ``kai install`` made the CRD, or after the API server restarted) answers
    a list with a selector 429 "storage is (re)initializing", but serves a list with a limit and no
    selector from etcd (KEP-4568, Kubernetes 1.31 on). The shard gates the Lease and so the first cycle: a
    429 and its backoff held the Lease back 0.2–0.4 s. Shards are few; a page holds them all."""
    try:
        items = [item for item in await _list_all(api, page_size) if _field(item, "name") == name]
    except ApiError as e:
        if e.code == 403 and name == DEFAULT_SHARD:  # SchedulingShards are optional, as for the informers
            log.warning("SchedulingShards may not be read; serving the whole cluster", extra={"error": str(e)})
            return None
        if e.code != 404:  # 404: the CRD is not installed, so no shard exists
            raise ShardMissing(f'SchedulingShard "{name}" cannot be read: {e}') from e
        items = []
    if not items:
        if name == DEFAULT_SHARD:
            return None
        raise ShardMissing(f'SchedulingShard "{name}" does not exist; create it, or name another with --shard')
    try:
        shard = parse_shard({"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", **items[0]})
    except ManifestError as e:
        raise ShardMissing(f'SchedulingShard "{name}" is invalid: {e}') from e
    return Partition(shard.partition_label_value, label_key)


async def _list_all(api: Api, page_size: int) -> list[dict[str, Any]]:
    """Every SchedulingShard, page by page (``limit`` and ``continue``)."""
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        query = f"?limit={page_size}" + (f"&continue={quote(cont, safe='')}" if cont else "")
        page = await _read(api, SHARDS_PATH + query)
        listed = page.get("items")
        items += [item for item in listed if isinstance(item, dict)] if isinstance(listed, list) else []
        cont = _field(page, "continue")
        if not cont:
            return items


def _field(obj: dict[str, Any], key: str) -> str:
    """``metadata.<key>`` of *obj* when it is a string, else "" (a malformed object names nothing)."""
    meta = obj.get("metadata")
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


async def _read(api: Api, path: str) -> dict[str, Any]:
    """GET *path*, waiting out an API server that is not up yet (a retriable error); others are raised."""
    attempt = 0
    while True:
        try:
            answer = await api.request("GET", path)
            if isinstance(answer, dict):
                return answer
            raise ApiError(0, f"malformed answer: a JSON {type(answer).__name__}, not a list")  # retried
        except ApiError as e:
            if not e.retriable:
                raise
            log.warning("SchedulingShard not read; trying again", extra={"path": path, "error": str(e)})
            await asyncio.sleep(RETRY_BACKOFF.delay(attempt))
            attempt += 1


def lease_name(base: str, partition: Partition | None) -> str:
    """KAI's LeaseName: ``<scheduler>-<partitionLabelValue>``, or ``<scheduler>`` for the unlabelled pool."""
    return f"{base}-{partition.value}" if partition is not None and partition.value else base
