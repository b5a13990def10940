"""Builders for pod-grouper tests: owners from manifest fragments, pods with owner references."""

from __future__ import annotations

from typing import Any

from kai.api.errors import ManifestError
from kai.api.objects import Pod, PodGroup, parse_pod
from kai.api.workloads import Workload, parse_workload
from kai.podgrouper import NO_CLUSTER, ClusterView, Grouping, group_pod


def owner(
    api_version: str,
    kind: str,
    name: str,
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
    owned_by: Workload | None = None,
    namespace: str = "default",
) -> Workload:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if uid:
        meta["uid"] = uid
    if owned_by is not None:
        meta["ownerReferences"] = [_ref(owned_by)]
    doc: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec or {}}
    if status is not None:
        doc["status"] = status
    return parse_workload(doc)


def _ref(o: Workload) -> dict[str, Any]:
    return {"apiVersion": o.api_version, "kind": o.kind, "name": o.meta.name, "uid": o.meta.uid, "controller": True}


def pod(
    name: str = "p",
    *,
    owned_by: Workload | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str = "",
    node: str = "",
    uid: str | None = None,
    namespace: str = "default",
) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    meta["annotations"] = annotations or {}
    if uid:
        meta["uid"] = uid
    if owned_by is not None:
        meta["ownerReferences"] = [_ref(owned_by)]
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node:
        spec["nodeName"] = node
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def group(p: Pod, *owners: Workload, view: ClusterView = NO_CLUSTER) -> Grouping:
    """Group *p* whose owner chain is *owners* (the pod's owner first); it must not be skipped."""
    g = group_pod(p, owners, view=view)
    assert g is not None
    return g


def inconsistent(p: Pod, *owners: Workload, view: ClusterView = NO_CLUSTER) -> ManifestError:
    """Group *p* whose top owner's spec contradicts itself: the default grouper must have made one PodGroup of
    minMember 1 without subgroups, for the pod not to be stranded; returns the warning the caller reports."""
    g = group(p, *owners, view=view)
    assert g.warning is not None, "expected the owner's spec to be reported as inconsistent"
    assert (g.grouper, g.podgroup.min_member, g.podgroup.sub_groups, g.subgroup) == ("default", 1, (), None)
    return g.warning


def pg(p: Pod, *owners: Workload, view: ClusterView = NO_CLUSTER) -> PodGroup:
    return group(p, *owners, view=view).podgroup


def subgroups(g: PodGroup) -> list[tuple[str, int | None, int | None, str | None]]:
    """(name, minMember, minSubGroup, parent) per subgroup, in order."""
    return [(s.name, s.min_member, s.min_subgroup, s.parent) for s in g.sub_groups]


class FakeView:
    """A ClusterView over a fixed list of owners and pods."""

    def __init__(self, owners: list[Workload] = (), pods: list[Pod] = ()) -> None:  # type: ignore[assignment]
        self._owners = list(owners)
        self._pods = list(pods)

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Workload | None:
        return next(
            (o for o in self._owners if o.kind == kind and o.meta.name == name and o.meta.namespace == namespace), None
        )

    def pods(self, namespace: str, labels: dict[str, str]) -> list[Pod]:
        return [
            p
            for p in self._pods
            if p.meta.namespace == namespace and all(p.meta.labels.get(k) == v for k, v in labels.items())
        ]
