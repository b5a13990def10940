"""Informers: list + watch one kind into the Store, as client-go's reflector does.

Theory of operation, per kind:

1. **List** (the first from the watch cache, later ones paginated from etcd), then **diff**
   against what the Store holds of the kind: objects gone from the list are deleted, new or
   changed ones (by the API's resourceVersion) are put. The first list sets ``synced``.
2. **Watch** from the list's resourceVersion with bookmarks, so a quiet kind still advances its
   resourceVersion. Each event updates the Store at once; a watch that times out is simply re-opened
   from the last resourceVersion seen.
3. **410 Gone** (the resourceVersion fell out of the API server's window, as an HTTP status or an
   ERROR event): ``synced`` is cleared, and the kind is listed and diffed again. The scheduler does
   not run a cycle while any informer is unsynced, so no decision is taken on data a watch may have
   missed.
4. Any other failure (connection refused while the API server restarts, 5xx, 429) backs off
   exponentially and re-watches from the last resourceVersion; the informer never gives up. A watch
   event that does not decode counts as 410 (listed again: the change it carried is not lost); a
   list that does not decode, as a failed request.
5. **Liveness**: the informer notes when it last heard from the API server (a list, a watch the API
   server accepted from the last resourceVersion, a watch event, a bookmark, a watch that ended at its
   timeout). Watches are opened with a short timeout
   (``watch_timeout_s``, 30 s), so a healthy quiet kind is heard from at least that often, and every
   read of a watch waits at most ``progress_deadline_s`` (45 s): a stream that stalls with its
   connection up is broken then and opened again. ``live()`` is false when the kind has not synced,
   when its task died (the supervisor restarts it: it lists again), or when nothing was heard for
   ``progress_deadline_s``; the scheduler decides nothing while any kind is not live.

An object the parser rejects (an invalid Queue or PodGroup), or cannot read at all (nested deeper than
the JSON decoder goes, or a parser bug), is kept out of the Store (an older valid version is removed
too) and reported once per resourceVersion through ``on_invalid``, which names the field; everything
else keeps scheduling.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from kai.api.errors import ManifestError
from kai.k8s import _jsonscan
from kai.k8s._api import Api, ApiError, Backoff
from kai.k8s._decode import AnyDoc, Decoded, KindSpec, ListMeta, WatchEvent
from kai.k8s._early import PAGE_SIZE, list_params
from kai.store import Key, Store

if TYPE_CHECKING:
    from kai.k8s._early import EarlyStart

_WATCH_BACKOFF = Backoff(initial=0.2, cap=5.0)
log = logging.getLogger("kai.k8s.informer")

OnChange = Callable[[str, Key, Any, Any], None]  # (op ADDED|MODIFIED|DELETED, key, new object or None, old or None)
OnInvalid = Callable[[KindSpec, dict[str, Any], ManifestError], None]

_event = msgspec.json.Decoder(WatchEvent)
_bookmark = msgspec.json.Decoder(AnyDoc)


class _Status(msgspec.Struct):
    code: int = 0
    message: str = ""
    reason: str = ""


_status = msgspec.json.Decoder(_Status)
_list_meta = msgspec.json.Decoder(ListMeta)
_any = msgspec.json.Decoder()
DECODE_ERRORS = (msgspec.MsgspecError, RecursionError, KeyError, TypeError, ValueError)
WATCH_TIMEOUT_S = 30
PROGRESS_DEADLINE_S = 45.0


class Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


def _key(doc: dict[str, Any]) -> Key:
    meta = doc["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Informer:
    """Keeps the Store's objects of one kind equal to the API server's."""

    def __init__(
        self,
        api: Api,
        spec: KindSpec,
        store: Store,
        *,
        on_change: OnChange | None = None,
        on_invalid: OnInvalid | None = None,
        page_size: int = PAGE_SIZE,
        watch_timeout_s: int = WATCH_TIMEOUT_S,
        progress_deadline_s: float = PROGRESS_DEADLINE_S,
        backoff: Backoff = _WATCH_BACKOFF,
        early: EarlyStart | None = None,
    ) -> None:
        self.api = api
        self.early = early  # the process's first lists, sent before its imports (kai.k8s._early)
        self.listed_early = False  # the first list was one of those
        self.spec = spec
        self.store = store
        self.on_change = on_change
        self.on_invalid = on_invalid
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.progress_deadline_s = progress_deadline_s
        self.backoff = backoff
        self.synced = asyncio.Event()
        self.last_progress = 0.0  # monotonic time the API server was last heard from about this kind
        self.running = False  # run() is under way (false once it raised, until the supervisor restarts it)
        self.resource_version = ""  # the last resourceVersion seen (list, event or bookmark)
        self.api_versions: dict[Key, str] = {}  # resourceVersion per object held (Store stamps its own)
        self.statuses: dict[Key, Any] = {}  # the status each object had on the wire
        self.relists = 0
        self._invalid: dict[Key, str] = {}  # rejected objects → the resourceVersion reported
        self._resume_from: str | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._watching = asyncio.Event()
        self._watching.set()

    # ---- test and fault hooks --------------------------------------------------------------

    def pause(self) -> None:
        """Break the current watch and open none until ``resume_watch_from`` (a watch that is down)."""
        self._watching.clear()
        self._resume_from = self.resource_version
        if self._watch_task is not None:
            self._watch_task.cancel()

    def resume_watch_from(self, resource_version: str) -> None:
        """Break the current watch and re-open it from *resource_version* (a stale one gets 410 Gone)."""
        self._resume_from = resource_version
        self._watching.set()
        if self._watch_task is not None:
            self._watch_task.cancel()

    # ---- liveness ----------------------------------------------------------------------------

    def live(self, now: float | None = None) -> bool:
        """Synced, its task running, and heard from within the progress deadline (module docstring)."""
        if not self.synced.is_set() or not self.running:
            return False
        return (time.monotonic() if now is None else now) - self.last_progress < self.progress_deadline_s

    def heard_since(self, t: float) -> bool:
        """The API server was heard from about this kind after monotonic time *t*."""
        return self.last_progress > t

    def _progress(self) -> None:
        self.last_progress = time.monotonic()

    # ---- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch forever (see the module docstring). If anything raises, the kind is no
        longer synced: a supervisor that runs this again lists the kind again first."""
        self.running = True
        try:
            await self._run()
        except BaseException:
            self.synced.clear()
            raise
        finally:
            self.running = False

    async def _run(self) -> None:
        await self._list_until_done()
        failures = 0
        while True:
            await self._watching.wait()
            if self._resume_from is not None:
                self.resource_version, self._resume_from = self._resume_from, None
            self._watch_task = asyncio.ensure_future(self._watch())
            try:
                await self._watch_task
                failures = 0
            except asyncio.CancelledError:
                if self._resume_from is None:
                    raise  # the informer itself is being stopped
                continue
            except Gone:
                log.info("watch expired; listing again", extra={"kind": self.spec.kind})
                self.synced.clear()
                await self._list_until_done()
                failures = 0
            except ApiError as e:
                delay = self.backoff.delay(failures)
                failures += 1
                log.warning("watch failed", extra={"kind": self.spec.kind, "error": str(e), "delay_s": round(delay, 3)})
                await asyncio.sleep(delay)
            finally:
                self._watch_task = None

    async def _list_until_done(self) -> None:
        failures = 0
        while True:
            try:
                await self._list()
                self.relists += 1
                self._progress()
                self.synced.set()
                return
            except ApiError as e:
                # Not served (its CRD is missing), or an optional kind kai may not read (RBAC without
                # Topologies, say): empty until it is, looked at again every 30 s.
                if e.code == 404 or (e.code == 403 and self.spec.optional):
                    what = "kind not served" if e.code == 404 else "kind not readable (forbidden); treated as empty"
                    log.warning(what, extra={"kind": self.spec.kind, "path": self.spec.path()})
                    self._diff({})
                    self._progress()
                    self.synced.set()
                    await asyncio.sleep(min(30.0, self.progress_deadline_s / 2))
                    continue
                delay = self.backoff.delay(failures)
                failures += 1
                log.warning("list failed", extra={"kind": self.spec.kind, "error": str(e), "delay_s": round(delay, 3)})
                await asyncio.sleep(delay)

    async def _get_page(self, params: dict[str, str]) -> bytes:
        """A list page: the answer to the same request sent at the process's start if there is one (taken
        once; one that failed is asked again here), else a request now."""
        sent = self.early.take(self.spec.path(), params) if self.early is not None else None
        if sent is not None:
            try:
                data = await sent
                self.listed_early = True
                return data
            except ApiError as e:
                log.info(
                    "the list sent at start failed; listing again", extra={"kind": self.spec.kind, "error": str(e)}
                )
        return await self.api.get_raw(self.spec.path(), params)

    async def _list(self) -> None:
        """The first list is served from the API server's watch cache (resourceVersion=0, as client-go's
        reflector does: no etcd read, no pagination); a list after 410 Gone reads etcd, page by page."""
        items: dict[Key, Decoded] = {}
        cont = ""
        rv = ""
        while True:
            params = list_params(self.page_size, first=self.relists == 0)
            if cont:
                params["continue"] = cont
            data = await self._get_page(params)
            try:
                try:
                    meta, page = self.spec.codec.decode_list(data)
                except RecursionError:  # an item nested too deep: the others are read one by one
                    meta, page = self._decode_list_slowly(data)
                for d in page:
                    items[_key(d.doc)] = d
            except DECODE_ERRORS as e:  # retried like a failed request
                raise ApiError(0, f"malformed {self.spec.kind} list: {e}") from e
            rv = meta.resourceVersion or rv
            if not meta.cont:
                break
            cont = meta.cont
        self._diff(items)
        self.resource_version = rv

    def _decode_list_slowly(self, data: bytes) -> tuple[ListMeta, list[Decoded]]:
        """A list the fast decoder refused, item by item: an item that cannot be read is reported
        (``on_invalid``) and left out, so one object does not keep the whole kind unsynced."""
        meta_raw, raw_items = _jsonscan.list_items(data)
        meta = _list_meta.decode(meta_raw)
        page = []
        for raw in raw_items:
            try:
                page.append(self.spec.codec.decode_item(raw))
            except DECODE_ERRORS as e:
                self._unreadable(raw, e)
        return meta, page

    def _unreadable(self, raw: bytes, err: BaseException) -> tuple[Key, str] | None:
        """Report an object whose bytes do not decode; its key and resourceVersion (from its metadata
        alone), if found."""
        try:
            meta_raw = _jsonscan.member(raw, b"metadata")
            meta = _any.decode(meta_raw) if meta_raw is not None else {}
            doc = {"metadata": meta if isinstance(meta, dict) else {}}
            key = _key(doc)
        except DECODE_ERRORS:
            log.warning("unreadable object without a name", extra={"kind": self.spec.kind, "error": str(err)})
            return None
        what = "nested too deep to decode" if isinstance(err, RecursionError) else f"does not decode: {err}"
        rv = str(doc["metadata"].get("resourceVersion", ""))
        self._reject(key, rv, doc, ManifestError(what))
        return key, rv

    def _diff(self, items: dict[Key, Decoded]) -> None:
        """Make the Store's objects of this kind equal to *items* (a fresh list)."""
        kind = self.spec.kind
        for obj in self.store.list(kind):
            key = (obj.meta.namespace or "", obj.meta.name)
            if key not in items:
                self._delete(key)
        for key in list(self._invalid):
            if key not in items:
                del self._invalid[key]
        for key, d in items.items():
            if self.api_versions.get(key) == d.resource_version and self.store.get(kind, key) is not None:
                continue
            self._put(key, d)

    async def _watch(self) -> None:
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout_s),
        }
        if self.resource_version:
            params["resourceVersion"] = self.resource_version
        stream = self.api.stream_lines(
            self.spec.path(), params, read_timeout=self.progress_deadline_s, on_open=self._progress
        )
        try:
            async for line in stream:
                self._progress()
                try:
                    ev = _event.decode(line)
                except RecursionError as e:  # an object nested too deep: reported and left out
                    where = self._unreadable(_jsonscan.member(line, b"object") or b"{}", e)
                    if where is None:
                        raise Gone(f"unreadable watch event: {e}") from e
                    self.resource_version = where[1] or self.resource_version
                    continue
                except DECODE_ERRORS as e:  # an event that is not one: it may hide a change
                    raise Gone(f"malformed watch event: {e}") from e
                if ev.type == "ERROR":
                    st = _status.decode(ev.object)
                    if st.code == 410:
                        raise Gone(st.message)
                    raise ApiError(st.code, st.message, st.reason)
                if ev.type == "BOOKMARK":
                    self.resource_version = _bookmark.decode(ev.object).metadata.resourceVersion
                    continue
                try:
                    d = self.spec.codec.decode_item(ev.object)
                    key = _key(d.doc)
                except DECODE_ERRORS as e:
                    raise Gone(f"malformed {self.spec.kind} in a watch event: {e}") from e
                if ev.type == "DELETED":
                    self._invalid.pop(key, None)
                    self._delete(key)
                else:
                    self._put(key, d)
                self.resource_version = d.resource_version
            self._progress()  # the watch ended at its timeout: the API server answered to the end
        except ApiError as e:
            if e.code == 410:
                raise Gone(e.message) from e
            raise

    # ---- Store writes --------------------------------------------------------------------

    def _put(self, key: Key, d: Decoded) -> None:
        try:
            obj = self.spec.parse(d.doc)
        except ManifestError as e:
            self._reject(key, d.resource_version, d.doc, e)
            return
        except Exception as e:  # a parser bug: this object is left out, not the whole kind
            log.exception("object not parsed", extra={"kind": self.spec.kind, "object": f"{key[0]}/{key[1]}"})
            self._reject(key, d.resource_version, d.doc, ManifestError(f"cannot be read ({type(e).__name__}: {e})"))
            return
        self._invalid.pop(key, None)
        old = self.store.get(self.spec.kind, key)
        self.api_versions[key] = d.resource_version
        self.statuses[key] = d.status
        self.store.put(obj)
        self._notify("MODIFIED" if old is not None else "ADDED", key, obj, old)

    def _reject(self, key: Key, resource_version: str, doc: dict[str, Any], err: ManifestError) -> None:
        """Keep *key* out of the Store and report it, once per resourceVersion."""
        self._delete(key)
        if self._invalid.get(key) != resource_version:
            self._invalid[key] = resource_version
            if self.on_invalid is not None:
                try:
                    self.on_invalid(self.spec, doc, err)
                except Exception:
                    log.exception("on_invalid failed", extra={"kind": self.spec.kind})

    def _delete(self, key: Key) -> None:
        self.api_versions.pop(key, None)
        self.statuses.pop(key, None)
        change = self.store.delete(self.spec.kind, key)
        if change is not None:
            self._notify("DELETED", key, None, change.obj)

    def _notify(self, op: str, key: Key, obj: Any, old: Any) -> None:
        """Tell ``on_change``; a failing listener is logged, it never stops the watch."""
        if self.on_change is None:
            return
        try:
            self.on_change(op, key, obj, old)
        except Exception:
            log.exception("change listener failed", extra={"kind": self.spec.kind, "object": f"{key[0]}/{key[1]}"})
