"""Deployment, ReplicaSet, StatefulSet, Job and CronJob controllers: what they create, named how."""

from __future__ import annotations

import copy

import pytest

from kai.api import constants as C
from kai.sim.controllers import apps, batch
from kai.sim.controllers._base import Names, suffix
from tests.unit.controllers.helpers import NOW, TEMPLATE, FakeView, made, names, with_phase, workload


def rs(replicas: int = 3) -> object:
    return workload(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "template": copy.deepcopy(TEMPLATE)},
        }
    )


def test_generated_names_are_deterministic_and_never_reused() -> None:
    first = Names(FakeView(), "default").generate("web-")
    assert first == "web-" + suffix("default/web-#0")
    assert Names(FakeView(), "default").generate("web-") == first
    again = Names(FakeView(taken={("Pod", first)}), "default").generate("web-")
    assert again != first and again.startswith("web-") and len(again) == len("web-") + 5


def test_replicaset_creates_missing_pods_from_the_template() -> None:
    owner = rs(3)
    result = apps.replicaset(owner, FakeView())
    pods = made(result)
    assert len(pods) == 3 and len(set(names(result))) == 3
    assert all(p.meta.labels == {"app": "a"} and p.meta.owner_references[0].name == "web" for p in pods)
    assert all(p.requests[C.RESOURCE_GPU] == 1 for p in pods)
    assert {c.maps for c in result.create} == {("", "spec.template")}


def test_replicaset_counts_active_pods_and_replaces_finished_or_deleted_ones() -> None:
    owner = rs(3)
    pods = made(apps.replicaset(owner, FakeView()))
    with_phase(pods[0], "Running")
    with_phase(pods[1], "Succeeded")
    pods[2].meta.deletion_timestamp = NOW
    view = FakeView(pods, taken={("Pod", p.meta.name) for p in pods})
    result = apps.replicaset(owner, view)
    assert len(result.create) == 2
    assert not set(names(result)) & {p.meta.name for p in pods}


def test_deployment_makes_one_replicaset_named_by_template_hash() -> None:
    dep = workload(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "template": copy.deepcopy(TEMPLATE)},
        }
    )
    result = apps.deployment(dep, FakeView())
    (child,) = made(result)
    hash_ = child.meta.labels[C.LABEL_POD_TEMPLATE_HASH]
    assert child.kind == "ReplicaSet" and child.meta.name == f"web-{hash_}"
    assert child.doc["spec"]["replicas"] == 2
    assert child.doc["spec"]["template"]["metadata"]["labels"] == {"app": "a", C.LABEL_POD_TEMPLATE_HASH: hash_}
    assert apps.deployment(dep, FakeView([child])).create == []


def sts(replicas: int, policy: str | None = None, start: int | None = None) -> object:
    spec = {"replicas": replicas, "template": copy.deepcopy(TEMPLATE)}
    if policy:
        spec["podManagementPolicy"] = policy
    if start is not None:
        spec["ordinals"] = {"start": start}
    return workload({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": spec})


def test_statefulset_ordered_ready_creates_one_pod_at_a_time() -> None:
    owner = sts(3)
    assert names(apps.statefulset(owner, FakeView())) == ["db-0"]
    (p0,) = made(apps.statefulset(owner, FakeView()))
    assert p0.meta.labels[C.LABEL_POD_INDEX] == "0" and p0.meta.labels[C.LABEL_STATEFULSET_POD_NAME] == "db-0"
    assert apps.statefulset(owner, FakeView([p0])).create == []  # db-0 is not Running yet
    assert names(apps.statefulset(owner, FakeView([with_phase(p0, "Running")]))) == ["db-1"]


def test_statefulset_parallel_and_ordinal_start() -> None:
    assert names(apps.statefulset(sts(3, "Parallel", start=1), FakeView())) == ["db-1", "db-2", "db-3"]


def test_statefulset_recreates_a_lost_pod_under_the_same_name() -> None:
    owner = sts(2, "Parallel")
    _, p1 = made(apps.statefulset(owner, FakeView()))
    assert names(apps.statefulset(owner, FakeView([p1]))) == ["db-0"]


def job(**spec: object) -> object:
    return workload(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {"template": copy.deepcopy(TEMPLATE), **spec},
        }
    )


@pytest.mark.parametrize(
    ("spec", "succeeded", "running", "expected"),
    [
        ({}, 0, 0, 1),
        ({"parallelism": 3}, 0, 0, 3),
        ({"parallelism": 3}, 1, 0, 0),  # no completions: done once one pod succeeded
        ({"parallelism": 2, "completions": 5}, 0, 1, 1),
        ({"parallelism": 2, "completions": 5}, 4, 0, 1),
        ({"parallelism": 2, "completions": 5}, 5, 0, 0),
        ({"parallelism": 2, "suspend": True}, 0, 0, 0),
    ],
)
def test_job_keeps_the_right_number_of_pods_active(spec: dict, succeeded: int, running: int, expected: int) -> None:
    owner = job(**spec)
    pods = []
    for i in range(succeeded + running):
        (p,) = made(batch.job(job(), FakeView(taken={("Pod", q.meta.name) for q in pods})))
        p.meta.name = f"p{i}"
        pods.append(with_phase(p, "Succeeded" if i < succeeded else "Running"))
    result = batch.job(owner, FakeView(pods))
    assert len(result.create) == expected
    for p in made(result):
        assert p.meta.labels[C.LABEL_JOB_NAME] == "train" and p.meta.labels[C.LABEL_JOB_NAME_LEGACY] == "train"
        assert p.meta.name.startswith("train-")


def test_indexed_job_names_and_labels_each_index() -> None:
    owner = job(parallelism=2, completions=3, completionMode="Indexed")
    first = made(batch.job(owner, FakeView()))
    assert [p.meta.labels[C.LABEL_JOB_COMPLETION_INDEX] for p in first] == ["0", "1"]
    assert [p.meta.name[: len("train-0-")] for p in first] == ["train-0-", "train-1-"]
    assert first[0].meta.annotations[C.LABEL_JOB_COMPLETION_INDEX] == "0"
    with_phase(first[0], "Succeeded")
    with_phase(first[1], "Running")
    (nxt,) = made(batch.job(owner, FakeView(first)))
    assert nxt.meta.labels[C.LABEL_JOB_COMPLETION_INDEX] == "2"


def test_cronjob_creates_one_job_named_by_the_scheduled_minute() -> None:
    cron = workload(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly"},
            "spec": {
                "schedule": "0 1 * * *",
                "jobTemplate": {"metadata": {"labels": {"kai.scheduler/queue": "q"}}, "spec": {"template": TEMPLATE}},
            },
        }
    )
    result = batch.cronjob(cron, FakeView())
    (child,) = made(result)
    assert (child.kind, child.meta.name, child.meta.labels) == (
        "Job",
        f"nightly-{int(NOW // 60)}",
        {"kai.scheduler/queue": "q"},
    )
    assert result.create[0].maps == ("", "spec.jobTemplate")
    assert batch.cronjob(cron, FakeView([child])).create == []
