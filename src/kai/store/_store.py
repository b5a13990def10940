"""The Store: kai's one local picture of cluster objects.

Rules: objects are keyed by (kind, namespace, name); every write bumps a
store-wide resource version, stamps it on the object and appends a Change to
the feed. Readers either take the current objects (``list``) or catch up
from a version they remember (``changes_since``). The embedded cluster writes
here directly; the Kubernetes backend fills it from watches. Nothing here
knows about scheduling or the network.

Order: the objects of a kind are listed in *slot* order. A new object takes the
next slot at the end; a removed one's slot is taken by the last object. So the
order is insertion order until something leaves, and a removal moves one object,
not every object after it. Why: a snapshot numbers jobs and tasks in this order
(kai.scheduler.snapshot), and a cycle after a few pods and PodGroups left must
renumber a few of them, not tens of thousands. The order is a function of the
Store's history of writes alone, so a fresh build and a kept one agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

Key = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True, slots=True)
class Change:
    resource_version: int
    op: Literal["ADDED", "MODIFIED", "DELETED"]
    kind: str
    key: Key
    obj: Any


def _matches(matches: Callable[[Any], bool], obj: Any) -> bool:
    try:
        return bool(matches(obj))
    except Exception:  # a reader's bug costs that object its place in the reader's view, not the write
        return False


def key_of(obj: Any) -> Key:
    return (obj.meta.namespace or "", obj.meta.name)


class Store:
    """Versioned object store with a change feed and subscribers."""

    def __init__(self, feed_limit: int = 100_000) -> None:
        self._objects: dict[str, dict[Key, Any]] = {}
        # per kind, the objects and their keys in slot order, and each key's slot (see the module docstring); the
        # dict above stays the lookup (``get`` is one dict read, the hottest call here), these give the order
        self._slots: dict[str, list[Any]] = {}
        self._keys: dict[str, list[Key]] = {}
        self._slot_of: dict[str, dict[Key, int]] = {}
        self._rv = 0
        self._feed: list[Change] = []
        self._feed_limit = feed_limit
        self._subscribers: list[Callable[[Change], None]] = []
        self._indexes: dict[str, list[tuple[Callable[[Any], bool], dict[Key, Any]]]] = {}

    @property
    def resource_version(self) -> int:
        return self._rv

    def _record(self, op: Literal["ADDED", "MODIFIED", "DELETED"], kind: str, key: Key, obj: Any) -> Change:
        self._rv += 1
        change = Change(self._rv, op, kind, key, obj)
        self._feed.append(change)
        for matches, found in self._indexes.get(kind, ()):
            if op != "DELETED" and _matches(matches, obj):
                found[key] = obj
            else:
                found.pop(key, None)
        if len(self._feed) > self._feed_limit:
            del self._feed[: len(self._feed) - self._feed_limit]
        for fn in self._subscribers:
            fn(change)
        return change

    def put(self, obj: Any) -> Change:
        """Create or replace *obj* (its class's ``kind`` names the collection). The object is not touched:
        its version is in the returned Change and the feed (a Snapshot may hold the object it replaces)."""
        kind = obj.kind
        key = key_of(obj)
        bucket = self._objects.get(kind)
        if bucket is None:
            bucket = self._objects[kind] = {}
            self._slots[kind], self._keys[kind], self._slot_of[kind] = [], [], {}
        slot_of = self._slot_of[kind]
        slot = slot_of.get(key)
        op: Literal["ADDED", "MODIFIED"]
        if slot is None:
            op = "ADDED"
            slot_of[key] = len(self._slots[kind])
            self._slots[kind].append(obj)
            self._keys[kind].append(key)
        else:
            op = "MODIFIED"
            self._slots[kind][slot] = obj
        bucket[key] = obj
        return self._record(op, kind, key, obj)

    def delete(self, kind: str, key: Key) -> Change | None:
        obj = self._objects.get(kind, {}).pop(key, None)
        if obj is None:
            return None
        slots, keys, slot_of = self._slots[kind], self._keys[kind], self._slot_of[kind]
        slot = slot_of.pop(key)
        last, last_key = slots.pop(), keys.pop()
        if slot < len(slots):  # the last object takes the removed one's slot
            slots[slot], keys[slot] = last, last_key
            slot_of[last_key] = slot
        return self._record("DELETED", kind, key, obj)

    def get(self, kind: str, key: Key) -> Any | None:
        return self._objects.get(kind, {}).get(key)

    def list(self, kind: str) -> list[Any]:
        """Objects of *kind* in slot order (insertion order until one is removed: see the module docstring)."""
        return self._slots.get(kind, [])[:]

    def by_key(self, kind: str) -> dict[Key, Any]:
        """A copy of the objects of *kind* by key, in slot order: a caller that lays a few changed objects
        over the Store's (``d[key] = changed`` keeps the key's place) pays for the copy in C, not a Python
        step per object."""
        return dict(zip(self._keys.get(kind, ()), self._slots.get(kind, ())))

    def __iter__(self) -> Iterator[Any]:
        for slots in self._slots.values():
            yield from slots

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))

    def changes_since(self, resource_version: int) -> list[Change]:
        """Changes after *resource_version*; raises LookupError if the feed no longer reaches back
        that far (the caller must re-list, as a watcher does on 410 Gone)."""
        if self._feed and resource_version < self._feed[0].resource_version - 1:
            raise LookupError(f"resource version {resource_version} is too old")
        lo = 0
        hi = len(self._feed)
        while lo < hi:  # first change with rv > resource_version
            mid = (lo + hi) // 2
            if self._feed[mid].resource_version <= resource_version:
                lo = mid + 1
            else:
                hi = mid
        return self._feed[lo:]

    def index(self, kind: str, matches: Callable[[Any], bool]) -> dict[Key, Any]:
        """A live view of the objects of *kind* that *matches* accepts, by key, kept up to date on every write
        from now on (filled from the objects there now). Why: a reader that wants the few objects with some
        mark (pods naming a GPU group, pods holding a nomination) each cycle would otherwise walk every object
        of the kind each cycle; this costs one *matches* call per write instead. An object *matches* raises for is
        left out of the view: a write to the Store never fails for a reader's predicate. The dict is the Store's:
        read it, never write it."""
        found = {key: obj for key, obj in self._objects.get(kind, {}).items() if _matches(matches, obj)}
        self._indexes.setdefault(kind, []).append((matches, found))
        return found

    def subscribe(self, fn: Callable[[Change], None]) -> Callable[[], None]:
        """Call *fn* on every future change; returns the function that unsubscribes."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn)
