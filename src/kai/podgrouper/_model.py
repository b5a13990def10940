"""The pod-grouper's data: what a grouper is given (Request) and what it decides (Draft → Grouping).

Rules: everything here is plain data. A grouper never reads the network or a clock; what it needs
beyond the pod and its owner chain (a RayService's cluster, an MPIJob's launcher pod) it asks of a
ClusterView, which the caller backs with whatever it has (the embedded cluster's Store, informers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kai.api.errors import ManifestError
from kai.api.objects import Pod, PodGroup, SubGroup, TopologyConstraint, object_ref
from kai.api.workloads import Workload


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a value came from (object and field), so that an error about the value can point the user
    at what they wrote. ``field`` is empty when the value is a default."""

    kind: str
    namespace: str
    name: str
    field: str = ""

    @staticmethod
    def of(obj: Workload, field: str = "") -> Origin:
        return Origin(obj.kind, obj.meta.namespace or "", obj.meta.name, field)

    @property
    def ref(self) -> str:
        return object_ref(self.kind, self.namespace, self.name)


class ClusterView(Protocol):
    """Read-only lookups a grouper may need beyond the owner chain."""

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Workload | None:
        """The owner object of that kind and name, or None."""
        ...

    def pods(self, namespace: str, labels: Mapping[str, str]) -> Sequence[Pod]:
        """The pods of *namespace* carrying all of *labels*."""
        ...


class _NoCluster:
    """A ClusterView that knows nothing: groupers then work from the owner chain alone."""

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Workload | None:
        return None

    def pods(self, namespace: str, labels: Mapping[str, str]) -> Sequence[Pod]:
        return ()


NO_CLUSTER: ClusterView = _NoCluster()


@dataclass(frozen=True, slots=True)
class Request:
    """One pod to group. ``owners`` is KAI's allOwners: the pod's owner first, the top owner last; for a
    bare pod it is ``(top,)`` with the pod itself as the top owner."""

    pod: Pod
    top: Workload
    owners: tuple[Workload, ...]
    view: ClusterView
    priority_class_exists: Callable[[str], bool]
    registry: Callable[[str, str], Grouper | None]  # (apiVersion, kind) → grouper; for skip-top-owner


@dataclass(slots=True)
class Draft:
    """A PodGroup being decided (KAI's podgroup.Metadata): the default grouper fills it, kinds adjust it."""

    name: str
    namespace: str
    owner: Workload  # the PodGroup's owner: the top owner, or the pod itself (Deployment, Knative)
    labels: dict[str, str]
    annotations: dict[str, str]
    queue: str
    queue_from: Origin
    priority_class: str
    priority_from: Origin
    preemptibility: str
    min_member: int | None = 1  # None when min_subgroup decides (JobSet)
    min_subgroup: int | None = None
    subgroups: list[SubGroup] = field(default_factory=list)
    pod_subgroup: str | None = None  # the leaf subgroup this pod joins (label kai.scheduler/subgroup-name)
    topology: TopologyConstraint | None = None
    preemption_delay: float | None = None
    staleness_grace_period: float | None = None
    grouper: str = ""  # set when a grouper delegates (skip-top-owner): the one that decided


Grouper = Callable[[Request], Draft]


@dataclass(frozen=True, slots=True)
class Grouping:
    """The pod-grouper's answer for one pod: the PodGroup to create or update, and where the pod goes."""

    podgroup: PodGroup
    subgroup: str | None  # set the pod label kai.scheduler/subgroup-name to this
    grouper: str  # which grouper decided, e.g. "ray_cluster", "default"
    top_owner: Origin
    queue_from: Origin
    priority_from: Origin
    unknown_kind: str = ""  # non-empty: the top owner's kind has no grouper; why the default one was used
    # set: the owner's spec contradicts itself (OwnerSpecError); the default grouper made the PodGroup
    warning: ManifestError | None = None
