"""The embedded cluster's pod-grouper: every kai pod without a PodGroup gets one, as KAI's does.

The rules are ``kai.podgrouper`` (pure: a pod and its owner chain in, a Grouping out); this module does
what KAI's pod-grouper controller does around them, on the embedded cluster's Store: walk the pod's owner
chain (an owner missing from the input is an error naming the reference, one of a kind kai does not read
becomes a stand-in), create or update the generated PodGroup (``kai.podgrouper.updated_podgroup``), and
annotate the pod. A pod that names its PodGroup keeps it: the user's grouping wins in kai sim. An owner
whose spec contradicts itself gets a Warning naming the field, once, and its pods the default grouping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import ObjectMeta, Pod, PodGroup, Queue, QueueResource
from kai.api.workloads import WORKLOAD_KINDS, Workload, pod_as_owner
from kai.podgrouper import Grouping, group_pod, updated_podgroup
from kai.scheduler.decisions import Event
from kai.sim._changes import updated, updated_meta
from kai.sim._origins import MAX_OWNER_CHAIN, Origins, SimObject, ref_of
from kai.store import Key, Store, key_of


def default_queues() -> list[Queue]:
    """Helm's default-parent-queue and its child default-queue: quota 0, limit -1, weight 1."""
    res = {r: QueueResource(quota=0.0, limit=-1.0, over_quota_weight=1.0) for r in ("gpu", "cpu", "memory")}
    return [
        Queue(ObjectMeta(C.DEFAULT_PARENT_QUEUE, None, f"Queue/{C.DEFAULT_PARENT_QUEUE}"), resources=dict(res)),
        Queue(
            ObjectMeta(C.DEFAULT_QUEUE, None, f"Queue/{C.DEFAULT_QUEUE}"),
            parent=C.DEFAULT_PARENT_QUEUE,
            resources=dict(res),
        ),
    ]


def _needs_grouping(pod: Pod) -> bool:
    """A pod ``run`` acts on: another scheduler's is only capacity, one that names its PodGroup keeps it (a
    ``default-scheduler`` pod is still made kai's)."""
    if pod.scheduler_name == C.SCHEDULER_NAME:
        return C.ANNOTATION_POD_GROUP_NAME not in pod.meta.annotations
    return pod.scheduler_name == "default-scheduler"


class EmbeddedPodGrouper:
    """See the module docstring. Events it raises go to *events* (the cluster's, taken after a cycle)."""

    def __init__(self, store: Store, origins: Origins, events: list[Event]) -> None:
        self.store = store
        self.origins = origins
        self.events = events
        self.groupings: dict[Key, Grouping] = {}  # generated PodGroup → how the pod-grouper made it
        self._reported: set[Key] = set()
        self._warned: set[tuple[str, str, str]] = set()  # (object, field, message) of owner warnings given
        # the pods ``run`` looks at, kept by the Store as they change: a walk of every pod at each arrival and
        # each clock step was a few per cent of a saturated week's time simulation
        self._ungrouped = store.index("Pod", _needs_grouping)

    def _owner(self, obj: SimObject) -> Workload:
        """The object's first owner as the pod-grouper sees it (an owning pod is seen as a Workload). A
        missing owner of a kind kai does not read gets a stand-in made from the reference alone (its labels
        are unknown); a missing owner of a kind kai reads is an error."""
        ref = obj.meta.owner_references[0]
        ns = obj.meta.namespace or "default"
        found = self.store.get(ref.kind, (ns, ref.name))
        if isinstance(found, Pod):
            return pod_as_owner(found)
        if isinstance(found, Workload):
            if ref.uid and ref.uid != found.meta.uid and "/" not in ref.uid and "/" not in found.meta.uid:
                raise self.origins.error(
                    obj,
                    "metadata.ownerReferences[0].uid",
                    f"{ref.kind} {ns}/{ref.name} has uid {found.meta.uid}, not {ref.uid}",
                )
            return found
        if (ref.api_version, ref.kind) in WORKLOAD_KINDS or ref.kind == "Pod":
            raise self.origins.error(
                obj,
                "metadata.ownerReferences[0]",
                f"owner {ref.kind} {ns}/{ref.name} does not exist (apply it too)",
            )
        stand_in = Workload(
            meta=ObjectMeta(ref.name, ns, ref.uid or f"{ref.kind}/{ns}/{ref.name}"),
            api_version=ref.api_version,
            kind=ref.kind,
            doc={},
        )
        return stand_in

    def _owner_chain(self, pod: Pod) -> list[Workload]:
        chain: list[Workload] = []
        obj: SimObject = pod
        seen: set[str] = set()
        while obj.meta.owner_references and len(chain) < MAX_OWNER_CHAIN:
            owner = self._owner(obj)
            if owner.ref in seen:
                message = f"owner reference cycle through {owner.ref}"
                raise self.origins.error(obj, "metadata.ownerReferences[0]", message)
            seen.add(owner.ref)
            chain.append(owner)
            if owner.kind == "Pod":
                nxt = self.store.get("Pod", key_of(owner))
                if nxt is None:
                    break
                obj = nxt
            elif self.store.get(owner.kind, key_of(owner)) is owner:
                obj = owner
            else:
                break  # a stand-in: nothing is known above it
        return chain

    def run(self, *, strict: bool) -> None:
        """KAI's pod-grouper for every kai pod without a pod-group-name annotation (a pod that names its
        PodGroup keeps it: the user's grouping wins in kai sim)."""
        view = _GrouperView(self.store)
        for pod in list(self._ungrouped.values()):  # in the order they needed a group (added, mostly)
            if pod.scheduler_name not in (C.SCHEDULER_NAME, "default-scheduler"):
                continue  # another scheduler's pod: it only takes node capacity
            if pod.scheduler_name != C.SCHEDULER_NAME:  # kai sim schedules every pod with no other scheduler named
                pod = updated(self.store, pod, scheduler_name=C.SCHEDULER_NAME)
            if C.ANNOTATION_POD_GROUP_NAME in pod.meta.annotations:
                continue
            try:
                grouping = group_pod(pod, self._owner_chain(pod), view=view)
            except ManifestError as e:
                err = self.origins.relocate(e if e.obj else e.located(obj=ref_of(pod)))
                if strict:
                    raise err from None
                self.events.append(Event(ref_of(pod), "Warning", "PodGrouperWarning", err.message))
                continue
            if grouping is not None:
                self._adopt(pod, grouping)

    def _adopt(self, pod: Pod, grouping: Grouping) -> None:
        """Create or update the generated PodGroup and patch the pod, as the pod-grouper does."""
        pg = grouping.podgroup
        key = key_of(pg)
        existing = self.store.get("PodGroup", key)
        if existing is not None and existing.generated:
            pg = updated_podgroup(existing, pg)
        if existing is None or existing.generated:
            if existing is None and pg.meta.creation_timestamp is None:
                pg.meta.creation_timestamp = pod.meta.creation_timestamp
            if pg.queue == C.DEFAULT_QUEUE and self.store.get("Queue", ("", C.DEFAULT_QUEUE)) is None:
                for q in default_queues():
                    q.meta.creation_timestamp = 0.0
                    self.store.put(q)
            top = grouping.top_owner
            self.origins.same_source(pg, (top.kind, (top.namespace, top.name)))
            self.groupings[key] = grouping
            if pg is not existing:
                self.store.put(pg)
            if grouping.unknown_kind and key not in self._reported:
                self._reported.add(key)
                message = f"{grouping.unknown_kind}: PodGroup {pg.meta.namespace}/{pg.meta.name} for {top.ref}"
                self.events.append(Event(top.ref, "Normal", "UnknownOwnerKind", message))
            if grouping.warning is not None:
                self._warn_owner(grouping.warning, pg)
        labels = {**pod.meta.labels, C.LABEL_SUBGROUP_NAME: grouping.subgroup} if grouping.subgroup else pod.meta.labels
        annotations = {**pod.meta.annotations, C.ANNOTATION_POD_GROUP_NAME: pg.meta.name}
        updated_meta(self.store, pod, annotations=annotations, labels=labels)

    def _warn_owner(self, warning: ManifestError, pg: PodGroup) -> None:
        """An owner whose spec contradicts itself: a Warning on the object the user wrote (a RayService, not
        the RayCluster it made), naming the field, once per problem; its pods were grouped by default."""
        err = self.origins.relocate(warning)
        if (err.obj, err.field, err.message) in self._warned:
            return
        self._warned.add((err.obj, err.field, err.message))
        message = (
            f"{err.field}: {err.message}; its pods are grouped by the default rule instead "
            f"(PodGroup {pg.meta.namespace}/{pg.meta.name}, minMember {pg.min_member})"
        )
        self.events.append(Event(err.obj, "Warning", "PodGrouperWarning", message))


class _GrouperView:
    """The pod-grouper's ClusterView over the embedded cluster's Store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Workload | None:
        found = self._store.get(kind, (namespace, name))
        return found if isinstance(found, Workload) else None

    def pods(self, namespace: str, labels: Mapping[str, str]) -> Sequence[Pod]:
        return [
            p
            for p in self._store.list("Pod")
            if (p.meta.namespace or "") == namespace and all(p.meta.labels.get(k) == v for k, v in labels.items())
        ]
