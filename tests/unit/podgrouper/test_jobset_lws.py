"""JobSet (two-level subgroups, root minSubGroup) and LeaderWorkerSet (a group per replica, leader and
worker subgroups, segments) as in reference section 7."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.objects import TopologyConstraint
from tests.unit.podgrouper.helpers import group, inconsistent, owner, pg, pod, subgroups

RJ = "jobset.sigs.k8s.io/replicatedjob-name"
IDX = "jobset.sigs.k8s.io/job-index"


def rjob(name: str, replicas: int, parallelism: int | None = None, annotations: dict | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    template: dict[str, Any] = {"spec": spec}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"name": name, "replicas": replicas, "template": template}


def js_pod(js: Any, rj: str, idx: int) -> Any:
    job = owner("batch/v1", "Job", f"{js.meta.name}-{rj}-{idx}", owned_by=js)
    return pod(f"{job.meta.name}-0-x", owned_by=job, labels={RJ: rj, IDX: str(idx)}), job


def test_jobset_parent_per_replicated_job_and_leaf_per_replica() -> None:
    js = owner(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "js",
        spec={"replicatedJobs": [rjob("driver", 1), rjob("workers", 2, parallelism=4)]},
        labels={"kai.scheduler/queue": "q"},
    )
    p, job = js_pod(js, "workers", 1)
    g = group(p, job, js)
    assert (g.podgroup.meta.name, g.podgroup.min_subgroup, g.podgroup.queue) == ("pg-js", 2, "q")
    assert subgroups(g.podgroup) == [
        ("driver", None, 1, None),
        ("driver-replica-0", 1, None, "driver"),
        ("workers", None, 2, None),
        ("workers-replica-0", 4, None, "workers"),
        ("workers-replica-1", 4, None, "workers"),
    ]
    assert g.subgroup == "workers-replica-1"


@pytest.mark.parametrize(
    ("spec_extra", "annotations", "root"),
    [
        ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, None, 1),
        ({}, {"kai.scheduler/batch-min-member": "1"}, 1),
        ({}, {"kai.scheduler/batch-min-member": "7"}, 2),
    ],
)
def test_jobset_root_min_subgroup(spec_extra: dict, annotations: dict | None, root: int) -> None:
    spec = {"replicatedJobs": [rjob("a", 1), rjob("b", 1)], **spec_extra}
    js = owner("jobset.x-k8s.io/v1alpha2", "JobSet", "js", spec=spec, annotations=annotations)
    p, job = js_pod(js, "a", 0)
    assert pg(p, job, js).min_subgroup == root


def test_jobset_leaf_batch_min_member_and_topology() -> None:
    ann = {
        "kai.scheduler/batch-min-member": "2",
        "kai.scheduler/topology": "dc",
        "kai.scheduler/topology-preferred-placement": "rack",
    }
    js = owner("jobset.x-k8s.io/v1alpha2", "JobSet", "js", spec={"replicatedJobs": [rjob("w", 1, 8, ann)]})
    p, job = js_pod(js, "w", 0)
    leaf = pg(p, job, js).sub_groups[1]
    assert (leaf.min_member, leaf.topology_constraint) == (2, TopologyConstraint("dc", "", "rack"))


def test_jobset_bad_leaf_min_member_names_the_template() -> None:
    js = owner(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "js",
        spec={"replicatedJobs": [rjob("w", 1, 2, {"kai.scheduler/batch-min-member": "0"})]},
    )
    p, job = js_pod(js, "w", 0)
    warning = inconsistent(p, job, js)
    assert warning.field == "spec.replicatedJobs[0].template.metadata.annotations.kai.scheduler/batch-min-member"


def test_jobset_pod_without_routing_labels_is_an_error() -> None:
    js = owner("jobset.x-k8s.io/v1alpha2", "JobSet", "js", spec={"replicatedJobs": [rjob("w", 1)]})
    job = owner("batch/v1", "Job", "js-w-0", owned_by=js)
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=job), job, js)
    assert info.value.field == f"metadata.labels.{RJ}"


# --- LeaderWorkerSet ----------------------------------------------------------------------------------

NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP = "leaderworkerset.sigs.k8s.io/group-index"
WORKER = "leaderworkerset.sigs.k8s.io/worker-index"


def lws(size: int, **extra: Any) -> Any:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": {"spec": {"containers": [{"name": "c"}]}}}
    lwt.update(extra.pop("lwt", {}))
    return owner(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        spec={"replicas": 2, "leaderWorkerTemplate": lwt, **extra},
        labels={"kai.scheduler/queue": "serve"},
    )


def lws_pod(top: Any, group_index: int, worker: int, node: str = "") -> Any:
    return pod(
        f"vllm-{group_index}-{worker}",
        owned_by=top,
        labels={NAME: "vllm", GROUP: str(group_index), WORKER: str(worker)},
        node=node,
    )


def test_lws_one_group_per_replica_with_leader_and_workers() -> None:
    top = lws(4)
    leader, worker = group(lws_pod(top, 1, 0), top), group(lws_pod(top, 1, 3), top)
    assert (leader.podgroup.meta.name, leader.podgroup.min_member, leader.podgroup.queue) == (
        "pg-vllm-group-1",
        4,
        "serve",
    )
    assert subgroups(leader.podgroup) == [("leader", 1, None, None), ("workers", 3, None, None)]
    assert (leader.subgroup, worker.subgroup) == ("leader", "workers")
    assert group(lws_pod(top, 0, 0), top).podgroup.meta.name == "pg-vllm-group-0"


def test_lws_leader_ready_needs_only_the_leader_until_it_is_scheduled() -> None:
    top = lws(4, startupPolicy="LeaderReady")
    assert pg(lws_pod(top, 0, 0), top).min_member == 1
    assert pg(lws_pod(top, 0, 0, node="n1"), top).min_member == 4
    assert pg(lws_pod(top, 0, 2), top).min_member == 4


def test_lws_size_one_has_no_workers_subgroup() -> None:
    top = lws(1)
    assert subgroups(pg(lws_pod(top, 0, 0), top)) == [("leader", 1, None, None)]


def test_lws_segments_leader_worker_policy_divisible() -> None:
    """size 5, segments of 2: workers 1,2 with the leader in segment 0 (split into leader + workers)."""
    top = lws(5, lwt={"subGroupPolicy": {"subGroupSize": 2}})
    leader, w2, w3 = (group(lws_pod(top, 0, w), top) for w in (0, 2, 3))
    assert subgroups(leader.podgroup) == [
        ("segment-0", None, 2, None),
        ("segment-1", 2, None, None),
        ("leader", 1, None, "segment-0"),
        ("workers", 2, None, "segment-0"),
    ]
    assert (leader.subgroup, w2.subgroup, w3.subgroup) == ("leader", "workers", "segment-1")


def test_lws_segments_leader_worker_policy_not_divisible() -> None:
    """size 4, segments of 2: the leader takes a worker's place in segment 0."""
    top = lws(4, lwt={"subGroupPolicy": {"subGroupSize": 2}})
    g = group(lws_pod(top, 0, 3), top)
    assert subgroups(g.podgroup) == [
        ("segment-0", None, 2, None),
        ("segment-1", 2, None, None),
        ("leader", 1, None, "segment-0"),
        ("workers", 1, None, "segment-0"),
    ]
    assert g.subgroup == "segment-1"


def test_lws_segments_leader_excluded() -> None:
    top = lws(5, lwt={"subGroupPolicy": {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}})
    leader, w1, w4 = (group(lws_pod(top, 0, w), top) for w in (0, 1, 4))
    assert subgroups(leader.podgroup) == [
        ("leader", 1, None, None),
        ("segment-0", 2, None, None),
        ("segment-1", 2, None, None),
    ]
    assert (leader.subgroup, w1.subgroup, w4.subgroup) == ("leader", "segment-0", "segment-1")


@pytest.mark.parametrize(
    ("lwt", "field"),
    [
        ({"subGroupPolicy": {"subGroupSize": 1}}, "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"),
        ({"subGroupPolicy": {"subGroupSize": 9}}, "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"),
        (
            {"subGroupPolicy": {"subGroupSize": 3, "subGroupPolicyType": "LeaderExcluded"}},
            "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType",
        ),
    ],
)
def test_lws_inconsistent_segments_warn_naming_the_field(lwt: dict, field: str) -> None:
    top = lws(5, lwt=lwt)
    warning = inconsistent(lws_pod(top, 0, 1), top)
    assert (warning.obj, warning.field) == ("LeaderWorkerSet/default/vllm", field)


def test_lws_unknown_subgroup_policy_is_an_error() -> None:
    top = lws(5, lwt={"subGroupPolicy": {"subGroupSize": 2, "subGroupPolicyType": "Nope"}})
    with pytest.raises(ManifestError) as info:
        pg(lws_pod(top, 0, 1), top)
    assert info.value.field == "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType"


def test_lws_segment_size_from_the_lws_annotation() -> None:
    top = owner(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        spec={"leaderWorkerTemplate": {"size": 3}},
        annotations={"kai.scheduler/segment-size": "x"},
    )
    with pytest.raises(ManifestError) as info:
        pg(lws_pod(top, 0, 1), top)
    assert (info.value.obj, info.value.field) == (
        "LeaderWorkerSet/default/vllm",
        "metadata.annotations.kai.scheduler/segment-size",
    )
