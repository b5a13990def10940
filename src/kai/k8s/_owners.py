"""The pod-grouper's owner cache: each owner fetched once, however many pods it has; a watch keeps it.

Why: a Job of 1,000 pods has one owner; fetching it for each pod costs 1,000 GETs while the pods wait.
So an owner is fetched once (concurrent askers share the one request in flight) and kept current by a
watch on its resource, as controller-runtime's cache keeps KAI's pod-grouper's. The watch is opened
with the first owner fetched of that resource, from that object's resourceVersion (so it needs only the
``watch`` verb, no ``list``), and cluster-wide; an event replaces the cached object it names (a Job's
status changes with every pod its controller makes) or drops it (deleted, or not parsed); objects
nobody asked for are not kept.

Without a watch (RBAC allows ``get`` only, or the watch failed), entries of that resource are kept for
``ttl_s`` only: a pod arriving later re-reads its owner, as before. An entry whose object a watch
event showed at a newer resourceVersion than the one fetched is not stored (the fetch and the change
raced). A watch that ends is re-opened from the last resourceVersion it saw; 410 Gone drops every entry
of the resource and the next fetch opens a new watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from kai.api.workloads import Workload
from kai.k8s._api import Api, ApiError

log = logging.getLogger("kai.k8s.podgrouper")

OwnerKey = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


_obj = msgspec.json.Decoder(_Obj)


_event = msgspec.json.Decoder(_Event)


def _rv(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0


class _Watch:
    """One resource's watch: the names it saw change, at which resourceVersion."""

    def __init__(self, base: str, api_version: str, kind: str) -> None:
        self.base = base  # /apis/batch/v1/jobs
        self.api_version = api_version
        self.kind = kind
        self.task: asyncio.Task[None] | None = None
        self.ok = False  # the watch is open (else entries live ttl_s)
        self.changed: dict[tuple[str, str], int] = {}  # (namespace, name) → last resourceVersion seen


class OwnerCache:
    """Owners by (apiVersion, kind, namespace, name); *fetch* reads one from the API server."""

    def __init__(
        self,
        api: Api,
        fetch: Callable[[str, str, str, str], Awaitable[Workload | None]],
        parse: Callable[[str, str, dict[str, Any]], Workload | None],
        *,
        ttl_s: float = 1.0,
        watch_timeout_s: int = 300,
    ) -> None:
        self.api = api
        self._fetch = fetch
        self._parse = parse
        self.ttl_s = ttl_s
        self.watch_timeout_s = watch_timeout_s
        self._entries: dict[OwnerKey, tuple[Workload | None, float]] = {}
        self._inflight: dict[OwnerKey, asyncio.Future[Workload | None]] = {}
        self._watches: dict[str, _Watch] = {}  # resource path → its watch
        self.fetches: dict[OwnerKey, int] = {}  # GETs sent per owner (for tests and the benchmark)

    async def get(self, api_version: str, kind: str, ns: str, name: str, base: str | None) -> Workload | None:
        """The owner, from the cache or fetched once. *base* is the resource's path (None: not a served
        resource; fetched uncached)."""
        key = (api_version, kind, ns, name)
        hit = self._entries.get(key)
        if hit is not None:
            watch = self._watches.get(base) if base else None
            if (watch is not None and watch.ok) or time.monotonic() - hit[1] < self.ttl_s:
                return hit[0]
            del self._entries[key]
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)
        fut: asyncio.Future[Workload | None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            self.fetches[key] = self.fetches.get(key, 0) + 1
            owner = await self._fetch(api_version, kind, ns, name)
            fut.set_result(owner)
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: concurrent askers that left get it; no "never retrieved" warning
            raise
        finally:
            del self._inflight[key]
        if base:
            self._keep(key, owner, base)
        return owner

    def _keep(self, key: OwnerKey, owner: Workload | None, base: str) -> None:
        watch = self._watches.get(base)
        if watch is None:
            watch = self._watches[base] = _Watch(base, key[0], key[1])
        if owner is not None:
            rv = str((owner.doc.get("metadata") or {}).get("resourceVersion") or "")
            if watch.changed.get((key[2], key[3]), 0) > _rv(rv):
                return  # changed after this fetch was answered: not kept
            if watch.task is None and rv:
                watch.task = asyncio.ensure_future(self._run(watch, rv))
        self._entries[key] = (owner, time.monotonic())

    def _event(self, watch: _Watch, kind: str, raw: msgspec.Raw) -> str:
        """Apply one watch event to the cached object it names; its resourceVersion."""
        m = _obj.decode(raw).metadata
        if kind == "BOOKMARK":
            return m.resourceVersion
        watch.changed[(m.namespace, m.name)] = _rv(m.resourceVersion)
        key = (watch.api_version, watch.kind, m.namespace, m.name)
        if key in self._entries:
            owner = None
            if kind != "DELETED":
                try:
                    owner = self._parse(watch.api_version, watch.kind, msgspec.json.decode(raw))
                except Exception:  # a bad owner costs only its cache entry: it is read again when asked for
                    log.exception("owner from a watch event not parsed", extra={"owner": f"{m.namespace}/{m.name}"})
            if owner is None:
                del self._entries[key]
            else:
                self._entries[key] = (owner, time.monotonic())
        return m.resourceVersion

    async def _run(self, watch: _Watch, rv: str) -> None:
        """Watch *watch*'s resource from *rv* until it fails for good (403: entries then live ttl_s)."""
        failures = 0
        while True:
            params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(self.watch_timeout_s)}
            params["resourceVersion"] = rv
            watch.ok = True  # from its start: a quiet resource sends nothing, and its entries are good
            try:
                async for line in self.api.stream_lines(watch.base, params, read_timeout=self.watch_timeout_s + 30):
                    failures = 0
                    try:
                        ev = _event.decode(line)
                    except msgspec.MsgspecError:
                        raise ApiError(410, "undecodable watch event") from None
                    if ev.type == "ERROR":
                        raise ApiError(410, "watch error event")
                    rv = self._event(watch, ev.type, ev.object) or rv
            except ApiError as e:
                watch.ok = False
                if e.code == 403:
                    log.info("owner watch forbidden; owners re-read after %s s", self.ttl_s, extra={"path": watch.base})
                    return
                if e.code == 410:  # too old: forget the resource; the next fetch watches anew
                    for key in [k for k in self._entries if k[1] == watch.kind]:
                        del self._entries[key]
                    watch.changed.clear()
                    watch.task = None
                    return
                failures += 1
                await asyncio.sleep(min(30.0, 0.2 * 2**failures))

    async def close(self) -> None:
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def stats(self) -> dict[str, Any]:
        return {"fetches": sum(self.fetches.values()), "cached": len(self._entries)}
