"""Knative Service (a PodGroup per Revision, min-scale) and skip-top-owner kinds (Argo Workflow, TrainJob)."""

from __future__ import annotations

import pytest

from kai.api.errors import ManifestError
from tests.unit.podgrouper.helpers import FakeView, group, owner, pg, pod, subgroups

REV = "serving.knative.dev/revision"


def knative_chain(min_scale: str | None) -> tuple:
    svc = owner("serving.knative.dev/v1", "Service", "chat", labels={"team": "t"})
    config = owner("serving.knative.dev/v1", "Configuration", "chat", owned_by=svc)
    ann = {"autoscaling.knative.dev/min-scale": min_scale} if min_scale is not None else None
    rev = owner(
        "serving.knative.dev/v1",
        "Revision",
        "chat-00001",
        owned_by=config,
        annotations=ann,
        labels={"kai.scheduler/queue": "serve"},
    )
    dep = owner("apps/v1", "Deployment", "chat-00001-deployment", owned_by=rev)
    rs = owner("apps/v1", "ReplicaSet", "chat-00001-deployment-abc", owned_by=dep)
    return pod("chat-pod", owned_by=rs, labels={REV: "chat-00001"}), (rs, dep, rev, config, svc)


@pytest.mark.parametrize(("min_scale", "expected"), [(None, 1), ("3", 3)])
def test_knative_one_group_per_revision(min_scale: str | None, expected: int) -> None:
    p, chain = knative_chain(min_scale)
    g = pg(p, *chain)
    assert (g.meta.name, g.min_member, g.queue, g.priority_class_name) == (
        "pg-chat-00001",
        expected,
        "serve",
        "inference",
    )
    assert g.meta.owner_references[0].kind == "Revision"


def test_knative_bad_min_scale_names_the_revision() -> None:
    p, chain = knative_chain("lots")
    with pytest.raises(ManifestError) as info:
        pg(p, *chain)
    assert (info.value.obj, info.value.field) == (
        "Revision/default/chat-00001",
        "metadata.annotations.autoscaling.knative.dev/min-scale",
    )


def test_knative_revision_through_the_view_and_missing_label() -> None:
    svc = owner("serving.knative.dev/v1", "Service", "chat")
    rev = owner(
        "serving.knative.dev/v1", "Revision", "chat-00002", annotations={"autoscaling.knative.dev/min-scale": "2"}
    )
    assert pg(pod(owned_by=svc, labels={REV: "chat-00002"}), svc, view=FakeView([rev])).min_member == 2
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=svc), svc)
    assert info.value.field == f"metadata.labels.{REV}"


def test_argo_workflow_pod_is_grouped_as_a_bare_pod_with_the_workflows_labels() -> None:
    wf = owner(
        "argoproj.io/v1alpha1", "Workflow", "wf", labels={"kai.scheduler/queue": "etl", "priorityClassName": "build"}
    )
    g = group(pod("wf-step-1", owned_by=wf), wf)
    assert (g.podgroup.meta.name, g.podgroup.min_member, g.podgroup.queue, g.podgroup.priority_class_name) == (
        "pg-wf-step-1",
        1,
        "etl",
        "build",
    )
    assert g.grouper == "pod"


def test_argo_workflow_that_made_a_pytorchjob_is_grouped_by_the_pytorchjob() -> None:
    wf = owner("argoproj.io/v1alpha1", "Workflow", "wf", labels={"kai.scheduler/queue": "etl"})
    spec = {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}}
    pt = owner("kubeflow.org/v1", "PyTorchJob", "pt", owned_by=wf, spec=spec, labels={"team": "ml"})
    g = group(pod("pt-worker-0", owned_by=pt, labels={"training.kubeflow.org/replica-type": "worker"}), pt, wf)
    assert (g.podgroup.meta.name, g.podgroup.min_member, g.podgroup.queue, g.grouper) == (
        "pg-pt",
        3,
        "etl",
        "pytorchjob",
    )
    assert g.podgroup.meta.labels == {"kai.scheduler/queue": "etl", "team": "ml"}
    assert subgroups(g.podgroup) == [("master", 1, None, None), ("worker", 2, None, None)]


def test_trainjob_is_grouped_by_its_jobset() -> None:
    tj = owner("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", labels={"kai.scheduler/queue": "ml"})
    rj = {"name": "node", "replicas": 2, "template": {"spec": {"parallelism": 1}}}
    js = owner("jobset.x-k8s.io/v1alpha2", "JobSet", "tj", owned_by=tj, spec={"replicatedJobs": [rj]})
    job = owner("batch/v1", "Job", "tj-node-0", owned_by=js)
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": "node", "jobset.sigs.k8s.io/job-index": "0"}
    g = group(pod(owned_by=job, labels=labels), job, js, tj)
    assert (g.podgroup.meta.name, g.podgroup.queue, g.podgroup.min_subgroup, g.grouper) == ("pg-tj", "ml", 1, "jobset")
