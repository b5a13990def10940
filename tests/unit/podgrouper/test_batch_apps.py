"""batch/v1 Job and CronJob, apps/v1 Deployment, StatefulSet, ReplicaSet (reference section 7)."""

from __future__ import annotations

import pytest

from kai.api.errors import ManifestError
from tests.unit.podgrouper.helpers import FakeView, group, inconsistent, owner, pg, pod

BMM = "kai.scheduler/batch-min-member"


@pytest.mark.parametrize(("annotations", "min_member"), [(None, 1), ({BMM: "4"}, 4), ({BMM: "0"}, 0)])
def test_job(annotations: dict | None, min_member: int) -> None:
    job = owner("batch/v1", "Job", "train", annotations=annotations, labels={"kai.scheduler/queue": "team-a"})
    g = group(pod("train-x", owned_by=job), job)
    assert (g.podgroup.meta.name, g.podgroup.min_member, g.podgroup.queue, g.podgroup.priority_class_name) == (
        "pg-train",
        min_member,
        "team-a",
        "train",
    )
    assert g.grouper == "job"


@pytest.mark.parametrize("value", ["four", "4.0", " 4", "99999999999"])
def test_job_bad_batch_min_member_names_object_and_field(value: str) -> None:
    job = owner("batch/v1", "Job", "train", annotations={BMM: value})
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=job), job)
    assert (info.value.obj, info.value.field) == ("Job/default/train", f"metadata.annotations.{BMM}")
    assert repr(value) in info.value.message


def test_job_negative_batch_min_member_warns_and_falls_back() -> None:
    job = owner("batch/v1", "Job", "train", annotations={BMM: "-2"})
    warning = inconsistent(pod(owned_by=job), job)
    assert (warning.obj, warning.field) == ("Job/default/train", f"metadata.annotations.{BMM}")


def test_cronjob_groups_by_its_job_with_the_default_grouper() -> None:
    cron = owner("batch/v1", "CronJob", "nightly", labels={"kai.scheduler/queue": "cron-q"})
    job = owner("batch/v1", "Job", "nightly-100", owned_by=cron, annotations={BMM: "3"}, labels={"x": "y"})
    g = group(pod("nightly-100-abc", owned_by=job), job, cron)
    # Named after the Job; batch-min-member is not read (KAI's CronJob plugin calls the default grouper);
    # the queue comes from the Job's labels, which here carry none.
    assert (g.podgroup.meta.name, g.podgroup.min_member, g.podgroup.queue) == ("pg-nightly-100", 1, "default-queue")
    assert g.podgroup.meta.owner_references[0].kind == "Job"


def test_cronjob_finds_its_job_through_the_view_when_not_in_the_chain() -> None:
    cron = owner("batch/v1", "CronJob", "nightly")
    job = owner("batch/v1", "Job", "nightly-7", owned_by=cron, labels={"kai.scheduler/queue": "q"})
    p = pod(owned_by=job)
    assert pg(p, cron, view=FakeView([job])).queue == "q"


def test_deployment_one_group_per_pod_priority_inference() -> None:
    dep = owner("apps/v1", "Deployment", "web", labels={"kai.scheduler/queue": "serve"})
    rs = owner("apps/v1", "ReplicaSet", "web-abc", owned_by=dep)
    a, b = pod("web-abc-1", owned_by=rs, uid="u1"), pod("web-abc-2", owned_by=rs, uid="u2")
    ga, gb = pg(a, rs, dep), pg(b, rs, dep)
    assert (ga.meta.name, gb.meta.name) == ("pg-web-abc-1-u1", "pg-web-abc-2-u2")
    assert (ga.min_member, ga.queue, ga.priority_class_name) == (1, "serve", "inference")
    assert ga.meta.owner_references[0].kind == "Pod"


def test_deployment_priority_label_overrides_inference() -> None:
    dep = owner("apps/v1", "Deployment", "web", labels={"priorityClassName": "build"})
    rs = owner("apps/v1", "ReplicaSet", "web-abc", owned_by=dep)
    assert pg(pod(owned_by=rs), rs, dep).priority_class_name == "build"


@pytest.mark.parametrize("kind", ["StatefulSet", "ReplicaSet"])
def test_statefulset_and_replicaset_use_the_default_grouper(kind: str) -> None:
    top = owner("apps/v1", kind, "s", uid="uid-9")
    g = group(pod(owned_by=top), top)
    assert (g.podgroup.meta.name, g.podgroup.min_member, g.podgroup.priority_class_name, g.grouper) == (
        "pg-s-uid-9",
        1,
        "train",
        "default",
    )


def test_default_grouper_reads_priority_along_the_whole_chain() -> None:
    """For a kind grouped by the default grouper, every owner's label counts (pod's owner first)."""
    top = owner("example.com/v1", "Thing", "t", labels={"priorityClassName": "build"})
    sts = owner("apps/v1", "StatefulSet", "s", owned_by=top)
    assert pg(pod(owned_by=sts), sts, top).priority_class_name == "build"
