"""The default grouper and the rules every kind shares (reference sections 3 and 7): naming, queue,
priority class, preemptibility, durations, topology, skip-podgrouper, unknown kinds."""

from __future__ import annotations

import pytest

from kai.api.errors import ManifestError
from kai.api.objects import TopologyConstraint
from kai.podgrouper import group_pod, lookup
from tests.unit.podgrouper.helpers import group, owner, pg, pod

QUEUE = "kai.scheduler/queue"


def test_bare_pod_with_a_kubernetes_uid_is_named_pg_pod_uid() -> None:
    g = pg(pod("solo", uid="1234-abcd"))
    assert (g.meta.name, g.min_member, g.queue, g.priority_class_name) == (
        "pg-solo-1234-abcd",
        1,
        "default-queue",
        "train",
    )
    assert g.meta.owner_references[0].kind == "Pod"
    assert g.generated


def test_bare_pod_without_uid_keeps_kai_sims_short_name() -> None:
    assert pg(pod("solo")).meta.name == "pg-solo"


def test_owned_pod_is_named_after_the_top_owner() -> None:
    sts = owner("apps/v1", "StatefulSet", "db", uid="u-1")
    g = group(pod("db-0", owned_by=sts), sts)
    assert (g.podgroup.meta.name, g.grouper, g.top_owner.ref) == ("pg-db-u-1", "default", "StatefulSet/default/db")
    assert g.podgroup.meta.owner_references[0].name == "db"


# (top-owner labels, pod labels) → queue, and the object/field it came from
QUEUE_CASES = [
    ({QUEUE: "team-a"}, {QUEUE: "team-b"}, "team-a", "StatefulSet", f"metadata.labels.{QUEUE}"),
    ({}, {QUEUE: "team-b"}, "team-b", "Pod", f"metadata.labels.{QUEUE}"),
    ({"project": "proj"}, {QUEUE: "team-b"}, "team-b", "Pod", f"metadata.labels.{QUEUE}"),
    ({"project": "proj"}, {}, "proj", "StatefulSet", "metadata.labels.project"),
    ({}, {"project": "proj"}, "proj", "Pod", "metadata.labels.project"),
    ({}, {"project": "proj", "kai.scheduler/node-pool": "a100"}, "proj-a100", "Pod", "metadata.labels.project"),
    ({"project": ""}, {"project": "other"}, "default-queue", "StatefulSet", ""),
    ({}, {}, "default-queue", "StatefulSet", ""),
]


@pytest.mark.parametrize(("top_labels", "pod_labels", "queue", "kind", "field"), QUEUE_CASES)
def test_queue_order(top_labels: dict, pod_labels: dict, queue: str, kind: str, field: str) -> None:
    sts = owner("apps/v1", "StatefulSet", "db", labels=top_labels)
    g = group(pod("db-0", owned_by=sts, labels=pod_labels), sts)
    assert g.podgroup.queue == queue
    assert (g.queue_from.kind, g.queue_from.field) == (kind, field)


def test_priority_from_owner_label_then_pod_label_then_pod_spec_then_train() -> None:
    rs = owner("apps/v1", "ReplicaSet", "rs")
    labelled = owner("apps/v1", "ReplicaSet", "rs", labels={"priorityClassName": "build"})
    p_label = pod(owned_by=rs, labels={"priorityClassName": "inference"}, priority_class="build-preemptible")
    p_spec = pod(owned_by=rs, priority_class="build-preemptible")
    assert (
        pg(pod(owned_by=labelled, labels={"priorityClassName": "inference"}), labelled).priority_class_name == "build"
    )
    assert pg(p_label, rs).priority_class_name == "inference"
    g = group(p_spec, rs)
    assert (g.podgroup.priority_class_name, g.priority_from.field) == ("build-preemptible", "spec.priorityClassName")
    g = group(pod(owned_by=rs), rs)
    assert (g.podgroup.priority_class_name, g.priority_from.field) == ("train", "")


def test_priority_class_that_does_not_exist_is_passed_over_when_classes_are_known() -> None:
    """KAI validates a named class against the cluster and moves to the next owner. Per owner it reads the
    owner's label first, so an unknown class there hides the pod's own spec: the kind default wins."""
    job = owner("batch/v1", "Job", "j", labels={"priorityClassName": "platinum"})
    p = pod(owned_by=job, priority_class="build")
    g = group_pod(p, [job], priority_classes={"train", "build"})
    assert g is not None and g.podgroup.priority_class_name == "train"
    plain = owner("batch/v1", "Job", "j")
    g = group_pod(pod(owned_by=plain, priority_class="platinum"), [plain], priority_classes={"train"})
    assert g is not None and g.podgroup.priority_class_name == "train"
    unchecked = group_pod(p, [job])
    assert unchecked is not None and unchecked.podgroup.priority_class_name == "platinum"


def test_preemptibility_owner_label_then_pod_label() -> None:
    rs = owner("apps/v1", "ReplicaSet", "rs", labels={"kai.scheduler/preemptibility": "non-preemptible"})
    assert pg(pod(owned_by=rs, labels={"kai.scheduler/preemptibility": "preemptible"}), rs).preemptibility == (
        "non-preemptible"
    )
    plain = owner("apps/v1", "ReplicaSet", "rs")
    assert pg(pod(owned_by=plain, labels={"kai.scheduler/preemptibility": "preemptible"}), plain).preemptibility == (
        "preemptible"
    )
    assert pg(pod(owned_by=plain), plain).preemptibility == ""


def test_bad_preemptibility_names_object_and_field() -> None:
    rs = owner("apps/v1", "ReplicaSet", "rs", labels={"kai.scheduler/preemptibility": "sometimes"})
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=rs), rs)
    assert (info.value.obj, info.value.field) == (
        "ReplicaSet/default/rs",
        "metadata.labels.kai.scheduler/preemptibility",
    )


def test_durations_from_owner_then_pod() -> None:
    rs = owner("apps/v1", "ReplicaSet", "rs", annotations={"kai.scheduler/preemption-delay": "2m"})
    p = pod(owned_by=rs, annotations={"kai.scheduler/staleness-grace-period": "-1s"})
    g = pg(p, rs)
    assert (g.preemption_delay, g.staleness_grace_period) == (120.0, -1.0)


@pytest.mark.parametrize(("value", "message"), [("soon", "not a duration"), ("-5s", "must not be negative")])
def test_bad_preemption_delay_names_object_and_field(value: str, message: str) -> None:
    rs = owner("apps/v1", "ReplicaSet", "rs", annotations={"kai.scheduler/preemption-delay": value})
    with pytest.raises(ManifestError) as info:
        pg(pod(owned_by=rs), rs)
    assert (info.value.obj, info.value.field) == (
        "ReplicaSet/default/rs",
        "metadata.annotations.kai.scheduler/preemption-delay",
    )
    assert message in info.value.message


def test_topology_constraint_from_top_owner_annotations() -> None:
    ann = {
        "kai.scheduler/topology": "dc",
        "kai.scheduler/topology-required-placement": "rack",
        "kai.scheduler/topology-preferred-placement": "kubernetes.io/hostname",
    }
    sts = owner("apps/v1", "StatefulSet", "s", annotations=ann)
    assert pg(pod(owned_by=sts), sts).topology_constraint == TopologyConstraint("dc", "rack", "kubernetes.io/hostname")
    assert pg(pod(owned_by=sts, annotations={}), owner("apps/v1", "StatefulSet", "s")).topology_constraint is None


def test_top_owner_labels_and_annotations_are_copied_user_from_pod() -> None:
    sts = owner("apps/v1", "StatefulSet", "s", labels={"team": "x"}, annotations={"note": "y"})
    g = pg(pod(owned_by=sts, labels={"user": "ann", "kai.scheduler/node-pool": "a100"}), sts)
    assert g.meta.labels == {"team": "x", "user": "ann", "kai.scheduler/node-pool": "a100"}
    assert g.meta.annotations == {"note": "y"}


@pytest.mark.parametrize("where", ["pod-label", "pod-annotation", "owner-label", "owner-annotation"])
def test_skip_podgrouper_anywhere_leaves_the_pod_alone(where: str) -> None:
    flag = {"kai.scheduler/skip-podgrouper": "true"}
    rs = owner(
        "apps/v1",
        "ReplicaSet",
        "rs",
        labels=flag if where == "owner-label" else None,
        annotations=flag if where == "owner-annotation" else None,
    )
    p = pod(
        owned_by=rs,
        labels=flag if where == "pod-label" else None,
        annotations=flag if where == "pod-annotation" else None,
    )
    assert group_pod(p, [rs]) is None


def test_skip_podgrouper_false_groups_as_usual() -> None:
    assert group_pod(pod(labels={"kai.scheduler/skip-podgrouper": "false"})) is not None


def test_unknown_owner_kind_gets_the_default_grouper_and_a_reason() -> None:
    ds = owner("apps/v1", "DaemonSet", "agent", labels={QUEUE: "ops"})
    g = group(pod(owned_by=ds), ds)
    assert (g.podgroup.meta.name, g.podgroup.min_member, g.podgroup.queue, g.grouper) == (
        "pg-agent",
        1,
        "ops",
        "default",
    )
    assert "apps/v1 DaemonSet" in g.unknown_kind
    assert (
        group(pod(owned_by=owner("apps/v1", "StatefulSet", "s")), owner("apps/v1", "StatefulSet", "s")).unknown_kind
        == ""
    )


def test_registry_lookup_exact_version_only_for_listed_versions() -> None:
    assert lookup("ray.io/v1", "RayCluster") is lookup("ray.io/v1alpha1", "RayCluster")
    assert lookup("ray.io/v2", "RayCluster") is None
    assert lookup("v1", "Pod") is not None


def test_spark_pods_share_the_app_selector_group() -> None:
    labels = {"spark-app-name": "etl", "spark-app-selector": "spark-123"}
    driver, executor = pod("driver", labels=labels), pod("exec-1", labels=labels)
    assert pg(driver).meta.name == pg(executor).meta.name == "spark-123"
    assert pg(pod("half", labels={"spark-app-selector": "spark-123"})).meta.name == "pg-half"
