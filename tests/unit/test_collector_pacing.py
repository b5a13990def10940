"""kai.k8s._collector: what a cycle leaves is frozen, and reference cycles that became garbage meanwhile are freed
by the full collection of the next period. Real ``gc`` state of this process, restored after each test."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kai.k8s._collector import CollectorPacing


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def own_collector() -> Iterator[None]:
    gc.collect()
    yield
    gc.unfreeze()
    gc.collect()


def garbage_cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_cycle_leaves_its_objects_frozen_and_the_period_frees_cyclic_garbage() -> None:
    clock = [0.0]
    pacing = CollectorPacing(full_every_s=600.0, clock=lambda: clock[0])
    kept = Node()
    dead = garbage_cycle()
    pacing.after_cycle()
    assert gc.get_freeze_count() > 0
    gc.collect()  # the collector does not walk frozen objects: the cycle is not found
    assert dead() is not None and pacing.full_collections == 0
    clock[0] = 599.0
    pacing.after_cycle()
    assert dead() is not None
    clock[0] = 600.0
    pacing.after_cycle()  # the period is over: unfrozen, collected in full, frozen again
    assert dead() is None and pacing.full_collections == 1
    assert gc.get_freeze_count() > 0 and kept.other is None


def test_frozen_objects_are_still_freed_by_reference_counting() -> None:
    """A deleted pod goes at once: freezing only hides objects from the cyclic collector."""
    pacing = CollectorPacing(clock=lambda: 0.0)
    obj = Node()
    ref = weakref.ref(obj)
    pacing.after_cycle()
    del obj
    assert ref() is None
