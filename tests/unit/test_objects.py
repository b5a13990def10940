"""Unit tests for kai.api.objects: the part of each manifest the scheduler reads, and its validation.

Every rejected input must raise a ManifestError whose ``.field`` names the offending field, so that
the message a user sees (file: object: field: problem) points at the line to fix.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import (
    SelectorRequirement,
    Taint,
    Toleration,
    effective_requests,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_priority_class,
    parse_queue,
    parse_shard,
    parse_topology,
)

GI = 2**30


def _id(value: Any) -> str:
    """Readable test ids for parametrized manifests."""
    if isinstance(value, str):  # a field path: its end is what tells cases apart
        return value if len(value) <= 60 else "..." + value[-57:]
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def raises_on(field: str, fn: Any, doc: dict[str, Any]) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        fn(doc)
    assert info.value.field == field, f"field {info.value.field!r} != {field!r}: {info.value}"
    return info.value


# ---------------------------------------------------------------------------------------------
# Node
# ---------------------------------------------------------------------------------------------


def node_doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node0", "labels": {"zone": "a"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}},
    }
    doc.update(extra)
    return doc


def test_node_allocatable() -> None:
    n = parse_node(node_doc())
    assert n.meta.name == "node0"
    assert n.meta.namespace is None
    assert n.meta.labels == {"zone": "a"}
    assert n.allocatable == {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 4, "pods": 110}
    assert n.ready is True
    assert n.unschedulable is False
    assert n.taints == ()


def test_node_pods_allocatable_is_kept_when_given() -> None:
    n = parse_node(node_doc(status={"allocatable": {"cpu": "1", "pods": 5}}))
    assert n.allocatable["pods"] == 5


def test_node_capacity_fallback() -> None:
    n = parse_node(node_doc(status={"capacity": {"cpu": "4", "memory": "1G"}}))
    assert n.allocatable == {"cpu": 4000, "memory": 10**9, "pods": 110}


def test_node_allocatable_wins_over_capacity() -> None:
    n = parse_node(node_doc(status={"capacity": {"cpu": "16"}, "allocatable": {"cpu": "15"}}))
    assert n.allocatable["cpu"] == 15000


def test_node_extended_resources() -> None:
    n = parse_node(node_doc(status={"allocatable": {"cpu": "1", "example.com/foo": "3"}}))
    assert n.allocatable["example.com/foo"] == 3


def test_node_gpu_count_is_bounded() -> None:
    """The engine keeps per-GPU state as wide as the largest node: 2^40 GPUs on one node (a fuzzed document)
    would ask for TiBs, so a node may advertise at most MAX_NODE_GPUS (1024), in capacity too."""
    assert parse_node(node_doc(status={"allocatable": {"nvidia.com/gpu": "1024"}})).allocatable[C.RESOURCE_GPU] == 1024
    raises_on(
        "status.allocatable.nvidia.com/gpu", parse_node, node_doc(status={"allocatable": {"nvidia.com/gpu": "1025"}})
    )
    raises_on(
        "status.capacity.nvidia.com/gpu", parse_node, node_doc(status={"capacity": {"nvidia.com/gpu": "1099511627776"}})
    )


def test_node_bad_allocatable_names_field() -> None:
    raises_on("status.allocatable.memory", parse_node, node_doc(status={"allocatable": {"memory": "1Gb"}}))
    raises_on("status.capacity.cpu", parse_node, node_doc(status={"capacity": {"cpu": "abc"}}))
    raises_on("status.allocatable.cpu", parse_node, node_doc(status={"allocatable": {"cpu": "-1"}}))


def test_node_taints() -> None:
    n = parse_node(
        node_doc(
            spec={
                "taints": [
                    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                    {"key": "dedicated", "effect": "NoExecute"},
                    {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
                ]
            }
        )
    )
    assert n.taints == (
        Taint("gpu", "true", "NoSchedule"),
        Taint("dedicated", "", "NoExecute"),
        Taint("soft", "x", "PreferNoSchedule"),
    )


def test_node_bad_taint_effect() -> None:
    raises_on(
        "spec.taints[1].effect",
        parse_node,
        node_doc(spec={"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Nope"}]}),
    )
    raises_on("spec.taints[0].effect", parse_node, node_doc(spec={"taints": [{"key": "a"}]}))
    raises_on("spec.taints", parse_node, node_doc(spec={"taints": {"key": "a"}}))


@pytest.mark.parametrize(("status", "ready"), [("True", True), ("False", False), ("Unknown", False)])
def test_node_ready_condition(status: str, ready: bool) -> None:
    conditions = [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": status},
    ]
    n = parse_node(node_doc(status={"allocatable": {"cpu": "1"}, "conditions": conditions}))
    assert n.ready is ready


def test_node_without_ready_condition_is_ready() -> None:
    n = parse_node(node_doc(status={"allocatable": {"cpu": "1"}, "conditions": [{"type": "DiskPressure"}]}))
    assert n.ready is True


@pytest.mark.parametrize(("value", "expected"), [(True, True), (False, False), ("true", True), (None, False)])
def test_node_unschedulable(value: Any, expected: bool) -> None:
    n = parse_node(node_doc(spec={"unschedulable": value}))
    assert n.unschedulable is expected


def test_node_bad_unschedulable() -> None:
    raises_on("spec.unschedulable", parse_node, node_doc(spec={"unschedulable": "yes"}))


def test_node_requires_a_name() -> None:
    raises_on("metadata.name", parse_node, node_doc(metadata={"labels": {}}))
    raises_on("metadata", parse_node, node_doc(metadata=["node0"]))
    raises_on("metadata.labels.zone", parse_node, node_doc(metadata={"name": "n", "labels": {"zone": ["a"]}}))


# ---------------------------------------------------------------------------------------------
# Pod
# ---------------------------------------------------------------------------------------------


def container(
    name: str = "c", requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": name, "image": "busybox", "resources": res, **extra}


def pod_doc(spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", **meta},
        "spec": spec if spec is not None else {"containers": [container(requests={"cpu": "1"})]},
    }


def test_pod_defaults() -> None:
    p = parse_pod(pod_doc())
    assert p.meta.namespace == "default"
    assert p.meta.uid == "Pod/default/p"
    assert p.requests == {"cpu": 1000, "pods": 1}
    assert p.phase == "Pending"
    assert p.node_name == ""
    assert p.scheduler_name == "default-scheduler"
    assert p.container_names == ("c",)
    assert p.best_effort is False


def test_pod_requests_sum_of_containers() -> None:
    p = parse_pod(
        pod_doc(
            {
                "containers": [
                    container("a", {"cpu": "500m", "memory": "1Gi"}),
                    container("b", {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": 1}),
                    container("c", {"cpu": "250m", "nvidia.com/gpu": "2"}),
                ]
            }
        )
    )
    assert p.requests == {"cpu": 1000, "memory": GI + 512 * 2**20, "nvidia.com/gpu": 3, "pods": 1}
    assert p.container_names == ("a", "b", "c")


def test_pod_init_container_max() -> None:
    # app: 1 cpu, 1Gi; init containers run one at a time: the largest (per resource) counts if bigger.
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("app", {"cpu": "1", "memory": "1Gi"})],
                "initContainers": [
                    container("i1", {"cpu": "3", "memory": "100Mi"}),
                    container("i2", {"cpu": "2", "memory": "2Gi"}),
                ],
            }
        )
    )
    assert p.requests == {"cpu": 3000, "memory": 2 * GI, "pods": 1}


def test_pod_small_init_containers_do_not_count() -> None:
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("app", {"cpu": "2"}), container("app2", {"cpu": "2"})],
                "initContainers": [container("i", {"cpu": "3"})],
            }
        )
    )
    assert p.requests["cpu"] == 4000


def test_pod_sidecar_init_containers_add_up() -> None:
    # restartPolicy Always = sidecar: runs for the whole life of the pod, so adds to the app containers,
    # and to every init container started after it.
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("app", {"cpu": "1"})],
                "initContainers": [
                    container("side1", {"cpu": "500m"}, restartPolicy="Always"),
                    container("side2", {"cpu": "250m"}, restartPolicy="Always"),
                ],
            }
        )
    )
    assert p.requests["cpu"] == 1750


def test_pod_init_after_sidecar_counts_the_sidecar() -> None:
    # side (1) then init (2): peak during init = 1 + 2 = 3 > app + side = 1 + 1 = 2
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("app", {"cpu": "1"})],
                "initContainers": [
                    container("side", {"cpu": "1"}, restartPolicy="Always"),
                    container("init", {"cpu": "2"}),
                ],
            }
        )
    )
    assert p.requests["cpu"] == 3000


def test_pod_init_before_sidecar_does_not_count_the_sidecar() -> None:
    # init (2) runs before side (1) starts: peak 2 < app + side = 2.5
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("app", {"cpu": "1500m"})],
                "initContainers": [
                    container("init", {"cpu": "2"}),
                    container("side", {"cpu": "1"}, restartPolicy="Always"),
                ],
            }
        )
    )
    assert p.requests["cpu"] == 2500


def test_pod_overhead_is_added() -> None:
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("app", {"cpu": "1", "memory": "1Gi"})],
                "initContainers": [container("init", {"cpu": "4"})],
                "overhead": {"cpu": "250m", "memory": "64Mi"},
            }
        )
    )
    assert p.requests == {"cpu": 4250, "memory": GI + 64 * 2**20, "pods": 1}


def test_pod_limits_stand_in_for_missing_requests() -> None:
    p = parse_pod(
        pod_doc(
            {
                "containers": [
                    container("a", requests={"cpu": "500m"}, limits={"cpu": "2", "memory": "1Gi"}),
                    container("b", limits={"nvidia.com/gpu": 1}),
                ]
            }
        )
    )
    assert p.requests == {"cpu": 500, "memory": GI, "nvidia.com/gpu": 1, "pods": 1}


def test_pod_limits_stand_in_for_init_containers_too() -> None:
    p = parse_pod(
        pod_doc(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [container("i", limits={"cpu": "3"})],
            }
        )
    )
    assert p.requests["cpu"] == 3000


def test_pod_takes_one_pods_slot() -> None:
    p = parse_pod(pod_doc({"containers": [container("a"), container("b")]}))
    assert p.requests == {"pods": 1}
    assert p.best_effort is True


def test_pod_gpu_and_extended_resources() -> None:
    p = parse_pod(
        pod_doc(
            {
                "containers": [
                    container("a", {"nvidia.com/gpu": 2, "example.com/fpga": "1", "hugepages-2Mi": "4Mi"}),
                    container("b", {"example.com/fpga": 2}),
                ]
            }
        )
    )
    assert p.requests[C.RESOURCE_GPU] == 2
    assert p.requests["example.com/fpga"] == 3
    assert p.requests["hugepages-2Mi"] == 4 * 2**20
    assert p.best_effort is False


def test_effective_requests_helper_prefix() -> None:
    total, names = effective_requests({"containers": [container("x", {"cpu": "2"})]}, "spec.template.spec")
    assert total == {"cpu": 2000, "pods": 1}
    assert names == ("x",)
    with pytest.raises(ManifestError) as info:
        effective_requests({"containers": [container("x", {"cpu": "x"})]}, "spec.template.spec")
    assert info.value.field == "spec.template.spec.containers[0].resources.requests.cpu"


def test_pod_bad_quantities_name_the_field() -> None:
    raises_on(
        "spec.containers[1].resources.requests.memory",
        parse_pod,
        pod_doc({"containers": [container("a", {"cpu": "1"}), container("b", {"memory": "1Gb"})]}),
    )
    raises_on(
        "spec.containers[0].resources.limits.cpu",
        parse_pod,
        pod_doc({"containers": [container("a", limits={"cpu": "1.2.3"})]}),
    )
    raises_on(
        "spec.initContainers[0].resources.requests.cpu",
        parse_pod,
        pod_doc({"containers": [container()], "initContainers": [container("i", {"cpu": "5X"})]}),
    )
    raises_on("spec.overhead.cpu", parse_pod, pod_doc({"containers": [container()], "overhead": {"cpu": "abc"}}))
    raises_on(
        "spec.containers[0].resources.requests.cpu",
        parse_pod,
        pod_doc({"containers": [container("a", {"cpu": "-1"})]}),
    )
    raises_on("spec.containers", parse_pod, pod_doc({"containers": {"name": "a"}}))
    raises_on("spec.containers[0]", parse_pod, pod_doc({"containers": ["a"]}))


def test_pod_status_and_placement() -> None:
    doc = pod_doc()
    doc["spec"].update(nodeName="node0", schedulerName="kai-scheduler", priorityClassName="train", priority=50)
    doc["status"] = {"phase": "Running", "nominatedNodeName": "node1"}
    p = parse_pod(doc)
    assert (p.node_name, p.scheduler_name, p.priority_class_name, p.priority) == ("node0", "kai-scheduler", "train", 50)
    assert p.phase == "Running"
    assert p.nominated_node_name == "node1"


def test_pod_bad_phase_and_priority() -> None:
    doc = pod_doc()
    doc["status"] = {"phase": "Sleeping"}
    raises_on("status.phase", parse_pod, doc)
    doc = pod_doc()
    doc["spec"]["priority"] = "high"
    raises_on("spec.priority", parse_pod, doc)


def test_pod_scheduling_gates() -> None:
    doc = pod_doc()
    doc["spec"]["schedulingGates"] = [{"name": "wait"}]
    assert parse_pod(doc).scheduling_gated is True
    assert parse_pod(pod_doc()).scheduling_gated is False


def test_pod_metadata() -> None:
    p = parse_pod(
        pod_doc(
            namespace="ns1",
            labels={C.LABEL_QUEUE: "team-a", "n": 3},
            annotations={C.ANNOTATION_POD_GROUP_NAME: "pg"},
            creationTimestamp="2026-01-01T00:00:00Z",
            ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True}],
        )
    )
    assert p.meta.namespace == "ns1"
    assert p.meta.labels == {C.LABEL_QUEUE: "team-a", "n": "3"}
    assert p.meta.annotations == {C.ANNOTATION_POD_GROUP_NAME: "pg"}
    assert p.meta.creation_timestamp == 1767225600.0
    assert p.meta.owner_references[0].kind == "Job"
    assert p.meta.owner_references[0].controller is True


def test_pod_bad_creation_timestamp() -> None:
    raises_on("metadata.creationTimestamp", parse_pod, pod_doc(creationTimestamp="yesterday"))


def test_pod_node_selector() -> None:
    doc = pod_doc()
    doc["spec"]["nodeSelector"] = {"gpu": "a100", "n": 1}
    assert parse_pod(doc).node_selector == {"gpu": "a100", "n": "1"}
    doc["spec"]["nodeSelector"] = ["gpu"]
    raises_on("spec.nodeSelector", parse_pod, doc)


REQ = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def affinity_doc(*terms: dict[str, Any]) -> dict[str, Any]:
    doc = pod_doc()
    doc["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }
    return doc


def expr(key: str, op: str, *values: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (expr("gpu", "In", "a100", "h100"), SelectorRequirement("gpu", "In", ("a100", "h100"))),
        (expr("gpu", "NotIn", "t4"), SelectorRequirement("gpu", "NotIn", ("t4",))),
        (expr("gpu", "Exists"), SelectorRequirement("gpu", "Exists", ())),
        (expr("gpu", "DoesNotExist"), SelectorRequirement("gpu", "DoesNotExist", ())),
        (expr("cores", "Gt", "8"), SelectorRequirement("cores", "Gt", ("8",))),
        (expr("cores", "Lt", "-3"), SelectorRequirement("cores", "Lt", ("-3",))),
        (expr("cores", "Gt", 8), SelectorRequirement("cores", "Gt", ("8",))),
    ],
)
def test_pod_affinity_operators(requirement: dict[str, Any], expected: SelectorRequirement) -> None:
    p = parse_pod(affinity_doc({"matchExpressions": [requirement]}))
    assert len(p.affinity_terms) == 1
    assert p.affinity_terms[0].match_expressions == (expected,)


def test_pod_affinity_terms_and_match_fields() -> None:
    p = parse_pod(
        affinity_doc(
            {"matchExpressions": [expr("a", "Exists"), expr("b", "In", "x")]},
            {"matchFields": [expr("metadata.name", "In", "node0")]},
        )
    )
    assert len(p.affinity_terms) == 2
    assert len(p.affinity_terms[0].match_expressions) == 2
    assert p.affinity_terms[1].match_fields == (SelectorRequirement("metadata.name", "In", ("node0",)),)


def test_pod_without_affinity_has_no_terms() -> None:
    assert parse_pod(pod_doc()).affinity_terms == ()
    doc = pod_doc()
    doc["spec"]["affinity"] = {"podAntiAffinity": {}}
    assert parse_pod(doc).affinity_terms == ()


@pytest.mark.parametrize(
    ("requirement", "field"),
    [
        (expr("a", "Like", "x"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].operator"),
        (expr("a", "In"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
        (expr("a", "NotIn"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
        (expr("a", "Exists", "x"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
        (expr("a", "DoesNotExist", "x"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
        (expr("a", "Gt"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
        (expr("a", "Gt", "1", "2"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
        (expr("a", "Lt", "ten"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
        (expr("a", "Gt", "1.5"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
        # the API server parses Gt/Lt values with strconv.ParseInt(v, 10, 64), which rejects these
        (expr("a", "Gt", "1_000"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
        (expr("a", "Lt", " 5"), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
    ],
    ids=_id,
)
def test_pod_bad_affinity(requirement: dict[str, Any], field: str) -> None:
    raises_on(field, parse_pod, affinity_doc({"matchExpressions": [requirement]}))


def test_pod_bad_affinity_in_second_term_and_fields() -> None:
    raises_on(
        f"{REQ}.nodeSelectorTerms[1].matchExpressions[1].operator",
        parse_pod,
        affinity_doc(
            {"matchExpressions": [expr("a", "Exists")]}, {"matchExpressions": [expr("a", "Exists"), expr("b", "Has")]}
        ),
    )
    raises_on(
        f"{REQ}.nodeSelectorTerms[0].matchFields[0].key",
        parse_pod,
        affinity_doc({"matchFields": [expr("metadata.uid", "In", "x")]}),
    )
    doc = affinity_doc()
    doc["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": {"matchExpressions": []}
    }
    raises_on(f"{REQ}.nodeSelectorTerms", parse_pod, doc)


def test_pod_tolerations() -> None:
    doc = pod_doc()
    doc["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists"},
        {"operator": "Exists"},
        {"key": "k", "value": "v"},
    ]
    p = parse_pod(doc)
    assert p.tolerations == (
        Toleration("gpu", "Equal", "true", "NoSchedule"),
        Toleration("dedicated", "Exists", "", ""),
        Toleration("", "Exists", "", ""),
        Toleration("k", "Equal", "v", ""),
    )


def test_pod_bad_tolerations() -> None:
    doc = pod_doc()
    doc["spec"]["tolerations"] = [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Matches"}]
    raises_on("spec.tolerations[1].operator", parse_pod, doc)
    doc["spec"]["tolerations"] = [{"key": "a", "operator": "Exists", "effect": "NoRun"}]
    raises_on("spec.tolerations[0].effect", parse_pod, doc)


# ---------------------------------------------------------------------------------------------
# Queue
# ---------------------------------------------------------------------------------------------


def queue_doc(spec: dict[str, Any] | None = None, name: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": C.QUEUE_API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec or {}}


def test_queue_units() -> None:
    q = parse_queue(
        queue_doc(
            {
                "parentQueue": "dept",
                "priority": 200,
                "displayName": "Team A",
                "resources": {
                    "gpu": {"quota": 2, "limit": 4, "overQuotaWeight": 1},
                    "cpu": {"quota": 1000, "limit": -1, "overQuotaWeight": "2"},
                    "memory": {"quota": "1.5", "limit": 2000, "overQuotaWeight": 0.5},
                },
            }
        )
    )
    assert q.meta.namespace is None
    assert (q.parent, q.priority, q.display_name) == ("dept", 200, "Team A")
    assert (q.resources["gpu"].quota, q.resources["gpu"].limit, q.resources["gpu"].over_quota_weight) == (2, 4, 1)
    assert (q.resources["cpu"].quota, q.resources["cpu"].limit, q.resources["cpu"].over_quota_weight) == (1000, -1, 2)
    assert q.resources["memory"].quota == 1.5
    assert q.resources["memory"].over_quota_weight == 0.5


def test_queue_minus_one_is_unlimited() -> None:
    q = parse_queue(queue_doc({"resources": {"gpu": {"quota": -1, "limit": -1}}}))
    assert q.resources["gpu"].quota == -1
    assert q.resources["gpu"].limit == -1


def test_queue_unset_is_zero() -> None:
    q = parse_queue(queue_doc({"resources": {"gpu": {"quota": 1}}}))
    assert q.resources["gpu"].limit == 0
    assert q.resources["gpu"].over_quota_weight == 0
    for r in ("cpu", "memory"):
        assert (q.resources[r].quota, q.resources[r].limit, q.resources[r].over_quota_weight) == (0, 0, 0)
    bare = parse_queue(queue_doc())
    assert set(bare.resources) == {"gpu", "cpu", "memory"}
    assert bare.parent == ""
    assert bare.priority == C.DEFAULT_QUEUE_PRIORITY
    assert bare.preempt_min_runtime is None and bare.reclaim_min_runtime is None


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"gpu": {"quota": -2}}, "spec.resources.gpu.quota"),
        ({"cpu": {"limit": -0.5}}, "spec.resources.cpu.limit"),
        ({"memory": {"overQuotaWeight": -1}}, "spec.resources.memory.overQuotaWeight"),
        ({"gpu": {"quota": "lots"}}, "spec.resources.gpu.quota"),
        ({"gpu": {"quota": True}}, "spec.resources.gpu.quota"),
        ({"gpu": {"quota": 1, "deserved": 2}}, "spec.resources.gpu.deserved"),
        ({"cpu": {"limits": 2}}, "spec.resources.cpu.limits"),
        ({"gpu": 4}, "spec.resources.gpu"),
        # a misspelt resource (the CRD knows only gpu, cpu, memory) must not silently become "no quota"
        ({"gpus": {"quota": 4}}, "spec.resources.gpus"),
    ],
    ids=_id,
)
def test_queue_bad_resources(resources: dict[str, Any], field: str) -> None:
    raises_on(field, parse_queue, queue_doc({"resources": resources}))


def test_queue_self_parent_rejected() -> None:
    raises_on("spec.parentQueue", parse_queue, queue_doc({"parentQueue": "team-a"}))


def test_queue_min_runtimes() -> None:
    q = parse_queue(queue_doc({"preemptMinRuntime": "5m", "reclaimMinRuntime": "1h30m"}))
    assert q.preempt_min_runtime == 300.0
    assert q.reclaim_min_runtime == 5400.0
    assert parse_queue(queue_doc({"preemptMinRuntime": "0"})).preempt_min_runtime == 0.0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"preemptMinRuntime": "-1s"}, "spec.preemptMinRuntime"),
        ({"reclaimMinRuntime": "-5m"}, "spec.reclaimMinRuntime"),
        ({"preemptMinRuntime": "30"}, "spec.preemptMinRuntime"),
        ({"reclaimMinRuntime": "1x"}, "spec.reclaimMinRuntime"),
        ({"priority": "high"}, "spec.priority"),
        ({"resources": [1]}, "spec.resources"),
    ],
    ids=_id,
)
def test_queue_bad_fields(spec: dict[str, Any], field: str) -> None:
    raises_on(field, parse_queue, queue_doc(spec))


# ---------------------------------------------------------------------------------------------
# PodGroup
# ---------------------------------------------------------------------------------------------


def pg_doc(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": C.PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"queue": "team-a", **(spec or {})},
    }


def test_podgroup_defaults() -> None:
    pg = parse_podgroup(pg_doc())
    assert pg.min_member == 1
    assert pg.queue == "team-a"
    assert pg.meta.namespace == "ns"
    assert pg.min_subgroup is None
    assert pg.sub_groups == ()
    assert pg.mark_unschedulable is True
    assert pg.generated is False
    assert pg.preemptibility == ""


def test_podgroup_fields() -> None:
    pg = parse_podgroup(
        pg_doc(
            {
                "minMember": 4,
                "priorityClassName": "build",
                "preemptibility": "non-preemptible",
                "markUnschedulable": False,
                "preemptionDelay": "30s",
                "stalenessGracePeriod": "2m",
                "topologyConstraint": {"topology": "t", "requiredTopologyLevel": "rack"},
            }
        )
    )
    assert pg.min_member == 4
    assert pg.priority_class_name == "build"
    assert pg.preemptibility == C.NON_PREEMPTIBLE
    assert pg.mark_unschedulable is False
    assert pg.preemption_delay == 30.0
    assert pg.staleness_grace_period == 120.0
    assert pg.topology_constraint is not None
    assert pg.topology_constraint.required_level == "rack"


def test_podgroup_min_member_zero_is_kept() -> None:
    assert parse_podgroup(pg_doc({"minMember": 0})).min_member == 0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"minMember": 2, "minSubGroup": 1}, "spec.minMember"),
        ({"minMember": -1}, "spec.minMember"),
        ({"minMember": "two"}, "spec.minMember"),
        ({"minSubGroup": 1.5}, "spec.minSubGroup"),
        ({"preemptibility": "sometimes"}, "spec.preemptibility"),
        ({"preemptionDelay": "-1s"}, "spec.preemptionDelay"),
        ({"preemptionDelay": "soon"}, "spec.preemptionDelay"),
        ({"stalenessGracePeriod": "60"}, "spec.stalenessGracePeriod"),
        ({"markUnschedulable": "no"}, "spec.markUnschedulable"),
        ({"subGroups": {"name": "a"}}, "spec.subGroups"),
        ({"topologyConstraint": "rack"}, "spec.topologyConstraint"),
    ],
    ids=_id,
)
def test_podgroup_bad_fields(spec: dict[str, Any], field: str) -> None:
    raises_on(field, parse_podgroup, pg_doc(spec))


def test_podgroup_subgroups() -> None:
    pg = parse_podgroup(
        pg_doc(
            {
                "minSubGroup": 2,
                "subGroups": [
                    {"name": "workers", "minSubGroup": 1},
                    {"name": "w1", "parent": "workers", "minMember": 2},
                    {
                        "name": "w2",
                        "parent": "workers",
                        "minMember": 2,
                        "topologyConstraint": {"topology": "t", "preferredTopologyLevel": "rack"},
                    },
                    {"name": "driver", "minMember": 1},
                ],
            }
        )
    )
    assert pg.min_subgroup == 2
    assert [g.name for g in pg.sub_groups] == ["workers", "w1", "w2", "driver"]
    assert pg.sub_groups[0].min_subgroup == 1
    assert pg.sub_groups[0].parent is None
    assert pg.sub_groups[1].parent == "workers"
    assert pg.sub_groups[2].topology_constraint is not None
    assert pg.sub_groups[2].topology_constraint.preferred_level == "rack"


@pytest.mark.parametrize(
    ("groups", "field"),
    [
        # duplicate names
        ([{"name": "a", "minMember": 1}, {"name": "a", "minMember": 1}], "spec.subGroups[0].name"),
        # missing name
        ([{"minMember": 1}], "spec.subGroups[0].name"),
        # missing parent
        ([{"name": "a", "minMember": 1}, {"name": "b", "parent": "nope", "minMember": 1}], "spec.subGroups[1].parent"),
        # cycle a -> b -> a
        ([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}], "spec.subGroups[0].parent"),
        # self-parent
        ([{"name": "a", "parent": "a", "minMember": 1}], "spec.subGroups[0].parent"),
        # leaf without minMember
        ([{"name": "top"}, {"name": "leaf", "parent": "top"}], "spec.subGroups[1].minMember"),
        ([{"name": "only"}], "spec.subGroups[0].minMember"),
        ([{"name": "only", "minSubGroup": 1}], "spec.subGroups[0].minMember"),
        # minMember and minSubGroup together
        ([{"name": "a", "minMember": 1, "minSubGroup": 1}], "spec.subGroups[0]"),
        # negative
        ([{"name": "a", "minMember": -1}], "spec.subGroups[0].minMember"),
        # bad types
        ([{"name": "a", "minMember": "x"}], "spec.subGroups[0].minMember"),
        (["a"], "spec.subGroups[0]"),
    ],
    ids=_id,
)
def test_podgroup_bad_subgroups(groups: list[Any], field: str) -> None:
    raises_on(field, parse_podgroup, pg_doc({"subGroups": groups}))


def test_podgroup_duplicate_subgroup_message() -> None:
    err = raises_on(
        "spec.subGroups[0].name",
        parse_podgroup,
        pg_doc({"subGroups": [{"name": "a", "minMember": 1}, {"name": "a", "minMember": 1}]}),
    )
    assert "duplicate" in str(err)


# ---------------------------------------------------------------------------------------------
# PriorityClass
# ---------------------------------------------------------------------------------------------


def pc_doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": C.PRIORITY_CLASS_API_VERSION,
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    doc.update(extra)
    return doc


def test_priority_class() -> None:
    pc = parse_priority_class(pc_doc())
    assert (pc.meta.name, pc.value, pc.global_default, pc.preemptibility) == ("high", 1000, False, "")
    pc = parse_priority_class(
        pc_doc(globalDefault=True, metadata={"name": "x", "labels": {C.LABEL_PREEMPTIBILITY: "preemptible"}})
    )
    assert pc.global_default is True
    assert pc.preemptibility == C.PREEMPTIBLE
    assert parse_priority_class(pc_doc(value=0)).value == 0
    assert parse_priority_class(pc_doc(value=-5)).value == -5


def test_priority_class_errors() -> None:
    doc = pc_doc()
    del doc["value"]
    raises_on("value", parse_priority_class, doc)
    raises_on("value", parse_priority_class, pc_doc(value="high"))
    raises_on("globalDefault", parse_priority_class, pc_doc(globalDefault="maybe"))
    raises_on(
        f"metadata.labels.{C.LABEL_PREEMPTIBILITY}",
        parse_priority_class,
        pc_doc(metadata={"name": "x", "labels": {C.LABEL_PREEMPTIBILITY: "always"}}),
    )


# ---------------------------------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------------------------------


def topo_doc(*labels: str) -> dict[str, Any]:
    return {
        "apiVersion": C.TOPOLOGY_API_VERSION,
        "kind": "Topology",
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": lb} for lb in labels]},
    }


def test_topology_levels() -> None:
    t = parse_topology(topo_doc("zone", "rack", C.LABEL_HOSTNAME))
    assert [lv.node_label for lv in t.levels] == ["zone", "rack", C.LABEL_HOSTNAME]
    assert len(parse_topology(topo_doc("zone")).levels) == 1
    assert len(parse_topology(topo_doc(*(f"l{i}" for i in range(16)))).levels) == 16


def test_topology_alias() -> None:
    doc = topo_doc()
    doc["spec"]["levels"] = [{"nodeLabel": "r", "alias": "rack"}]
    assert parse_topology(doc).levels[0].alias == "rack"


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ((), "spec.levels"),
        (tuple(f"l{i}" for i in range(17)), "spec.levels"),
        (("rack", "rack"), "spec.levels"),
        ((C.LABEL_HOSTNAME, "rack"), "spec.levels"),
        (("zone", ""), "spec.levels[1].nodeLabel"),
    ],
    ids=_id,
)
def test_topology_bad_levels(labels: tuple[str, ...], field: str) -> None:
    raises_on(field, parse_topology, topo_doc(*labels))


def test_topology_missing_levels() -> None:
    raises_on(
        "spec.levels",
        parse_topology,
        {"apiVersion": C.TOPOLOGY_API_VERSION, "kind": "Topology", "metadata": {"name": "t"}, "spec": {}},
    )


# ---------------------------------------------------------------------------------------------
# SchedulingShard
# ---------------------------------------------------------------------------------------------


def shard_doc(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": C.SHARD_API_VERSION,
        "kind": "SchedulingShard",
        "metadata": {"name": "default"},
        "spec": spec or {},
    }


def test_shard_defaults() -> None:
    s = parse_shard(shard_doc())
    assert (s.placement_gpu, s.placement_cpu, s.k_value) == ("binpack", "binpack", 1.0)
    assert s.queue_depth_per_action == {}


@pytest.mark.parametrize("gpu", ["binpack", "spread"])
@pytest.mark.parametrize("cpu", ["binpack", "spread"])
def test_shard_placement_strategy(gpu: str, cpu: str) -> None:
    s = parse_shard(shard_doc({"placementStrategy": {"gpu": gpu, "cpu": cpu}}))
    assert (s.placement_gpu, s.placement_cpu) == (gpu, cpu)


def test_shard_fields() -> None:
    s = parse_shard(
        shard_doc(
            {
                "kValue": 0.5,
                "partitionLabelValue": "pool-a",
                "queueDepthPerAction": {"allocate": 10},
                "actions": {"consolidation": {"enabled": False}},
                "minRuntime": {"preemptMinRuntime": "1m", "reclaimMinRuntime": "2m"},
            }
        )
    )
    assert s.k_value == 0.5
    assert s.partition_label_value == "pool-a"
    assert s.queue_depth_per_action == {"allocate": 10}
    assert s.actions == {"consolidation": {"enabled": False}}
    assert (s.preempt_min_runtime, s.reclaim_min_runtime) == (60.0, 120.0)
    assert parse_shard(shard_doc({"kValue": 0})).k_value == 0.0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"placementStrategy": {"gpu": "pack"}}, "spec.placementStrategy.gpu"),
        ({"placementStrategy": {"cpu": "Spread"}}, "spec.placementStrategy.cpu"),
        ({"placementStrategy": "spread"}, "spec.placementStrategy"),
        ({"kValue": -0.1}, "spec.kValue"),
        ({"kValue": "high"}, "spec.kValue"),
        ({"queueDepthPerAction": {"allocate": -1}}, "spec.queueDepthPerAction.allocate"),
        ({"queueDepthPerAction": {"allocate": "x"}}, "spec.queueDepthPerAction.allocate"),
        ({"minRuntime": {"preemptMinRuntime": "1"}}, "spec.minRuntime.preemptMinRuntime"),
        ({"actions": {"allocate": True}}, "spec.actions.allocate"),
    ],
    ids=_id,
)
def test_shard_bad_fields(spec: dict[str, Any], field: str) -> None:
    raises_on(field, parse_shard, shard_doc(spec))


def test_pods_with_one_container_list_share_the_parse_not_the_dict() -> None:
    """The request of a repeated container list is computed once (kai.api.objects._pod_requests); each pod
    still gets a dict of its own, and the oversize notes of the first parse come with every later one."""
    spec = {"containers": [container(requests={"cpu": "1e16", "nvidia.com/gpu": "1"})]}
    a, b = parse_pod(pod_doc(spec, name="a")), parse_pod(pod_doc(spec, name="b"))
    assert a.requests == b.requests and a.requests is not b.requests
    a.requests["cpu"] = 0
    assert parse_pod(pod_doc(spec, name="c")).requests["cpu"] == b.requests["cpu"] > 0
    assert a.oversize == b.oversize and b.oversize[0].startswith("spec.containers[0].resources.requests.cpu")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"cpu": 1}, {"cpu": True}),  # equal as numbers, not as input: a boolean is no quantity
        ({"cpu": "1"}, {"cpu": "1x"}),
    ],
)
def test_a_remembered_request_never_answers_for_a_different_list(first: Any, second: Any) -> None:
    assert parse_pod(pod_doc({"containers": [container(requests=first)]})).requests["cpu"] == 1000
    raises_on(
        "spec.containers[0].resources.requests.cpu", parse_pod, pod_doc({"containers": [container(requests=second)]})
    )


def test_a_refused_container_list_is_refused_every_time() -> None:
    bad = pod_doc({"containers": [container(requests={"cpu": "lots"})]})
    for _ in range(2):
        raises_on("spec.containers[0].resources.requests.cpu", parse_pod, bad)


def test_a_large_container_list_is_parsed_but_not_kept() -> None:
    from kai.api import objects

    env = [{"name": f"V{i}", "value": "x" * 100} for i in range(100)]  # a manifest's env: ~12,000 characters
    spec = {"containers": [container(requests={"cpu": "2"}, env=env)]}
    before = len(objects._REQUESTS_MEMO)
    assert parse_pod(pod_doc(spec)).requests["cpu"] == 2000
    assert len(objects._REQUESTS_MEMO) == before  # not added
