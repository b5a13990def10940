"""Unit tests for kai.store: the versioned object store, its change feed and subscribers."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from kai.api.objects import Node, ObjectMeta, Pod, Queue
from kai.store import Change, Store, key_of


def node(name: str) -> Node:
    return Node(ObjectMeta(name, None, f"Node/{name}"), allocatable={"cpu": 1000})


def pod(name: str, namespace: str = "default") -> Pod:
    return Pod(ObjectMeta(name, namespace, f"Pod/{namespace}/{name}"), requests={"pods": 1})


def queue(name: str) -> Queue:
    return Queue(ObjectMeta(name, None, f"Queue/{name}"))


def test_key_of() -> None:
    assert key_of(node("n")) == ("", "n")
    assert key_of(pod("p", "ns")) == ("ns", "p")


def test_empty_store() -> None:
    s = Store()
    assert s.resource_version == 0
    assert s.list("Node") == []
    assert s.get("Node", ("", "n")) is None
    assert s.count("Node") == 0
    assert list(s) == []
    assert s.changes_since(0) == []


def test_put_get_list() -> None:
    s = Store()
    n0, n1, p = node("n0"), node("n1"), pod("p", "ns")
    for obj in (n0, n1, p):
        s.put(obj)
    assert s.get("Node", ("", "n0")) is n0
    assert s.get("Pod", ("ns", "p")) is p
    assert s.get("Pod", ("default", "p")) is None
    assert s.get("Pod", ("", "n0")) is None  # kinds are separate collections
    assert s.list("Node") == [n0, n1]
    assert s.list("Pod") == [p]
    assert s.count("Node") == 2
    assert set(map(id, s)) == {id(n0), id(n1), id(p)}


def test_list_keeps_first_insertion_order_on_replace() -> None:
    s = Store()
    a, b = node("a"), node("b")
    s.put(a)
    s.put(b)
    a2 = node("a")
    s.put(a2)
    assert s.list("Node") == [a2, b]


def test_put_returns_added_then_modified() -> None:
    s = Store()
    first = s.put(node("n"))
    second = s.put(node("n"))
    assert first.op == "ADDED"
    assert second.op == "MODIFIED"
    assert first.kind == second.kind == "Node"
    assert first.key == second.key == ("", "n")
    assert s.count("Node") == 1


def test_resource_versions_increase_and_objects_are_not_touched() -> None:
    s = Store()
    objs = [node("a"), pod("p"), node("a"), queue("q")]
    versions = []
    for obj in objs:
        before = copy.deepcopy(obj)
        change = s.put(obj)
        assert change.resource_version == s.resource_version
        assert obj == before  # a Snapshot may hold the object a put replaces
        versions.append(change.resource_version)
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
    assert versions[0] >= 1
    d = s.delete("Node", ("", "a"))
    assert d is not None
    assert d.resource_version == versions[-1] + 1 == s.resource_version


def test_delete() -> None:
    s = Store()
    n = node("n")
    s.put(n)
    change = s.delete("Node", ("", "n"))
    assert change is not None
    assert (change.op, change.kind, change.key, change.obj) == ("DELETED", "Node", ("", "n"), n)
    assert s.get("Node", ("", "n")) is None
    assert s.list("Node") == []
    assert s.count("Node") == 0


def test_delete_missing_is_none_and_records_nothing() -> None:
    s = Store()
    s.put(node("n"))
    rv = s.resource_version
    assert s.delete("Node", ("", "other")) is None
    assert s.delete("Pod", ("", "n")) is None
    assert s.resource_version == rv
    assert len(s.changes_since(0)) == 1


def test_put_after_delete_is_added_again() -> None:
    s = Store()
    s.put(node("n"))
    s.delete("Node", ("", "n"))
    assert s.put(node("n")).op == "ADDED"


def test_change_feed() -> None:
    s = Store()
    a, p = node("a"), pod("p")
    s.put(a)
    s.put(p)
    s.put(a)
    s.delete("Pod", ("default", "p"))
    feed = s.changes_since(0)
    assert [(c.op, c.kind, c.key) for c in feed] == [
        ("ADDED", "Node", ("", "a")),
        ("ADDED", "Pod", ("default", "p")),
        ("MODIFIED", "Node", ("", "a")),
        ("DELETED", "Pod", ("default", "p")),
    ]
    assert [c.resource_version for c in feed] == [1, 2, 3, 4]
    assert all(isinstance(c, Change) for c in feed)


def test_changes_since_a_version() -> None:
    s = Store()
    for i in range(5):
        s.put(node(f"n{i}"))
    assert [c.resource_version for c in s.changes_since(2)] == [3, 4, 5]
    assert s.changes_since(5) == []
    assert s.changes_since(99) == []
    assert [c.key for c in s.changes_since(4)] == [("", "n4")]


def test_changes_since_is_a_copy() -> None:
    s = Store()
    s.put(node("a"))
    feed = s.changes_since(0)
    feed.clear()
    assert len(s.changes_since(0)) == 1


def test_change_is_immutable() -> None:
    s = Store()
    change = s.put(node("a"))
    with pytest.raises(AttributeError):
        change.op = "DELETED"  # type: ignore[misc]


def test_trimmed_feed_raises_lookup_error() -> None:
    s = Store(feed_limit=2)
    for i in range(5):
        s.put(node(f"n{i}"))  # rv 1..5; the feed keeps 4 and 5
    assert [c.resource_version for c in s.changes_since(3)] == [4, 5]
    assert [c.resource_version for c in s.changes_since(4)] == [5]
    assert s.changes_since(5) == []
    for too_old in (0, 1, 2):
        with pytest.raises(LookupError):
            s.changes_since(too_old)


def test_feed_limit_counts_deletes() -> None:
    s = Store(feed_limit=2)
    s.put(node("a"))  # 1
    s.put(node("b"))  # 2
    s.delete("Node", ("", "a"))  # 3
    assert [c.op for c in s.changes_since(1)] == ["ADDED", "DELETED"]
    with pytest.raises(LookupError):
        s.changes_since(0)
    # the objects themselves are not trimmed
    assert [n.meta.name for n in s.list("Node")] == ["b"]


def test_subscribe_and_unsubscribe() -> None:
    s = Store()
    seen: list[Change] = []
    other: list[Change] = []
    unsubscribe = s.subscribe(seen.append)
    s.subscribe(other.append)
    s.put(node("a"))
    s.put(node("a"))
    s.delete("Node", ("", "a"))
    assert [c.op for c in seen] == ["ADDED", "MODIFIED", "DELETED"]
    assert seen == s.changes_since(0)
    unsubscribe()
    s.put(node("b"))
    assert len(seen) == 3
    assert len(other) == 4
    assert other[-1].key == ("", "b")


def test_subscriber_sees_the_change_after_it_is_recorded() -> None:
    s = Store()
    observed: list[tuple[int, int]] = []
    s.subscribe(lambda c: observed.append((c.resource_version, s.resource_version)))
    s.put(node("a"))
    s.put(node("b"))
    assert observed == [(1, 1), (2, 2)]


def test_unsubscribe_before_any_change() -> None:
    s = Store()
    seen: list[Change] = []
    unsubscribe = s.subscribe(seen.append)
    unsubscribe()
    s.put(node("a"))
    assert seen == []


def test_subscriber_not_called_for_missing_delete() -> None:
    s = Store()
    seen: list[Change] = []
    s.subscribe(seen.append)
    s.delete("Node", ("", "ghost"))
    assert seen == []


def test_an_index_follows_every_write_of_its_kind() -> None:
    """``Store.index`` is filled from the objects there and then kept by each write: an object that starts or
    stops matching comes in or leaves, a deleted one leaves, and other kinds are not asked."""
    s = Store()
    s.put(pod("a"))
    s.put(dataclasses.replace(pod("b"), nominated_node_name="n1"))
    asked: list[str] = []

    def nominated(p: Pod) -> bool:
        asked.append(p.meta.name)
        return bool(p.nominated_node_name)

    found = s.index("Pod", nominated)
    assert list(found) == [("default", "b")]
    s.put(dataclasses.replace(pod("a"), nominated_node_name="n2"))  # starts matching
    s.put(pod("b"))  # stops
    assert list(found) == [("default", "a")] and found[("default", "a")].nominated_node_name == "n2"
    s.put(node("n1"))
    assert "n1" not in asked
    s.delete("Pod", ("default", "a"))
    assert found == {}


def test_by_key_is_a_copy_in_insertion_order() -> None:
    s = Store()
    for name in ("c", "a", "b"):
        s.put(pod(name))
    copied = s.by_key("Pod")
    assert list(copied) == [("default", "c"), ("default", "a"), ("default", "b")]
    copied[("default", "a")] = pod("x")  # laid over in its place; the Store keeps its own
    del copied[("default", "c")]
    assert [p.meta.name for p in s.list("Pod")] == ["c", "a", "b"]
    assert s.by_key("Queue") == {}


def test_a_predicate_that_raises_costs_the_object_its_place_in_the_view_not_the_write() -> None:
    s = Store()

    def picky(p: Pod) -> bool:
        if p.meta.name == "bad":
            raise ValueError("a reader's bug")
        return True

    found = s.index("Pod", picky)
    s.put(pod("bad"))
    s.put(pod("good"))
    assert s.get("Pod", ("default", "bad")) is not None
    assert list(found) == [("default", "good")]


def test_a_removed_objects_slot_is_taken_by_the_last_one() -> None:
    """Slot order: insertion order until an object leaves; then the last object takes its slot, so one object
    moves, not every later one (a snapshot numbers tasks and jobs in this order). A replaced object keeps its
    slot; a new one takes the next; ``list``, ``by_key`` and iteration agree."""
    s = Store()
    for name in "abcde":
        s.put(pod(name))
    s.delete("Pod", ("default", "b"))
    assert [p.meta.name for p in s.list("Pod")] == ["a", "e", "c", "d"]
    s.put(dataclasses.replace(pod("c"), node_name="n"))  # changed in place: its slot stays
    s.delete("Pod", ("default", "d"))  # the last one: nothing moves
    s.put(pod("f"))
    s.delete("Pod", ("default", "zz"))  # not there: nothing happens
    names = [p.meta.name for p in s.list("Pod")]
    assert names == ["a", "e", "c", "f"]
    assert [k[1] for k in s.by_key("Pod")] == names and [p.meta.name for p in s] == names
    assert s.get("Pod", ("default", "c")).node_name == "n" and s.count("Pod") == 4
    for name in names:
        s.delete("Pod", ("default", name))
    assert s.list("Pod") == [] and s.by_key("Pod") == {}


def test_slot_order_is_a_function_of_the_writes_alone() -> None:
    """Two Stores given the same writes list the same order (a fresh snapshot and a kept one agree)."""
    writes = [("put", "a"), ("put", "b"), ("put", "c"), ("del", "a"), ("put", "d"), ("del", "c"), ("put", "a")]
    stores = [Store(), Store()]
    for s in stores:
        for op, name in writes:
            s.put(pod(name)) if op == "put" else s.delete("Pod", ("default", name))
    assert [p.meta.name for p in stores[0].list("Pod")] == [p.meta.name for p in stores[1].list("Pod")]
    assert [p.meta.name for p in stores[0].list("Pod")] == ["d", "b", "a"]
