"""The pod-grouper's decisions laid over a snapshot (kai.k8s._decided): what is laid, what is not, when an
entry leaves; and that a snapshot built from the laid-over objects schedules the pod in its decided group."""

from __future__ import annotations

import dataclasses

from kai.api import constants as C
from kai.api.objects import Pod, PodGroup, parse_pod
from kai.k8s._decided import Decided
from kai.podgrouper import group_pod
from kai.scheduler.snapshot import build_snapshot
from kai.store import Key, Store, key_of


def bare(name: str, uid: str = "", **annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "labels": {C.LABEL_QUEUE: "default-queue"},
            "annotations": dict(annotations),
        },
        "spec": {
            "schedulerName": C.SCHEDULER_NAME,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }


def _lay_over(d: Decided, pods: list[Pod]) -> tuple[list[Pod], list[PodGroup], set[Key]]:
    """``Decided.lay_over`` on the pods and no PodGroups, as the cycle calls it: copies by key, changed in place."""
    by_key, pgs = {key_of(p): p for p in pods}, {}
    laid = d.lay_over(by_key, pgs)
    return list(by_key.values()), list(pgs.values()), laid


def test_a_decided_pod_is_laid_over_with_its_podgroup() -> None:
    pod = parse_pod(bare("a"))
    grouping = group_pod(pod)
    assert grouping is not None
    d = Decided()
    d.add(pod, grouping.podgroup)
    pods, pgs, laid = _lay_over(d, [pod])
    assert laid == {("ns", "a")}
    assert pods[0].meta.annotations[C.ANNOTATION_POD_GROUP_NAME] == "pg-a-uid-a"
    assert C.ANNOTATION_POD_GROUP_NAME not in pod.meta.annotations  # a copy: the Store's pod is untouched
    assert [pg.meta.name for pg in pgs] == ["pg-a-uid-a"]
    assert d.annotation(("ns", "a"), "uid-a") == "pg-a-uid-a"
    assert d.annotation(("ns", "a"), "another-uid") is None  # a pod recreated under the name: not this one


def test_the_snapshot_takes_the_pod_as_a_member_of_its_decided_group() -> None:
    pod = parse_pod(bare("a"))
    grouping = group_pod(pod)
    assert grouping is not None
    d = Decided()
    d.add(pod, grouping.podgroup)
    pods, pgs, _ = _lay_over(d, [pod])
    snap = build_snapshot(nodes=[], pods=pods, podgroups=pgs, queues=[], priority_classes=[], now=0.0)
    assert len(snap.tasks) == 1 and snap.jobs[snap.tasks[0].job].podgroup.meta.name == "pg-a-uid-a"
    empty = build_snapshot(nodes=[], pods=[pod], podgroups=[], queues=[], priority_classes=[], now=0.0)
    assert not empty.tasks  # without the decision the pod waits for its PodGroup


def test_entries_leave_once_the_store_shows_them() -> None:
    store = Store()
    pod = parse_pod(bare("a"))
    grouping = group_pod(pod)
    assert grouping is not None
    pg = grouping.podgroup
    store.put(pod)
    d = Decided()
    d.add(pod, pg)
    d.expire(store)
    assert d.pods and d.podgroups  # nothing shown yet
    annotated = dataclasses.replace(
        pod, meta=dataclasses.replace(pod.meta, annotations={C.ANNOTATION_POD_GROUP_NAME: pg.meta.name})
    )
    store.put(annotated)  # the bind (or patch) landed
    d.expire(store)
    assert not d.pods and d.podgroups  # the PodGroup is still only decided: the snapshot keeps taking it
    _, pgs, laid = _lay_over(d, [annotated])
    assert not laid and [p.meta.name for p in pgs] == [pg.meta.name]
    store.put(pg)
    d.expire(store)
    assert not d.podgroups


def test_a_pod_that_names_a_podgroup_or_was_recreated_is_not_laid_over() -> None:
    pod = parse_pod(bare("a"))
    grouping = group_pod(pod)
    assert grouping is not None
    d = Decided()
    d.add(pod, grouping.podgroup)
    named = parse_pod(bare("a", **{C.ANNOTATION_POD_GROUP_NAME: "users-own"}))
    recreated = parse_pod(bare("a", uid="new"))
    for other in (named, recreated):
        pods, _, laid = _lay_over(d, [other])
        assert not laid and pods[0].meta.annotations == other.meta.annotations


def test_a_podgroup_that_came_and_went_between_two_cycles_leaves_on_its_deleted_event() -> None:
    """A pod deleted seconds after its PodGroup was made, and the PodGroup collected, all between two
    cycles: the Store never showed the PodGroup, so ``expire`` alone kept its entry, laid over every
    snapshot for ever (found by benchmarks/soak.py). Its DELETED event lets it go."""
    store = Store()
    pod = parse_pod(bare("a"))
    grouping = group_pod(pod)
    assert grouping is not None
    pg = grouping.podgroup
    key = ("ns", pg.meta.name)
    d = Decided()
    d.add(pod, pg)
    d.expire(store)  # the pod is gone (never in this Store), the PodGroup never shown
    assert not d.pods and key in d.podgroups  # what expire alone leaves behind
    assert d.podgroup_deleted(key)
    assert not d.podgroups
    _, pgs, _ = _lay_over(d, [])
    assert pgs == []
    assert not d.podgroup_deleted(key)  # once only


def test_a_deleted_podgroup_a_decided_pod_still_names_is_kept() -> None:
    store = Store()
    pod = parse_pod(bare("a"))
    grouping = group_pod(pod)
    assert grouping is not None
    store.put(pod)
    d = Decided()
    d.add(pod, grouping.podgroup)
    d.expire(store)
    key = ("ns", grouping.podgroup.meta.name)
    assert not d.podgroup_deleted(key)  # the pod waits on it: the next cycle still needs it laid over
    assert key in d.podgroups
