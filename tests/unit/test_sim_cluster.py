"""The embedded cluster (``kai.sim.cluster``) never changes a stored object in place.

A Snapshot keeps the Pod and PodGroup objects it was built from, and ``EmbeddedCluster.last_snapshot`` is
read after the cluster has moved on (``kai sim``'s pod views, StuckInReleasing). Each change the cluster
makes (the pod-grouper's annotation, a bind, a GPU-group label, Running, an eviction, a drain, a stale
timestamp, a cordon) therefore stores a changed copy; the objects a snapshot holds stay as its cycle saw
them. The tests take a deep copy of what the snapshot holds, let the cluster move on, and compare.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from kai.api import constants as C
from kai.api.manifests import load_manifests
from kai.scheduler.conf import SchedulerConf
from kai.sim.cluster import EmbeddedCluster
from tests.unit.builders import NOW, node, pod, podgroup, queue


def cluster(docs: list[dict[str, Any]]) -> EmbeddedCluster:
    objects, _ = load_manifests([("test.yaml", yaml.safe_dump_all(docs))])
    c = EmbeddedCluster(now=NOW)
    c.apply(objects)
    return c


def bare_pod(name: str, queue_name: str) -> dict[str, Any]:
    """A pod without a PodGroup: kai's pod-grouper makes one and annotates the pod."""
    doc = pod(name, "-", gpu=1)
    del doc["metadata"]["annotations"][C.ANNOTATION_POD_GROUP_NAME]
    doc["metadata"]["labels"] = {C.LABEL_QUEUE: queue_name}
    return doc


def held(c: EmbeddedCluster) -> list[Any]:
    snap = c.last_snapshot
    assert snap is not None
    return copy.deepcopy([t.pod for t in snap.tasks] + [j.podgroup for j in snap.jobs])


def test_the_last_snapshot_keeps_what_its_cycle_saw() -> None:
    docs = [node("n0", gpu=4), node("n1", gpu=4), queue("dept"), queue("team", "dept")]
    docs += [podgroup("gang", "team", min_member=2), pod("gang-0", "gang"), pod("gang-1", "gang")]
    docs += [pod("half", "half", gpu=0, fraction="0.5"), podgroup("half", "team"), bare_pod("bare", "team")]
    c = cluster(docs)
    conf = SchedulerConf()
    c.schedule(conf)
    before = held(c)
    snap = c.last_snapshot
    assert {t.name for t in snap.tasks} == {"gang-0", "gang-1", "half", "bare"}
    assert all(t.pod.node_name == "" for t in snap.tasks)  # all pending when the cycle looked

    c.advance(c.now + 1)  # bound -> Running
    c.cordon("n1")
    c.drain("n0")  # deletion timestamps (binpack put every pod on n0)
    assert held(c) == before
    pods = {p.meta.name: p for p in c.store.list("Pod")}
    assert all(p.node_name for p in pods.values())  # the store moved on: the test could have failed
    assert any(p.phase == "Running" for p in pods.values())
    assert any(p.meta.deletion_timestamp is not None for p in pods.values())
    assert any(C.LABEL_GPU_GROUP in p.meta.labels for p in pods.values())  # the binder's group label
    assert snap.tasks[0].pod is not pods[snap.tasks[0].name]

    c.schedule(conf)  # the next cycle sees the changes
    now = {t.name: t.pod for t in c.last_snapshot.tasks}
    assert now["gang-0"].node_name and now["bare"].meta.annotations[C.ANNOTATION_POD_GROUP_NAME]


def test_the_pod_grouper_annotates_a_copy() -> None:
    c = cluster([node("n0"), queue("dept"), queue("team", "dept")])
    c.schedule(SchedulerConf())
    empty = c.last_snapshot
    objects, _ = load_manifests([("more.yaml", yaml.safe_dump_all([bare_pod("late", "team")]))])
    c.run_cycle(SchedulerConf(), objects)
    (task,) = c.last_snapshot.tasks
    assert C.ANNOTATION_POD_GROUP_NAME in task.pod.meta.annotations
    assert empty.tasks == ()
