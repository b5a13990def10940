"""The Kubernetes backend's pure parts: wire decoding, PodGroup manifests, event bodies (no API server)."""

from __future__ import annotations

import json

from kai.api.objects import parse_node, parse_pod, parse_podgroup
from kai.k8s._decode import KINDS, PDB_V1BETA1
from kai.k8s._events import NOTE_LIMIT, core_event_body, event_body
from kai.k8s._grouper import podgroup_manifest, spec_patch
from kai.podgrouper import group_pod
from kai.scheduler.decisions import Event

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "w-0",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"kai.scheduler/queue": "team-a", "ray.io/node-type": "worker"},
        "annotations": {"pod-group-name": "pg-x"},
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "rc-1"}],
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "schedulerName": "kai-scheduler",
        "priorityClassName": "train",
        "nodeSelector": {"gpu": "a100"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            },
            "podAntiAffinity": {"ignored": True},
        },
        "initContainers": [{"name": "init", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
        "containers": [
            {
                "name": "main",
                "image": "x",
                "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"nvidia.com/gpu": "2"}},
            }
        ],
        "overhead": {"cpu": "100m"},
        "volumes": [{"name": "v", "emptyDir": {}}],
    },
    "status": {
        "phase": "Running",
        "startTime": "2025-01-01T00:01:00Z",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    },
}


def _spec(kind: str):
    return next(k for k in KINDS if k.kind == kind)


def test_pod_decoded_from_the_wire_equals_the_manifest_parse() -> None:
    spec = _spec("Pod")
    d = spec.codec.decode_item(json.dumps(POD).encode())
    assert d.resource_version == "42"
    assert "managedFields" not in d.doc["metadata"]
    assert spec.parse(d.doc) == parse_pod(POD)
    assert d.status.conditions[0].type == "PodScheduled"


def test_list_decoding_keeps_continue_and_resource_version() -> None:
    node = {
        "metadata": {"name": "n0", "uid": "n-1", "resourceVersion": "7", "labels": {"a": "b"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "unschedulable": True},
        "status": {
            "allocatable": {"cpu": "15", "memory": "60Gi", "nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "False"}],
            "images": [{"names": ["big"], "sizeBytes": 1}],
        },
    }
    data = json.dumps({"metadata": {"resourceVersion": "99", "continue": "tok"}, "items": [node]}).encode()
    meta, items = _spec("Node").codec.decode_list(data)
    assert (meta.resourceVersion, meta.cont) == ("99", "tok")
    assert _spec("Node").parse(items[0].doc) == parse_node(node)


def test_small_kinds_are_kept_whole_without_managed_fields() -> None:
    pg = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns", "uid": "1", "resourceVersion": "3", "managedFields": [1]},
        "spec": {"minMember": 2, "queue": "q"},
        "status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool"}]},
    }
    d = _spec("PodGroup").codec.decode_item(json.dumps(pg).encode())
    assert d.status == pg["status"] and "managedFields" not in d.doc["metadata"]
    assert _spec("PodGroup").parse(d.doc).min_member == 2
    assert PDB_V1BETA1.path("ns") == "/apis/policy/v1beta1/namespaces/ns/poddisruptionbudgets"
    assert _spec("Pod").path() == "/api/v1/pods"


def test_the_podgroup_the_grouper_decides_survives_the_api_round_trip() -> None:
    """podgroup_manifest(pg) is what the pod-grouper POSTs; reading it back gives the same PodGroup spec."""
    from kai.api.workloads import parse_workload

    cluster = parse_workload(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": "rc",
                "namespace": "team-a",
                "uid": "rc-1",
                "labels": {"kai.scheduler/queue": "team-a", "priorityClassName": "train"},
                "annotations": {"kai.scheduler/staleness-grace-period": "90s"},
            },
            "spec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h"}]}}},
                "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": {"spec": {"containers": []}}}],
            },
        }
    )
    pod = parse_pod({**POD, "metadata": {**POD["metadata"], "labels": {"ray.io/group": "gpu"}, "annotations": {}}})
    grouping = group_pod(pod, [cluster])
    assert grouping is not None
    pg = grouping.podgroup
    doc = podgroup_manifest(pg)
    back = parse_podgroup({**doc, "metadata": {**doc["metadata"], "uid": "x"}})
    assert doc["metadata"]["ownerReferences"] == [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "rc-1"}
    ]
    for f in ("min_member", "queue", "priority_class_name", "sub_groups", "staleness_grace_period"):
        assert getattr(back, f) == getattr(pg, f), f
    assert back.min_member == 3 and back.staleness_grace_period == 90


def test_spec_patch_takes_a_podgroup_to_what_the_grouper_decides() -> None:
    """Only the changed fields are patched; a field the grouper no longer sets is removed (null)."""
    base = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "a", "uid": "u"},
        "spec": {"minMember": 2, "queue": "team-a", "priorityClassName": "train", "preemptionDelay": "30s"},
    }
    old = parse_podgroup(base)
    assert spec_patch(old, parse_podgroup(base)) is None
    grown = {**base, "spec": {"minMember": 3, "queue": "team-a", "priorityClassName": "train"}}
    assert spec_patch(old, parse_podgroup(grown)) == {"minMember": 3, "preemptionDelay": None}


def test_event_bodies() -> None:
    pod_ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "u"}
    long = Event("Pod/ns/p", "Warning", "Unschedulable", "x" * 5000)
    body = event_body(long, pod_ref, "kai-0", 1_700_000_000.5)
    assert body["metadata"]["namespace"] == "ns" and body["regarding"] == pod_ref
    assert len(body["note"]) == NOTE_LIMIT and body["note"].endswith("...")
    assert body["eventTime"] == "2023-11-14T22:13:20.500000Z"
    assert body["action"] == "Scheduling" and body["type"] == "Warning"
    queue_ref = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "name": "q", "uid": "u"}
    core = core_event_body(Event("Queue/q", "Warning", "InvalidObject", "bad"), queue_ref, "kai-0", 0.0)
    assert core["apiVersion"] == "v1" and core["metadata"]["namespace"] == "default"
    assert core["involvedObject"] == queue_ref and core["message"] == "bad" and core["count"] == 1
