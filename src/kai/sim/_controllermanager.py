"""The embedded cluster's controller manager: runs the workload controllers until nothing more is made.

Every owner the cluster holds is reconciled, in the order it was created, round after round, until a
round creates nothing (a RayService makes a RayCluster, which then makes pods; owners nest a few levels
deep). What a controller makes is admitted (the simulated operators' pod webhooks), parsed like a
manifest, dated, recorded with its owner and the owner's field it came from (so an error about it names
what the user wrote), and handed to the cluster as a new object.
"""

from __future__ import annotations

from collections.abc import Callable

from kai.api.errors import ManifestError
from kai.api.objects import Pod, parse_pod
from kai.api.workloads import Workload, parse_workload
from kai.scheduler.decisions import Event
from kai.sim import checks
from kai.sim._changes import updated
from kai.sim._origins import MAX_OWNER_CHAIN, ObjKey, Origins, SimObject, remap
from kai.sim.controllers import ADMISSION, controller_for
from kai.sim.controllers._base import Created
from kai.store import Store, key_of

MAX_CONTROLLER_ROUNDS = 32  # owners nest a few levels deep (RayService → RayCluster → pods); this is ample


class ControllerView:
    """The controllers' View over the embedded cluster (a snapshot of the owner index for one round)."""

    def __init__(
        self,
        now: float,
        index: dict[tuple[str, str, str], list[SimObject]],
        names_used: set[tuple[str, str, str]],
    ) -> None:
        self._now = now
        self._index = index
        self._names_used = names_used

    @property
    def now(self) -> float:
        return self._now

    def children(self, owner: Workload | Pod) -> list[Workload | Pod]:
        found = self._index.get((owner.kind, owner.meta.namespace or "", owner.meta.name), [])
        return [o for o in found if isinstance(o, (Workload, Pod))]

    def taken(self, kind: str, namespace: str, name: str) -> bool:
        return (kind, namespace, name) in self._names_used


class ControllerManager:
    """See the module docstring. *put_new(obj, source)* adds a made object to the cluster."""

    def __init__(
        self, store: Store, origins: Origins, events: list[Event], put_new: Callable[[SimObject, str], None]
    ) -> None:
        self.store = store
        self.origins = origins
        self.events = events
        self._put_new = put_new
        self.workloads: list[ObjKey] = []  # every Workload, in creation order (controllers run in this order)
        self.names_used: set[tuple[str, str, str]] = set()  # (kind, namespace, name) ever created

    def added(self, obj: SimObject) -> None:
        """*obj* is about to be stored as new: its name is taken for good, and an owner is reconciled."""
        self.names_used.add((obj.kind, obj.meta.namespace or "", obj.meta.name))
        if isinstance(obj, Workload) and self.store.get(obj.kind, key_of(obj)) is None:
            self.workloads.append((obj.kind, key_of(obj)))

    def children_index(self) -> dict[tuple[str, str, str], list[SimObject]]:
        """(owner kind, namespace, name) → the objects whose first owner reference names it."""
        index: dict[tuple[str, str, str], list[SimObject]] = {}
        objs: list[SimObject] = [*self.store.list("Pod")]
        objs += [w for k in self.workloads if (w := self.store.get(*k)) is not None]
        for obj in objs:
            if obj.meta.owner_references:
                ref = obj.meta.owner_references[0]
                index.setdefault((ref.kind, obj.meta.namespace or "", ref.name), []).append(obj)
        return index

    def run(self, now: float, *, dated_now: bool, strict: bool) -> None:
        """Reconcile every owner until none creates anything more. *dated_now*: made objects are created
        now (between cycles), else at their owner's creation time (the manifests given at the start). With
        strict=False (between cycles) an error becomes a Warning event instead."""
        if not self.workloads:
            return
        for _ in range(MAX_CONTROLLER_ROUNDS):
            view = ControllerView(now, self.children_index(), self.names_used)
            created = False
            for key in list(self.workloads):
                owner = self.store.get(*key)
                if not isinstance(owner, Workload) or (reconcile := controller_for(owner)) is None:
                    continue
                try:
                    result = reconcile(owner, view)
                    if result.status:
                        status = {**(owner.doc.get("status") or {}), **result.status}
                        owner = updated(self.store, owner, doc={**owner.doc, "status": status})
                    for made in result.create:
                        self._create(made, owner, now if dated_now else owner.meta.creation_timestamp)
                        created = True
                except ManifestError as e:
                    err = self.origins.relocate(e if e.obj else e.located(obj=owner.ref))
                    if strict:
                        raise err from None
                    self.events.append(Event(owner.ref, "Warning", "ControllerError", err.message))
            if not created:
                return

    def _create(self, made: Created, owner: Workload, created_at: float | None) -> None:
        doc = made.doc
        if doc.get("kind") == "Pod":
            for admit in ADMISSION:
                admit(doc)
        obj: SimObject
        source = self.origins.source(owner)
        try:
            obj = parse_pod(doc) if doc.get("kind") == "Pod" else parse_workload(doc)
        except ManifestError as e:
            mapped = remap(e.field, made.maps)
            field = mapped if mapped is not None else e.field
            raise ManifestError(e.message, source=source, obj=owner.ref, field=field) from None
        obj.meta.creation_timestamp = created_at
        if isinstance(obj, Pod) and self.store.count("Pod") >= checks.MAX_SIM_PODS:
            raise ManifestError(
                f"makes pods past the {checks.MAX_SIM_PODS:,} kai sim holds at once", source=source, obj=owner.ref
            )
        self.origins.record_made(obj, owner, made.maps)
        self._put_new(obj, source)

    # --- the owner tree, for the cluster's TTL controller (collect_finished) -----------------------

    def top_owner(self, pod: Pod) -> ObjKey | None:
        """The Workload at the top of the pod's owner chain (None: the pod has no Workload owner)."""
        obj: SimObject = pod
        top: ObjKey | None = None
        for _ in range(MAX_OWNER_CHAIN):
            if not obj.meta.owner_references:
                break
            ref = obj.meta.owner_references[0]
            nxt = self.store.get(ref.kind, (obj.meta.namespace or "", ref.name))
            if not isinstance(nxt, Workload):
                break
            obj, top = nxt, (nxt.kind, key_of(nxt))
        return top

    def _descendants(self, owner: ObjKey, index: dict[tuple[str, str, str], list[SimObject]]) -> list[SimObject]:
        kind, (ns, name) = owner
        out: list[SimObject] = []
        for child in index.get((kind, ns, name), []):
            out.append(child)
            if isinstance(child, Workload):
                out += self._descendants((child.kind, key_of(child)), index)
        return out

    def subtree_done(self, owner: ObjKey, index: dict[tuple[str, str, str], list[SimObject]]) -> bool:
        return all(o.phase == "Succeeded" for o in self._descendants(owner, index) if isinstance(o, Pod))

    def delete_subtree(self, owner: ObjKey, index: dict[tuple[str, str, str], list[SimObject]]) -> None:
        for obj in [*self._descendants(owner, index), self.store.get(*owner)]:
            if obj is None:
                continue
            self.store.delete(obj.kind, key_of(obj))
            if isinstance(obj, Workload):
                key = (obj.kind, key_of(obj))
                if key in self.workloads:
                    self.workloads.remove(key)
