"""group_pod: the pod-grouper's entry point (KAI's pod controller reconcile, without the API calls)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kai.api import constants as C
from kai.api.errors import OwnerSpecError
from kai.api.objects import ObjectMeta, OwnerReference, Pod, PodGroup
from kai.api.workloads import Workload, pod_as_owner
from kai.podgrouper._default import default, origin
from kai.podgrouper._model import NO_CLUSTER, ClusterView, Draft, Grouping, Request
from kai.podgrouper._registry import lookup


def skips_podgrouper(pod: Pod, owners: Sequence[Workload]) -> bool:
    """``kai.scheduler/skip-podgrouper: "true"`` (label or annotation, on the pod or any owner): the PodGroup
    is managed by someone else, so the pod-grouper leaves the pod alone."""
    objs: tuple[Pod | Workload, ...] = (pod, *owners)
    for obj in objs:
        for values in (obj.meta.labels, obj.meta.annotations):
            if values.get(C.SKIP_PODGROUPER, "").lower() == "true":
                return True
    return False


def group_pod(
    pod: Pod,
    owners: Sequence[Workload] = (),
    *,
    view: ClusterView = NO_CLUSTER,
    priority_classes: Collection[str] | None = None,
) -> Grouping | None:
    """The PodGroup KAI's pod-grouper would make for *pod*, or None when the pod opts out.

    *owners* is the pod's owner chain as objects, the pod's own owner first and the top owner last (empty
    for a bare pod). *view* answers the few lookups beyond the chain. *priority_classes*, when given, are
    the classes that exist: a label naming another class is passed over, as KAI does; when None, every
    named class is taken (the caller checks them, as kai sim does, to report a missing class as an error).
    Bad values in the manifests raise ManifestError naming the object and the field; an owner whose spec
    contradicts itself (OwnerSpecError) gets the default grouper instead, with ``Grouping.warning`` set.
    """
    if skips_podgrouper(pod, owners):
        return None
    top = owners[-1] if owners else pod_as_owner(pod)
    chain = tuple(owners) if owners else (top,)
    grouper = lookup(top.api_version, top.kind)
    unknown = ""
    if grouper is None:
        grouper = default
        unknown = (
            f"kai has no grouper for {top.api_version} {top.kind}; the default grouper made one gang of minMember 1"
        )

    def exists(name: str) -> bool:
        return priority_classes is None or name in priority_classes

    req = Request(pod, top, chain, view, exists, lookup)
    warning = None
    try:
        d = grouper(req)
    except OwnerSpecError as e:
        # kai's rule (KAI leaves the pod ungrouped and retries): an inconsistent owner must not strand its
        # pods, so they get the default grouping and the caller warns on the owner.
        d, warning = default(req), e
    return Grouping(
        podgroup=_podgroup(d, pod),
        subgroup=d.pod_subgroup,
        grouper="default" if warning else d.grouper or getattr(grouper, "__name__", "default"),
        top_owner=origin(top),
        queue_from=d.queue_from,
        priority_from=d.priority_from,
        unknown_kind=unknown,
        warning=warning,
    )


def _podgroup(d: Draft, pod: Pod) -> PodGroup:
    labels = dict(d.labels)
    if C.LABEL_NODE_POOL not in labels and C.LABEL_NODE_POOL in pod.meta.labels:
        labels[C.LABEL_NODE_POOL] = pod.meta.labels[C.LABEL_NODE_POOL]  # addNodePoolLabel
    owner = d.owner
    return PodGroup(
        meta=ObjectMeta(
            name=d.name,
            namespace=d.namespace,
            uid=f"PodGroup/{d.namespace}/{d.name}",
            labels=labels,
            annotations=dict(d.annotations),
            creation_timestamp=owner.meta.creation_timestamp,
            owner_references=(OwnerReference(owner.api_version, owner.kind, owner.meta.name, owner.meta.uid),),
        ),
        # A PodGroup with minSubGroup has no minMember; kai's model reads an absent minMember as 1, as
        # parse_podgroup does for an applied PodGroup.
        min_member=1 if d.min_member is None else d.min_member,
        queue=d.queue,
        priority_class_name=d.priority_class,
        preemptibility=d.preemptibility,
        min_subgroup=d.min_subgroup,
        sub_groups=tuple(d.subgroups),
        topology_constraint=d.topology,
        preemption_delay=d.preemption_delay,
        staleness_grace_period=d.staleness_grace_period,
        generated=True,
    )
