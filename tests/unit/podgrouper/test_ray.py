"""KubeRay kinds (reference section 7): 1 head + Σ worker groups of (minReplicas if > 0 else replicas) ×
numOfHosts; suspended and empty groups skipped; headgroup and per-group subgroups; RayJob and RayService
grouped on their cluster; the ray.io/priority-class-name override."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kai.api.errors import ManifestError
from kai.api.objects import TopologyConstraint
from kai.api.workloads import parse_workload
from tests.unit.podgrouper.helpers import FakeView, group, inconsistent, owner, pg, pod, subgroups

WALKTHROUGH_RAYCLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: raycluster-sample
  labels:
    kai.scheduler/queue: team-a
    priorityClassName: train
spec:
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
  workerGroupSpecs:
  - groupName: worker
    replicas: 1
    minReplicas: 1
    maxReplicas: 2
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
"""


def head_pod(cluster: Any, name: str = "rc-head-x") -> Any:
    return pod(name, owned_by=cluster, labels={"ray.io/node-type": "head", "ray.io/group": "headgroup"})


def test_walkthrough_raycluster_is_one_gang_of_head_and_worker() -> None:
    rc = parse_workload(yaml.safe_load(WALKTHROUGH_RAYCLUSTER))
    head = group(head_pod(rc), rc)
    worker = group(pod("w", owned_by=rc, labels={"ray.io/node-type": "worker", "ray.io/group": "worker"}), rc)
    g = head.podgroup
    assert (g.meta.name, g.min_member, g.queue, g.priority_class_name, g.preemptibility) == (
        "pg-raycluster-sample",
        2,
        "team-a",
        "train",
        "",
    )
    assert subgroups(g) == [("headgroup", 1, None, None), ("worker", 1, None, None)]
    assert (head.subgroup, worker.subgroup) == ("headgroup", "worker")
    assert worker.podgroup.meta.name == g.meta.name
    assert head.priority_from.field == "metadata.labels.priorityClassName"


def group_spec(name: str | None = None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "w"}]}}, **fields}
    if name is not None:
        out["groupName"] = name
    return out


# workerGroupSpecs (+ extra spec) → minMember and subgroups (name, min)
GANG_CASES = [
    ([], {}, 1, [("headgroup", 1)]),
    ([group_spec("a", replicas=3)], {}, 4, [("headgroup", 1), ("a", 3)]),
    ([group_spec("a", replicas=3, minReplicas=2)], {}, 3, [("headgroup", 1), ("a", 2)]),
    ([group_spec("a", replicas=2, numOfHosts=4)], {}, 9, [("headgroup", 1), ("a", 8)]),
    ([group_spec("a", replicas=2, minReplicas=1, numOfHosts=2)], {}, 3, [("headgroup", 1), ("a", 2)]),
    ([group_spec("a", replicas=0)], {}, 1, [("headgroup", 1)]),
    ([group_spec("a", replicas=4, suspend=True), group_spec("b", replicas=1)], {}, 2, [("headgroup", 1), ("b", 1)]),
    ([group_spec("a", replicas=4, suspended=True)], {}, 1, [("headgroup", 1)]),
    (
        [group_spec(None, replicas=1), group_spec(None, replicas=2)],
        {},
        4,
        [("headgroup", 1), ("worker-group-0", 1), ("worker-group-1", 2)],
    ),
    ([group_spec("a", replicas=3)], {"enableInTreeAutoscaling": True}, 1, [("headgroup", 1), ("a", 0)]),
    ([group_spec("a", replicas=3, minReplicas=1)], {"enableInTreeAutoscaling": True}, 2, [("headgroup", 1), ("a", 1)]),
]


@pytest.mark.parametrize(("groups", "extra", "min_member", "expected"), GANG_CASES)
def test_gang_size_and_subgroups(groups: list, extra: dict, min_member: int, expected: list) -> None:
    rc = owner("ray.io/v1", "RayCluster", "rc", spec={"headGroupSpec": {}, "workerGroupSpecs": groups, **extra})
    g = pg(head_pod(rc), rc)
    assert g.min_member == min_member
    assert [(s.name, s.min_member) for s in g.sub_groups] == expected


INCONSISTENT_GROUPS = [
    pytest.param(group_spec("a", replicas=1, minReplicas=2), "minReplicas", "more than replicas 1", id="min_gt_rep"),
    pytest.param(
        group_spec("a", replicas=3, minReplicas=3, maxReplicas=2),
        "minReplicas",
        "more than maxReplicas",
        id="min_gt_max",
    ),
    pytest.param(group_spec("a", replicas=-1), "replicas", "-1 must not be negative", id="negative_replicas"),
    pytest.param(group_spec("a", replicas=2, numOfHosts=-2), "numOfHosts", "must not be negative", id="negative_hosts"),
]


@pytest.mark.parametrize(("spec", "field", "text"), INCONSISTENT_GROUPS)
def test_inconsistent_worker_group_warns_naming_the_group_and_falls_back(spec: dict, field: str, text: str) -> None:
    rc = owner("ray.io/v1", "RayCluster", "rc", spec={"workerGroupSpecs": [group_spec("ok", replicas=1), spec]})
    warning = inconsistent(head_pod(rc), rc)
    assert (warning.obj, warning.field) == ("RayCluster/default/rc", f"spec.workerGroupSpecs[1].{field}")
    assert text in warning.message


def test_group_topology_from_template_annotations() -> None:
    ann = {"kai.scheduler/topology": "dc", "kai.scheduler/topology-required-placement": "rack"}
    worker = group_spec("a", replicas=2)
    worker["template"]["metadata"] = {"annotations": ann}
    rc = owner("ray.io/v1", "RayCluster", "rc", spec={"workerGroupSpecs": [worker]})
    g = pg(head_pod(rc), rc)
    assert g.sub_groups[0].topology_constraint is None
    assert g.sub_groups[1].topology_constraint == TopologyConstraint("dc", "rack", "")


def test_group_placement_without_topology_name_warns() -> None:
    worker = group_spec("a", replicas=2)
    worker["template"]["metadata"] = {"annotations": {"kai.scheduler/topology-preferred-placement": "rack"}}
    rc = owner("ray.io/v1", "RayCluster", "rc", spec={"workerGroupSpecs": [worker]})
    warning = inconsistent(head_pod(rc), rc)
    assert warning.field == "spec.workerGroupSpecs[0].template.metadata.annotations.kai.scheduler/topology"


def test_ray_priority_class_label_overrides() -> None:
    labels = {"priorityClassName": "train", "ray.io/priority-class-name": "build"}
    rc = owner("ray.io/v1", "RayCluster", "rc", labels=labels)
    g = group(head_pod(rc), rc)
    assert g.podgroup.priority_class_name == "build"
    assert g.priority_from.field == "metadata.labels.ray.io/priority-class-name"


def service_and_cluster(status: dict | None) -> tuple[Any, Any]:
    svc = owner(
        "ray.io/v1",
        "RayService",
        "svc",
        labels={"kai.scheduler/queue": "team-a", "priorityClassName": "inference"},
        status=status,
    )
    rc = owner(
        "ray.io/v1",
        "RayCluster",
        "svc-abcde",
        owned_by=svc,
        spec={"workerGroupSpecs": [group_spec("gpu-group", replicas=1, minReplicas=1)]},
    )
    return svc, rc


@pytest.mark.parametrize("which", ["activeServiceStatus", "pendingServiceStatus"])
def test_rayservice_is_grouped_under_its_own_name_on_its_cluster(which: str) -> None:
    svc, rc = service_and_cluster({which: {"rayClusterName": "svc-abcde"}})
    g = pg(head_pod(rc), rc, svc)
    assert (g.meta.name, g.min_member, g.queue, g.priority_class_name) == ("pg-svc", 2, "team-a", "inference")
    assert g.meta.owner_references[0].kind == "RayService"
    assert [s.name for s in g.sub_groups] == ["headgroup", "gpu-group"]


def test_rayservice_cluster_from_the_view_when_status_names_another_cluster() -> None:
    svc, rc = service_and_cluster({"activeServiceStatus": {"rayClusterName": "svc-other"}})
    other = owner("ray.io/v1", "RayCluster", "svc-other", spec={"workerGroupSpecs": [group_spec("g", replicas=5)]})
    assert pg(head_pod(rc), rc, svc, view=FakeView([other])).min_member == 6


def test_rayservice_naming_a_missing_cluster_is_an_error() -> None:
    svc, rc = service_and_cluster({"activeServiceStatus": {"rayClusterName": "gone"}})
    with pytest.raises(ManifestError) as info:
        pg(head_pod(rc), rc, svc)
    assert info.value.obj == "RayService/default/svc"
    assert "gone" in info.value.message


def test_rayservice_without_status_uses_the_cluster_in_its_chain() -> None:
    svc, rc = service_and_cluster(None)
    assert pg(head_pod(rc), rc, svc).min_member == 2


def test_rayjob_uses_status_ray_cluster_name() -> None:
    job = owner("ray.io/v1", "RayJob", "rj", status={"rayClusterName": "rj-x"}, labels={"kai.scheduler/queue": "q"})
    rc = owner(
        "ray.io/v1", "RayCluster", "rj-x", owned_by=job, spec={"workerGroupSpecs": [group_spec("w", replicas=2)]}
    )
    g = pg(head_pod(rc), rc, job)
    assert (g.meta.name, g.min_member, g.queue, g.priority_class_name) == ("pg-rj", 3, "q", "train")
