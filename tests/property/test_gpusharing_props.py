"""GPU sharing on random clusters over several cycles of the embedded cluster: no GPU is ever over-committed.

Random nodes (1-4 GPUs, random ``nvidia.com/gpu.memory``), two queues, pods already running there (whole-GPU
and shared ones on consistent GPU groups, tests.property.manifests), and a stream of pods:
fractions (0.1-0.9), gpu-memory requests, multi-device fractions and whole-GPU pods, arriving
between cycles while random running pods are deleted (evicted by their users). After every
cycle the invariant is checked on what the cluster holds, read from the pods themselves (their
annotations and ``runai-gpu-group`` labels), not from the engine's own accounting:

* on every GPU group the portions add up to at most one GPU's memory (fractions x memory,
  gpu-memory in MiB), and
* whole-GPU pods plus GPU groups never use more GPUs than the node has.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api import constants as C
from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session
from kai.sim.cluster import EmbeddedCluster
from tests.property.manifests import (
    NOW,
    PRIORITIES,
    GpuBook,
    check_gpus,
    gpu_pod,
    gpu_requests,
    node_doc,
    queue_doc,
)


def owners() -> st.SearchStrategy[dict[str, str]]:
    """The labels that put a pod in a queue with a priority (the embedded pod-grouper makes its PodGroup)."""
    return st.fixed_dictionaries(
        {C.LABEL_QUEUE: st.sampled_from(["team-a", "team-b"]), "priorityClassName": st.sampled_from(PRIORITIES)}
    )


@st.composite
def pods(draw: st.DrawFn, name: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["fraction", "fraction", "memory", "multi", "whole"]))
    annotations: dict[str, str] = {}
    requests: dict[str, Any] = {"cpu": "1"}
    if kind == "fraction":
        annotations[C.ANNOTATION_GPU_FRACTION] = f"0.{draw(st.integers(1, 9))}"
    elif kind == "memory":
        annotations[C.ANNOTATION_GPU_MEMORY] = str(draw(st.sampled_from([10, 30, 50, 80, 20000, 40000])))
    elif kind == "multi":
        annotations[C.ANNOTATION_GPU_FRACTION] = f"0.{draw(st.integers(1, 9))}"
        annotations[C.ANNOTATION_GPU_FRACTION_NUM_DEVICES] = str(draw(st.integers(2, 3)))
    else:
        requests["nvidia.com/gpu"] = 1
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": draw(owners()),
            "annotations": annotations,
        },
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": {"requests": requests}}]},
    }


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]], list[list[int]]]:
    """(initial manifests, pods arriving before each later cycle, which running pods to delete then). The initial
    manifests may hold running pods already, whole-GPU and shared ones on consistent GPU groups."""
    shape = [
        (f"node{i}", draw(st.integers(1, 4)), draw(st.sampled_from([None, 100, 40000, 81920])))
        for i in range(draw(st.integers(1, 3)))
    ]
    docs: list[dict[str, Any]] = [node_doc(name, gpus, memory) for name, gpus, memory in shape]
    docs.append(queue_doc("dept", None, -1, 1))
    docs.append(queue_doc("team-a", "dept", draw(st.integers(0, 3)), draw(st.integers(0, 2))))
    docs.append(queue_doc("team-b", "dept", draw(st.integers(0, 3)), draw(st.integers(0, 2))))
    book = GpuBook.of(shape)
    max_memory = max((m or C.DEFAULT_GPU_MEMORY_MIB) for _, _, m in shape)
    for k in range(draw(st.integers(0, 4))):
        req = draw(gpu_requests(max_memory, max_whole=1))
        spot = book.place(draw, req)
        if spot is not None:
            node, groups = spot
            docs.append(gpu_pod(f"run-{k}", req, labels=draw(owners()), cpu="1", node=node, groups=groups))
    n = draw(st.integers(1, 8))
    docs += [draw(pods(f"p0-{k}")) for k in range(n)]
    arrivals = []
    deletions = []
    for c in range(1, draw(st.integers(2, 5))):
        arrivals.append([draw(pods(f"p{c}-{k}")) for k in range(draw(st.integers(0, 4)))])
        deletions.append(draw(st.lists(st.integers(0, 50), max_size=2)))
    return docs, arrivals, deletions


def _load(docs: list[dict[str, Any]]) -> list:
    objects, _ = load_manifests([("cluster.yaml", yaml.safe_dump_all(docs, sort_keys=False))])
    return objects


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_no_gpu_is_over_committed(scenario: tuple) -> None:
    docs, arrivals, deletions = scenario
    now = parse_time(NOW, "now")
    assert now is not None
    cluster = EmbeddedCluster(now=now)
    cluster.apply(_load(docs))
    check_gpus(cluster)  # the drawn cluster itself is consistent
    conf = SchedulerConf()
    cluster.run_cycle(conf)
    check_gpus(cluster)
    for new, gone in zip(arrivals, deletions):
        running = sorted(
            (p for p in cluster.store.list("Pod") if p.node_name and p.phase == "Running"), key=lambda p: p.meta.name
        )
        for i in gone:
            if running:
                pod = running[i % len(running)]
                pod.meta.deletion_timestamp = cluster.now
                cluster.store.put(pod)
        if new:
            cluster.apply(_load(new))
        cluster.run_cycle(conf)
        check_gpus(cluster)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), data=st.data())
def test_rollback_restores_every_gpu_slot(scenario: tuple, data: st.DataObject) -> None:
    """Random evictions and placements of shared and whole-GPU pods inside one Statement, then a rollback: the
    node rows, every GPU slot, each pod's GPU groups and statuses are exactly as before."""
    import numpy as np

    from kai.scheduler.model import ACTIVE_ALLOCATED, TaskStatus

    docs, arrivals, _ = scenario
    now = parse_time(NOW, "now")
    assert now is not None
    cluster = EmbeddedCluster(now=now)
    cluster.apply(_load(docs))
    cluster.run_cycle(SchedulerConf())  # some pods bound, some shared GPUs in use
    if arrivals and arrivals[0]:
        cluster.apply(_load(arrivals[0]))
    snap = cluster.snapshot()
    ssn = open_session(snap, SchedulerConf())

    def state() -> list:
        return [ssn.idle.copy(), ssn.releasing.copy(), *ssn.gpu_arrays(), list(ssn.gpus), list(ssn.status)]

    before = state()
    stmt = ssn.statement()
    for _ in range(data.draw(st.integers(1, 8))):
        t = snap.tasks[data.draw(st.integers(0, len(snap.tasks) - 1))] if snap.tasks else None
        if t is None:
            break
        if ssn.status[t.index] in ACTIVE_ALLOCATED and t.status == ssn.status[t.index]:
            stmt.evict(t)
        elif ssn.status[t.index] == TaskStatus.PENDING and t.index not in ssn.invalid:
            choice = ssn.placer.best_node(t)
            if choice is not None:
                (stmt.allocate if choice.now else stmt.pipeline)(t, choice.node, choice.gpus)
    stmt.rollback()
    after = state()
    for a, b in zip(after, before):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
