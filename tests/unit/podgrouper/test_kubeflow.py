"""Kubeflow kinds (reference section 7): minAvailable, elasticPolicy.minReplicas or Σ replicas; PyTorchJob
master/worker subgroups and segments; MPIJob's delayed launcher; Notebook priority build."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.objects import TopologyConstraint
from tests.unit.podgrouper.helpers import FakeView, group, inconsistent, owner, pg, pod, subgroups

ROLE = "training.kubeflow.org/replica-type"
INDEX = "training.kubeflow.org/replica-index"


def specs(**replicas: int) -> dict[str, Any]:
    return {k: {"replicas": v, "template": {"spec": {"containers": [{"name": "c"}]}}} for k, v in replicas.items()}


# kind, spec → minMember
MIN_MEMBER_CASES = [
    ("TFJob", {"tfReplicaSpecs": specs(Chief=1, Worker=3, PS=2)}, 6),
    ("TFJob", {"tfReplicaSpecs": specs(Worker=3), "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}, 2),
    ("XGBoostJob", {"xgbReplicaSpecs": specs(Master=1, Worker=4)}, 5),
    ("JAXJob", {"jaxReplicaSpecs": specs(Worker=8)}, 8),
    ("MPIJob", {"mpiReplicaSpecs": specs(Launcher=1, Worker=2)}, 3),
    ("PyTorchJob", {"pytorchReplicaSpecs": specs(Master=1, Worker=3)}, 4),
    ("PyTorchJob", {"pytorchReplicaSpecs": specs(Master=1, Worker=3), "elasticPolicy": {"minReplicas": 2}}, 2),
    (
        "PyTorchJob",
        {
            "pytorchReplicaSpecs": specs(Master=1, Worker=3),
            "elasticPolicy": {"minReplicas": 2},
            "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
        },
        3,
    ),
]


@pytest.mark.parametrize(("kind", "spec", "min_member"), MIN_MEMBER_CASES)
def test_min_member(kind: str, spec: dict[str, Any], min_member: int) -> None:
    job = owner("kubeflow.org/v1", kind, "j", spec=spec, labels={"kai.scheduler/queue": "q"})
    g = pg(pod(owned_by=job), job)
    assert (g.meta.name, g.min_member, g.queue, g.priority_class_name) == ("pg-j", min_member, "q", "train")


INCONSISTENT_CASES = [
    ("TFJob", {}, "spec.tfReplicaSpecs"),
    ("TFJob", {"tfReplicaSpecs": specs(Worker=0)}, "spec.tfReplicaSpecs.Worker.replicas"),
    ("TFJob", {"tfReplicaSpecs": specs(Worker=-2)}, "spec.tfReplicaSpecs.Worker.replicas"),
    ("XGBoostJob", {"xgbReplicaSpecs": specs(Worker=2)}, "spec.xgbReplicaSpecs"),
    ("JAXJob", {"jaxReplicaSpecs": specs(Chief=1)}, "spec.jaxReplicaSpecs"),
    ("MPIJob", {"mpiReplicaSpecs": specs(Worker=2)}, "spec.mpiReplicaSpecs"),
    ("PyTorchJob", {"pytorchReplicaSpecs": specs(Master=1, Worker=-1)}, "spec.pytorchReplicaSpecs.Worker.replicas"),
    (
        "PyTorchJob",
        {"pytorchReplicaSpecs": specs(Worker=2), "elasticPolicy": {"minReplicas": -1}},
        "spec.elasticPolicy.minReplicas",
    ),
    (
        "TFJob",
        {"tfReplicaSpecs": specs(Worker=2), "runPolicy": {"schedulingPolicy": {"minAvailable": -3}}},
        "spec.runPolicy.schedulingPolicy.minAvailable",
    ),
]


@pytest.mark.parametrize(("kind", "spec", "field"), INCONSISTENT_CASES)
def test_inconsistent_replica_specs_warn_and_fall_back_to_the_default_group(
    kind: str, spec: dict[str, Any], field: str
) -> None:
    job = owner("kubeflow.org/v1", kind, "j", spec=spec)
    warning = inconsistent(pod(owned_by=job), job)
    assert (warning.obj, warning.field) == (f"{kind}/default/j", field)


def test_a_malformed_replica_count_is_still_an_error() -> None:
    job = owner("kubeflow.org/v1", "TFJob", "j", spec={"tfReplicaSpecs": {"Worker": {"replicas": "3"}}})
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=job), job)
    assert (info.value.obj, info.value.field) == ("TFJob/default/j", "spec.tfReplicaSpecs.Worker.replicas")


def test_pytorch_master_and_worker_subgroups() -> None:
    job = owner("kubeflow.org/v1", "PyTorchJob", "pt", spec={"pytorchReplicaSpecs": specs(Master=1, Worker=3)})
    master = group(pod("pt-master-0", owned_by=job, labels={ROLE: "master", INDEX: "0"}), job)
    worker = group(pod("pt-worker-2", owned_by=job, labels={ROLE: "worker", INDEX: "2"}), job)
    assert subgroups(master.podgroup) == [("master", 1, None, None), ("worker", 3, None, None)]
    assert (master.subgroup, worker.subgroup) == ("master", "worker")


def test_pytorch_elastic_minimum_shrinks_the_worker_subgroup() -> None:
    spec = {"pytorchReplicaSpecs": specs(Master=1, Worker=5), "elasticPolicy": {"minReplicas": 3}}
    job = owner("kubeflow.org/v1", "PyTorchJob", "pt", spec=spec)
    assert subgroups(pg(pod(owned_by=job), job)) == [("master", 1, None, None), ("worker", 2, None, None)]


def test_pytorch_worker_segments_from_the_template_annotation() -> None:
    workers = {
        "replicas": 5,
        "template": {
            "metadata": {
                "annotations": {
                    "kai.scheduler/segment-size": "2",
                    "kai.scheduler/topology": "dc",
                    "kai.scheduler/segment-topology-required-placement": "rack",
                }
            }
        },
    }
    spec = {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": workers}}
    job = owner("kubeflow.org/v1", "PyTorchJob", "pt", spec=spec)
    g = group(pod("pt-worker-4", owned_by=job, labels={ROLE: "worker", INDEX: "4"}), job)
    assert subgroups(g.podgroup) == [
        ("master", 1, None, None),
        ("worker", 5, None, None),
        ("worker-0", 2, None, "worker"),
        ("worker-1", 2, None, "worker"),
        ("worker-2", 1, None, "worker"),
    ]
    assert g.subgroup == "worker-2"
    assert g.podgroup.sub_groups[2].topology_constraint == TopologyConstraint("dc", "rack", "")


SEGMENT_FIELD = "spec.pytorchReplicaSpecs.Worker.template.metadata.annotations.kai.scheduler/segment-size"


def test_pytorch_segment_size_zero_warns_naming_the_template_field() -> None:
    workers = {"replicas": 4, "template": {"metadata": {"annotations": {"kai.scheduler/segment-size": "0"}}}}
    job = owner("kubeflow.org/v1", "PyTorchJob", "pt", spec={"pytorchReplicaSpecs": {"Worker": workers}})
    warning = inconsistent(pod(owned_by=job, labels={ROLE: "worker", INDEX: "0"}), job)
    assert (warning.obj, warning.field) == ("PyTorchJob/default/pt", SEGMENT_FIELD)


def test_pytorch_segment_size_not_a_number_is_an_error() -> None:
    workers = {"replicas": 4, "template": {"metadata": {"annotations": {"kai.scheduler/segment-size": "two"}}}}
    job = owner("kubeflow.org/v1", "PyTorchJob", "pt", spec={"pytorchReplicaSpecs": {"Worker": workers}})
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=job, labels={ROLE: "worker", INDEX: "0"}), job)
    assert info.value.field == SEGMENT_FIELD


def test_mpi_wait_for_workers_leaves_the_launcher_out_until_it_exists() -> None:
    spec = {"mpiReplicaSpecs": specs(Launcher=1, Worker=4), "launcherCreationPolicy": "WaitForWorkersReady"}
    job = owner("kubeflow.org/v2beta1", "MPIJob", "mpi", spec=spec)
    worker = pod("mpi-worker-0", owned_by=job)
    assert pg(worker, job, view=FakeView()).min_member == 4
    launcher = pod(
        "mpi-launcher-x",
        labels={"training.kubeflow.org/job-name": "mpi", "training.kubeflow.org/job-role": "launcher"},
    )
    assert pg(worker, job, view=FakeView(pods=[launcher])).min_member == 5


def test_notebook_is_build_priority_unless_labelled() -> None:
    nb = owner("kubeflow.org/v1beta1", "Notebook", "nb")
    sts = owner("apps/v1", "StatefulSet", "nb", owned_by=nb)
    g = pg(pod("nb-0", owned_by=sts), sts, nb)
    assert (g.meta.name, g.min_member, g.priority_class_name) == ("pg-nb", 1, "build")
    labelled = owner("kubeflow.org/v1beta1", "Notebook", "nb", labels={"priorityClassName": "build-preemptible"})
    assert pg(pod(owned_by=labelled), labelled).priority_class_name == "build-preemptible"
