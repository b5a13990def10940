"""How the embedded cluster changes a stored object: never in place.

A Snapshot keeps the Pod and PodGroup objects it was built from, and ``EmbeddedCluster.last_snapshot`` is
read after the cluster has moved on (``kai sim``'s pod views, StuckInReleasing). So a change (a bind, an
annotation, a phase) stores a changed copy, and what a snapshot holds stays as its cycle saw it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from kai.store import Store

T = TypeVar("T")


def updated(store: Store, obj: T, **changes: Any) -> T:
    """Store a copy of *obj* with *changes*; returns the copy."""
    new = dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    store.put(new)
    return new


def updated_meta(store: Store, obj: T, **changes: Any) -> T:
    """Store a copy of *obj* whose metadata has *changes* (new dicts for labels or annotations)."""
    return updated(store, obj, meta=dataclasses.replace(obj.meta, **changes))  # type: ignore[attr-defined]
