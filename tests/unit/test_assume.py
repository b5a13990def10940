"""What kai did that the watch has not shown yet (kai.k8s._assume): when an assumed bind goes, and when a
bind in doubt breaks its gang."""

from __future__ import annotations

from kai.api import constants as C
from kai.api.objects import parse_pod, parse_podgroup
from kai.k8s._assume import DOUBT_S, Assumed, AssumedBind, AssumedEviction, gone_since
from kai.scheduler.decisions import PodGroupStatus
from kai.store import Store


def pod(name: str, node: str = "", group: str = "gang", **meta: object) -> object:
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "labels": {C.LABEL_QUEUE: "default-queue"},
                "annotations": {C.ANNOTATION_POD_GROUP_NAME: group},
                **meta,
            },
            "spec": {
                "schedulerName": C.SCHEDULER_NAME,
                "nodeName": node or None,
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
        }
    )


def gang(name: str = "gang", min_member: int = 2, **annotations: str) -> object:
    return parse_podgroup(
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations},
            "spec": {"queue": "default-queue", "minMember": min_member},
        }
    )


def heard(until: float):
    """The pod watch was last heard from at monotonic time *until*."""
    return lambda t: t <= until


def test_a_refuted_bind_in_doubt_breaks_its_gang() -> None:
    store = Store()
    store.put(gang())
    store.put(pod("a", node="n1"))  # its gang-mate's bind went through
    store.put(pod("b"))
    assumed = Assumed()
    assumed.binds[("ns", "b")] = AssumedBind("uid-b", "n1", 100.0, (), doubt=True, podgroup="gang")
    assumed.expire(store, 101.0, heard(101.0))  # the watch is not past the attempt yet: still counted
    assert ("ns", "b") in assumed.binds and not assumed.broken
    assumed.expire(store, 100.0 + DOUBT_S + 1, heard(100.0 + DOUBT_S + 1))
    assert ("ns", "b") not in assumed.binds  # it did not happen: the pod is planned again
    assert ("ns", "gang") in assumed.broken  # and its gang is bound in part


def test_a_confirmed_bind_in_doubt_leaves_its_gang_whole() -> None:
    store = Store()
    store.put(gang())
    store.put(pod("b", node="n1"))  # the watch shows it bound: the lost answer was a success
    assumed = Assumed()
    assumed.binds[("ns", "b")] = AssumedBind("uid-b", "n1", 100.0, (), doubt=True, podgroup="gang")
    assumed.expire(store, 100.0 + DOUBT_S + 1, heard(100.0 + DOUBT_S + 1))
    assert not assumed.binds and not assumed.broken


def test_a_broken_mark_goes_with_its_podgroup() -> None:
    store = Store()
    store.put(gang())
    assumed = Assumed(broken={("ns", "gang"): 1.0})
    assumed.expire(store, 2.0, heard(2.0))
    assert assumed.broken
    store.delete("PodGroup", ("ns", "gang"))
    assumed.expire(store, 3.0, heard(3.0))
    assert not assumed.broken


def test_a_new_leader_adopts_the_gangs_its_predecessor_left_bound_in_part_as_broken() -> None:
    store = Store()
    store.put(gang("part", 3))  # two of three bound, no stale stamp: left mid-bind
    store.put(pod("part-0", node="n1", group="part"))
    store.put(pod("part-1", node="n1", group="part"))
    store.put(pod("part-2", group="part"))
    store.put(gang("whole", 2))
    store.put(pod("whole-0", node="n1", group="whole"))
    store.put(pod("whole-1", node="n2", group="whole"))
    store.put(gang("pending", 2))
    store.put(pod("pending-0", group="pending"))
    stamped = {C.ANNOTATION_STALE_TIMESTAMP: "2026-11-26T00:00:00Z"}
    store.put(gang("stale", 2, **stamped))  # already stale under the predecessor: its grace runs on
    store.put(pod("stale-0", node="n1", group="stale"))
    store.put(gang("going", 2))  # one bound, one terminating: the terminating one no longer counts
    store.put(pod("going-0", node="n1", group="going"))
    store.put(pod("going-1", node="n1", group="going", deletionTimestamp="2026-11-26T00:00:00Z"))
    assumed = Assumed()
    assert sorted(assumed.adopt(store, 5.0)) == [("ns", "going"), ("ns", "part")]
    assert assumed.broken == {("ns", "going"): 5.0, ("ns", "part"): 5.0}


def test_a_gang_evicted_in_part_stays_broken_until_its_evicted_pods_are_gone() -> None:
    """The cycle after a gang's evictions partly failed sees the evicted pod releasing, which counts
    towards minMember: the gang is not stale yet. The mark must outlive that cycle, or the rest of the
    gang waits out the whole staleness grace once the evicted pod is gone. That holds when the evicted
    pod is gone by the time the cycle's decisions are applied: the cycle saw it going (the twenty-second
    session's chaos run, where the mark was dropped so and the bound part held its GPU for 60 s)."""
    store = Store()
    store.put(gang())
    store.put(pod("a", node="n1"))
    store.put(pod("b", node="n1"))  # its eviction went through; the watch has not shown it yet
    assumed = Assumed(broken={("ns", "gang"): 1.0}, evictions={("ns", "b"): AssumedEviction("uid-b", 1.0)})
    not_stale = [PodGroupStatus("ns", "gang", (), stale_since=None)]

    def snapshot() -> dict:
        pods = store.by_key("Pod")
        assumed.lay_over(pods, 2.0, 2.0)
        return pods

    assumed.settle(not_stale, store, snapshot())
    assert ("ns", "gang") in assumed.broken
    store.put(pod("b", node="n1", deletionTimestamp="2026-11-26T00:00:01Z"))  # the watch shows it going
    assumed.expire(store, 2.0, heard(2.0))
    assumed.settle(not_stale, store, snapshot())
    assert ("ns", "gang") in assumed.broken
    seen = snapshot()  # a cycle decides on b terminating ...
    store.delete("Pod", ("ns", "b"))  # ... and b is gone before its decisions are applied
    assumed.settle(not_stale, store, seen)
    assert ("ns", "gang") in assumed.broken  # the next cycle finds a alone, and evicts it at once
    assumed.settle([PodGroupStatus("ns", "gang", (), stale_since=0.0)], store, snapshot())
    assert ("ns", "gang") in assumed.broken
    assumed.settle(not_stale, store, snapshot())  # a cycle that saw b gone and still found the gang whole
    assert not assumed.broken


def test_the_assumptions_are_laid_over_the_stores_pods_in_their_places() -> None:
    """``Assumed.lay_over`` changes only the pods it has entries for, each in its place in the Store's order:
    a bind gives its node, an eviction a deletionTimestamp, a held-back pod leaves, and a pod made again under
    the same name (another uid) is not touched. The Store keeps its own objects."""
    store = Store()
    for name in ("a", "b", "c", "d", "e"):
        store.put(pod(name))
    store.put(pod("e", uid="uid-e-again"))  # made again since the bind was sent
    assumed = Assumed()
    assumed.binds[("ns", "b")] = AssumedBind("uid-b", "n1", 10.0, ())
    assumed.binds[("ns", "e")] = AssumedBind("uid-e", "n1", 10.0, ())
    assumed.evictions[("ns", "c")] = AssumedEviction("uid-c", 10.0)
    assumed.hold_back(("ns", "d"), "uid-d", 10.0)
    by_key = store.by_key("Pod")
    assumed.lay_over(by_key, now=50.0, mono=10.5)
    assert list(by_key) == [("ns", "a"), ("ns", "b"), ("ns", "c"), ("ns", "e")]
    assert by_key[("ns", "a")] is store.get("Pod", ("ns", "a"))
    assert by_key[("ns", "b")].node_name == "n1" and not store.get("Pod", ("ns", "b")).node_name
    assert by_key[("ns", "c")].meta.deletion_timestamp == 50.0
    assert by_key[("ns", "e")] is store.get("Pod", ("ns", "e"))
    later = store.by_key("Pod")
    assumed.lay_over(later, now=50.0, mono=10.0 + 60.0)  # the backoff is over: the pod comes back
    assert ("ns", "d") in later


def test_a_decision_is_not_sent_for_a_pod_gone_or_made_again_since_the_snapshot() -> None:
    then = {("ns", "a"): pod("a"), ("ns", "b"): pod("b")}
    assert not gone_since(("ns", "a"), pod("a"), then)
    assert gone_since(("ns", "a"), None, then)
    assert gone_since(("ns", "b"), pod("b", uid="another"), then)
    assert not gone_since(("ns", "c"), pod("c"), then)  # not in the snapshot: the Store's pod stands
