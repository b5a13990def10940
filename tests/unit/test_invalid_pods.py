"""Pods kai will not place, on the engine's path as the Kubernetes backend takes it (Store objects straight into
``build_snapshot``; ``kai sim`` refuses the same input up front, see test_bad_input.py).

A pod the API server accepted but kai cannot use (invalid GPU-sharing annotations; a request above what kai
accounts for, ``cpu: 1e16``) costs only itself: it stays Pending with a Warning event naming the field, its
PodGroup says why, a gang missing such a pod waits whole, and every other pod is scheduled. A *bound* pod is
taken as bound: its annotations no longer matter, and a saturated request fills its node.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kai.api import constants as C
from kai.api.manifests import load_manifests
from kai.api.objects import Node, Pod, PodGroup, Queue
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import UNSCHEDULABLE_CONDITION, run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.snapshot import build_snapshot
from kai.sim.cluster import default_priority_classes
from tests.unit.test_statement import NOW, node, pod, podgroup, queue

DATA = Path(__file__).parents[1] / "data" / "invalid_gpu_sharing" / "cluster.yaml"


def engine_cycle(text: str, actions: tuple[str, ...] = ("allocate",)) -> CycleResult:
    objects = [obj for _, obj in load_manifests([("cluster.yaml", text)])[0]]
    for obj in objects:  # the pods that name a PodGroup are kai's (kai sim assumes so; on a cluster, schedulerName)
        if isinstance(obj, Pod) and C.ANNOTATION_POD_GROUP_NAME in obj.meta.annotations:
            obj.scheduler_name = C.SCHEDULER_NAME
    return run_cycle(
        build_snapshot(
            nodes=[o for o in objects if isinstance(o, Node)],
            pods=[o for o in objects if isinstance(o, Pod)],
            podgroups=[o for o in objects if isinstance(o, PodGroup)],
            queues=[o for o in objects if isinstance(o, Queue)],
            priority_classes=default_priority_classes(),
            now=NOW,
        ),
        SchedulerConf(actions=actions),
    )


def test_invalid_gpu_sharing_annotations_cost_only_their_pods() -> None:
    result = engine_cycle(DATA.read_text())
    assert {b.pod.name for b in result.binds} == {"good-0"}
    warnings = {e.object: e.message for e in result.events if e.reason == "InvalidGpuRequest"}
    assert set(warnings) == {
        f"Pod/default/{name}-0"
        for name in (
            "fraction-too-big",
            "fraction-not-a-number",
            "fraction-and-memory",
            "memory-above-device",
            "devices-without-fraction",
            "whole-and-fraction",
        )
    } | {"Pod/default/gang-with-bad-pod-1"}
    for text in (
        "metadata.annotations.gpu-fraction: '1.5' must be a number between 0 and 1",
        "metadata.annotations.gpu-fraction: 'half' must be a number between 0 and 1",
        "metadata.annotations.gpu-memory: cannot request both GPU and GPU memory",
        "metadata.annotations.gpu-memory: 50000 MiB is more than the memory of any node's GPUs (the largest has 40000",
        "metadata.annotations.gpu-fraction-num-devices: '2' needs a gpu-fraction or gpu-memory annotation",
        "metadata.annotations.gpu-fraction: cannot have both GPU fraction request and whole GPU resource request",
        "metadata.annotations.gpu-fraction: '0' must be a number between 0 and 1",
    ):
        assert any(text in m for m in warnings.values()), text
    conditions = {s.name: s.conditions for s in result.podgroups}
    (too_big,) = conditions["fraction-too-big"]
    assert (too_big.type, too_big.reason) == (UNSCHEDULABLE_CONDITION, "Unschedulable")
    (gang,) = conditions["gang-with-bad-pod"]
    assert "Pod default/gang-with-bad-pod-1 has an invalid GPU request" in gang.message
    assert conditions["good"] == ()


def docs_text(docs: list[dict]) -> str:
    return yaml.safe_dump_all(docs)


def test_a_pending_pod_asking_for_more_than_kai_accounts_for_waits_with_the_field_named() -> None:
    huge = pod("huge-0", "huge", cpu="1e16")
    docs = [node("node0"), queue("dept"), queue("team", "dept"), podgroup("huge", "team"), huge]
    docs += [podgroup("ok", "team"), pod("ok-0", "ok")]
    result = engine_cycle(docs_text(docs))
    assert {b.pod.name for b in result.binds} == {"ok-0"}
    (event,) = [e for e in result.events if e.reason == "InvalidRequest"]
    assert event.object == "Pod/default/huge-0"
    assert event.message.startswith("spec.containers[0].resources.requests.cpu: '1e16' is more than kai can account")
    (status,) = [s for s in result.podgroups if s.name == "huge"]
    assert "Pod default/huge-0 has an invalid request: spec.containers[0].resources.requests.cpu" in (
        status.conditions[0].message
    )


def test_a_bound_pod_asking_for_everything_fills_its_node_and_nothing_else_breaks() -> None:
    """Another scheduler's pod bound to node0 with cpu 1e16 (the API server accepts it): node0 is full, the
    kai pod goes to node1, and the cycle runs (it used to raise OverflowError every cycle)."""
    hog = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog", "namespace": "other"},
        "spec": {"nodeName": "node0", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1e16"}}}]},
        "status": {"phase": "Running"},
    }
    docs = [node("node0"), node("node1"), queue("dept"), queue("team", "dept"), hog]
    docs += [podgroup("ok", "team"), pod("ok-0", "ok")]
    result = engine_cycle(docs_text(docs))
    assert [(b.pod.name, b.node) for b in result.binds] == [("ok-0", "node1")]
    assert not [e for e in result.events if e.reason == "InvalidRequest"]  # not kai's pod to place


def test_a_running_pod_whose_annotations_changed_is_taken_as_bound() -> None:
    """A running whole-GPU pod that later got a gpu-memory annotation (its owner's template changed) still holds
    its whole GPU; reclaim and preempt walk over it without error (issue 14, defect 3)."""
    running = pod("old-0", "old", gpu=1, node_name="node0")
    running["metadata"]["annotations"]["gpu-memory"] = "2000"
    docs = [node("node0", gpu=1), queue("dept"), queue("team", "dept"), podgroup("old", "team"), running]
    docs += [podgroup("new", "team", priority_class="inference"), pod("new-0", "new", gpu=1)]
    result = engine_cycle(docs_text(docs), actions=("allocate", "consolidation", "reclaim", "preempt"))
    assert result.job_errors == [] and result.action_errors == []
    assert [e.pod.name for e in result.evictions] == ["old-0"]
    assert [(p.pod.name, p.node) for p in result.pipelines] == [("new-0", "node0")]
    assert not [e for e in result.events if e.reason == "InvalidGpuRequest"]
