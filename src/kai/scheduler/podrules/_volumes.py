"""Volumes: kube-scheduler's VolumeBinding and NodeVolumeLimits, for the PersistentVolumeClaims of a pod.

For each claim of the pod (its namespace):

* missing, or being deleted: no node (the reason names the claim);
* bound to a PersistentVolume: only nodes the volume's ``nodeAffinity`` allows;
* chosen earlier in this cycle (another pod of the claim was placed): the same volume, or the same node if
  it is being provisioned;
* unbound with ``volume.kubernetes.io/selected-node`` (provisioning under way): only that node;
* unbound, no class, or a class that binds ``Immediate``: no node yet (the PV controller binds it first);
* unbound with a ``WaitForFirstConsumer`` class (a missing class names itself): nodes where a free volume of
  the class fits it (size, access modes, volume mode, the claim's selector, the volume's node affinity), or
  where the class can provision one (not ``kubernetes.io/no-provisioner``, no claim selector, the node in its
  ``allowedTopologies``). Two unbound claims of one pod never share a volume.

When such a pod is placed, the book (``VolumeBook``) chooses, as kube-scheduler does, the smallest free
volume that fits on that node, else provisioning there, and keeps the choice for the rest of the cycle (other
claims cannot take that volume; a rollback gives it back). The choice goes into ``Session.volume_bindings``,
and from there into the pod's Bind decision: the backend binds the volume first.

Attach limits (CSINode ``allocatable.count``, per CSI driver): a node fits if the volumes already attached
there (counted once each, by the pods holding or releasing the node) plus the pod's volumes not yet there stay
within the limit. A bound volume counts by its PersistentVolume, an unbound claim by itself.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from kai.api import constants as C
from kai.api.objects import Pod, SelectorTerm
from kai.api.storage import WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim
from kai.scheduler.decisions import VolumeBinding
from kai.scheduler.podrules._rule import Answer, CountedRule
from kai.scheduler.podrules._shared import NONE, SessionPods
from kai.scheduler.predicates import selector_terms_fit

ClaimKey = tuple[str, str]  # (namespace, name)
_NOWHERE = -1


@dataclass(slots=True)
class _Pick:
    volume: str  # "" = provisioned
    node: int
    pods: int  # pods of the cycle holding this choice


class _Shape:
    """The free volumes claims of one kind may take: per node row, how many free ones are pinned to exactly
    that node (local volumes: kept as counts, so a mask is one comparison), and the others, listed."""

    def __init__(self, book: VolumeBook, volumes: list[PersistentVolume]) -> None:
        self.volumes = sorted(volumes, key=lambda v: (v.capacity, v.meta.name))
        self.free_pinned = np.zeros(book.n, dtype=np.int64)
        self.pinned: dict[int, list[PersistentVolume]] = {}
        self._row_of: dict[str, int] = {}
        self.others: list[PersistentVolume] = []
        for pv in self.volumes:
            row = book.pinned_row(pv)
            if row is None:
                self.others.append(pv)
            elif row != _NOWHERE:
                self.pinned.setdefault(row, []).append(pv)
                self._row_of[pv.meta.name] = row
                if pv.meta.name not in book.taken:
                    self.free_pinned[row] += 1

    def taken(self, volume: str, delta: int) -> None:
        row = self._row_of.get(volume)
        if row is not None:
            self.free_pinned[row] -= delta


class VolumeBook:
    """The volume choices of one Session and the attached-volume counts (see the module docstring)."""

    def __init__(self, pods: SessionPods) -> None:
        ssn = pods.ssn
        self.pods = pods
        self.ssn = ssn
        self.storage = ssn.snap.storage
        self.n = ssn.snap.nodes.n
        self.node_row = {name: i for i, name in enumerate(ssn.snap.nodes.names)}
        self.picks: dict[ClaimKey, _Pick] = {}
        self.taken: dict[str, ClaimKey] = {}  # volume -> the claim that took it this cycle
        self._affinity: dict[str, np.ndarray] = {}
        self._topologies: dict[str, np.ndarray] = {}
        self._by_class: dict[str, list[PersistentVolume]] = {}
        self._prebound: dict[ClaimKey, list[PersistentVolume]] = {}
        for pv in self.storage.volumes.values():
            if pv.meta.deletion_timestamp is not None:
                continue
            if pv.claim_ref is None:
                self._by_class.setdefault(pv.storage_class, []).append(pv)
            else:
                self._prebound.setdefault((pv.claim_ref.namespace, pv.claim_ref.name), []).append(pv)
        self._shapes: dict[Hashable, _Shape] = {}
        self._shapes_of: dict[str, list[_Shape]] = {}  # volume -> the shapes it belongs to
        self.version = 1  # moves with every choice this cycle: the volume rules recompute when it has
        self._hostnames: dict[str, int] | None = None
        # attach limits: per CSI driver with a limit somewhere, per node the limit and the attached volumes
        limits = self.storage.attach_limits
        self.drivers = sorted({d for per_node in limits.values() for d in per_node})
        self.limit = {d: np.full(self.n, np.iinfo(np.int64).max, dtype=np.int64) for d in self.drivers}
        for node, per_node in limits.items():
            row = self.node_row.get(node)
            if row is not None:
                for d, count in per_node.items():
                    self.limit[d][row] = count
        self.attached = {d: np.zeros(self.n, dtype=np.int64) for d in self.drivers}
        self._on_node: dict[tuple[int, str], int] = {}  # (node, volume id) -> pods using it there
        self.nodes_of: dict[str, set[int]] = {}  # volume id -> nodes it is attached to
        if self.drivers:
            for pid, pod in enumerate(pods.pods):
                if pod.claims:
                    node, state = pods.where(pid)
                    if state != NONE:
                        self._attach(pod, node, 1)

    # --- what a claim is --------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.storage.claims.get((namespace, name))

    def is_bound(self, pvc: PersistentVolumeClaim) -> bool:
        return pvc.bound

    def _nodes(self, cache: dict[str, np.ndarray], key: str, terms: tuple[SelectorTerm, ...]) -> np.ndarray:
        """(n,) bool: nodes matching *terms* (every node without terms), cached under *key*."""
        got = cache.get(key)
        if got is None:
            ssn = self.ssn
            if terms:
                got = selector_terms_fit(ssn.snap.nodes, ssn.labels, terms)
            else:
                got = np.ones(self.n, dtype=bool)
            cache[key] = got
        return got

    def volume_affinity(self, pv: PersistentVolume) -> np.ndarray:
        return self._nodes(self._affinity, pv.meta.name, pv.node_affinity)

    def pinned_row(self, pv: PersistentVolume) -> int | None:
        """The one node a volume is pinned to by a single ``kubernetes.io/hostname In [name]`` (``_NOWHERE`` if
        no node has that name), else None."""
        terms = pv.node_affinity
        if len(terms) != 1 or len(terms[0].match_expressions) != 1 or terms[0].match_fields:
            return None
        r = terms[0].match_expressions[0]
        if r.key != C.LABEL_HOSTNAME or r.operator != "In" or len(r.values) != 1:
            return None
        if self._hostnames is None:
            values, present = self.ssn.labels.column(C.LABEL_HOSTNAME)
            seen: dict[str, int] = {}
            for row, v in enumerate(values.tolist()):
                if present[row]:
                    seen[v] = -1 if v in seen else row  # a hostname two nodes carry: not one node
            self._hostnames = seen
        row = self._hostnames.get(r.values[0])
        if row is None:
            return _NOWHERE  # pinned to a node that does not exist: it fits nowhere
        return row if row >= 0 else None

    def provisionable(self, pvc: PersistentVolumeClaim, class_name: str) -> np.ndarray:
        """(n,) bool: nodes the claim's class can provision a volume for."""
        cls = self.storage.classes.get(class_name)
        if cls is None or not cls.provisions or pvc.selector is not None:
            return np.zeros(self.n, dtype=bool)
        return self._nodes(self._topologies, class_name, cls.allowed_topologies)

    def shape(self, pvc: PersistentVolumeClaim, class_name: str) -> _Shape:
        """The volumes claims like *pvc* accept (class, size, access modes, volume mode, selector), shared by
        such claims: the PersistentVolumes of a StatefulSet's claims are counted once, not once per claim."""
        key = (class_name, pvc.request, frozenset(pvc.access_modes), pvc.volume_mode, pvc.selector)
        got = self._shapes.get(key)
        if got is None:
            fits = [
                pv
                for pv in self._by_class.get(class_name, ())
                if pv.claim_ref is None
                and pv.capacity >= pvc.request
                and pv.volume_mode == pvc.volume_mode
                and set(pvc.access_modes) <= set(pv.access_modes)
                and (pvc.selector is None or pvc.selector.matches(pv.meta.labels))
            ]
            got = self._shapes[key] = _Shape(self, fits)
            for pv in fits:
                self._shapes_of.setdefault(pv.meta.name, []).append(got)
        return got

    def is_free(self, pv: PersistentVolume, key: ClaimKey) -> bool:
        return self.taken.get(pv.meta.name, key) == key

    def free_mask(self, key: ClaimKey, pvc: PersistentVolumeClaim, class_name: str) -> np.ndarray:
        """(n,) bool: nodes where a free volume fits the claim."""
        shape = self.shape(pvc, class_name)
        ok = shape.free_pinned > 0
        for pv in shape.others:
            if self.is_free(pv, key):
                ok = ok | self.volume_affinity(pv)
        for pv in self._prebound.get(key, ()):
            if pv.storage_class == class_name and pv.capacity >= pvc.request and self.is_free(pv, key):
                ok = ok | self.volume_affinity(pv)
        return ok

    def free_at(self, key: ClaimKey, pvc: PersistentVolumeClaim, class_name: str, node: int) -> list[PersistentVolume]:
        """The free volumes that fit the claim on *node*, its pre-bound ones first, then smallest first."""
        shape = self.shape(pvc, class_name)
        mine = [
            pv
            for pv in self._prebound.get(key, ())
            if pv.storage_class == class_name
            and pv.capacity >= pvc.request
            and self.is_free(pv, key)
            and self.volume_affinity(pv)[node]
        ]
        others = [pv for pv in (*shape.pinned.get(node, ()), *shape.others) if self.is_free(pv, key)]
        others = [pv for pv in others if pv in shape.pinned.get(node, ()) or self.volume_affinity(pv)[node]]
        return mine + sorted(others, key=lambda v: (v.capacity, v.meta.name))

    def _take(self, volume: str, key: ClaimKey, delta: int) -> None:
        if delta > 0:
            self.taken[volume] = key
        else:
            self.taken.pop(volume, None)
        for shape in self._shapes_of.get(volume, ()):
            shape.taken(volume, delta)

    # --- choosing ----------------------------------------------------------------------------------

    def placed(self, task_index: int, pod: Pod, node: int) -> None:
        """*pod* (a task) was placed on *node*: choose volumes for its unbound claims, as kube-scheduler would."""
        namespace = pod.meta.namespace or ""
        bindings = []
        for name in pod.claims:
            key = (namespace, name)
            pvc = self.claim(namespace, name)
            if pvc is None or self.is_bound(pvc):
                continue
            pick = self.picks.get(key)
            if pick is None:
                pick = self._choose(key, pvc, node)
                if pick is None:
                    continue  # the rule refused every such node: only a direct placement gets here
                self.picks[key] = pick
                if pick.volume:
                    self._take(pick.volume, key, 1)
            else:
                pick.pods += 1
            bindings.append(VolumeBinding(namespace, name, pick.volume, self.ssn.snap.nodes.names[node]))
        if bindings:
            self.ssn.volume_bindings[task_index] = tuple(bindings)
        self.version += 1

    def _choose(self, key: ClaimKey, pvc: PersistentVolumeClaim, node: int) -> _Pick | None:
        if pvc.selected_node:
            return _Pick("", node, 1)
        if pvc.volume_name:
            return _Pick(pvc.volume_name, node, 1)
        class_name = self.storage.class_of(pvc)
        free = self.free_at(key, pvc, class_name, node)
        if free:
            return _Pick(free[0].meta.name, node, 1)
        if self.provisionable(pvc, class_name)[node]:
            return _Pick("", node, 1)
        return None

    def removed(self, task_index: int, pod: Pod) -> None:
        """*pod* left the node it was placed on this cycle (a rollback): give back what it chose."""
        self.ssn.volume_bindings.pop(task_index, None)
        namespace = pod.meta.namespace or ""
        for name in pod.claims:
            key = (namespace, name)
            pick = self.picks.get(key)
            if pick is None:
                continue
            pick.pods -= 1
            if pick.pods <= 0:
                del self.picks[key]
                if pick.volume and self.taken.get(pick.volume) == key:
                    self._take(pick.volume, key, -1)
        self.version += 1

    # --- attach limits -----------------------------------------------------------------------------

    def volumes_of(self, pod: Pod) -> list[tuple[str, str]]:
        """(volume id, CSI driver) of the pod's claims, for the drivers with limits."""
        namespace = pod.meta.namespace or ""
        out = []
        for name in pod.claims:
            key = (namespace, name)
            pvc = self.claim(namespace, name)
            if pvc is None:
                continue
            pick = self.picks.get(key)
            volume = pvc.volume_name if self.is_bound(pvc) else (pick.volume if pick is not None else "")
            pv = self.storage.volumes.get(volume) if volume else None
            if pv is not None:
                driver, vid = pv.csi_driver, f"pv/{volume}"
            else:
                cls = self.storage.classes.get(self.storage.class_of(pvc))
                driver, vid = (cls.provisioner if cls is not None else ""), f"pvc/{namespace}/{name}"
            if driver in self.attached:
                out.append((vid, driver))
        return out

    def _attach(self, pod: Pod, node: int, delta: int) -> None:
        on = self._on_node
        for vid, driver in self.volumes_of(pod):
            before = on.get((node, vid), 0)
            after = before + delta
            if after > 0:
                on[node, vid] = after
            else:
                on.pop((node, vid), None)
            if (before > 0) != (after > 0):
                self.attached[driver][node] += 1 if after > 0 else -1
                rows = self.nodes_of.setdefault(vid, set())
                (rows.add if after > 0 else rows.discard)(node)
        self.version += 1

    def changed(self, task_index: int, pod: Pod, old: tuple[int, int], new: tuple[int, int]) -> None:
        """A task with claims changed (node, state) from *old* to *new* (``on_task_change``): placed (from
        nowhere), or that undone (back to nowhere); an eviction or a move keeps its (bound) claims."""
        if self.drivers and old[1] != NONE:
            self._attach(pod, old[0], -1)
        if old[1] == NONE and new[1] != NONE:
            self.placed(task_index, pod, new[0])
        elif new[1] == NONE and old[1] != NONE:
            self.removed(task_index, pod)
        if self.drivers and new[1] != NONE:
            self._attach(pod, new[0], 1)


class VolumeRule(CountedRule):
    """Where a pod with these claims may go, given the book (see the module docstring)."""

    now_differs = False

    def __init__(self, book: VolumeBook, pod: Pod) -> None:
        self.book = book
        self.namespace = pod.meta.namespace or ""
        self.claims = pod.claims
        self._pod = pod
        super().__init__(book.n, [])
        self._seen = 0

    def _refresh(self) -> None:
        if self._seen != self.book.version:  # the book moved (a choice, an attachment): recompute whole
            self._seen = self.book.version
            self.stale()
        super()._refresh()

    def _claim_parts(self) -> list[tuple[str, np.ndarray]]:
        """(reason, rows passing) per claim (and per attach limit)."""
        book, n, ns = self.book, self.book.n, self.namespace
        none = np.zeros(n, dtype=bool)
        parts: list[tuple[str, np.ndarray]] = []
        unbound: list[tuple[ClaimKey, PersistentVolumeClaim, str]] = []

        def unusable(why: str) -> None:  # a claim no node can serve (yet): every row fails, the claim named
            parts.append((f"are unusable: {why}", none))

        for name in self.claims:
            key, ref = (ns, name), f"{ns}/{name}"
            pvc = book.claim(ns, name)
            if pvc is None:
                unusable(f"PersistentVolumeClaim {ref} does not exist")
                continue
            if pvc.meta.deletion_timestamp is not None:
                unusable(f"PersistentVolumeClaim {ref} is being deleted")
                continue
            pick = book.picks.get(key)
            if book.is_bound(pvc) or (pvc.volume_name and pick is None):
                pv = book.storage.volumes.get(pvc.volume_name)
                if pv is None:
                    unusable(f"claim {ref} is bound to PersistentVolume {pvc.volume_name}, which does not exist")
                else:
                    why = f"do not match the node affinity of PersistentVolume {pv.meta.name} (claim {ref})"
                    parts.append((why, book.volume_affinity(pv)))
                continue
            if pick is not None:
                pv = book.storage.volumes.get(pick.volume) if pick.volume else None
                if pv is not None:
                    ok = book.volume_affinity(pv)
                else:
                    ok = np.zeros(n, dtype=bool)
                    ok[pick.node] = True
                parts.append((f"are not where claim {ref} was given its volume this cycle", ok))
                continue
            if pvc.selected_node:
                ok = np.zeros(n, dtype=bool)
                row = book.node_row.get(pvc.selected_node)
                if row is not None:
                    ok[row] = True
                parts.append((f"are not node {pvc.selected_node}, where claim {ref}'s volume is being provisioned", ok))
                continue
            class_name = book.storage.class_of(pvc)
            cls = book.storage.classes.get(class_name)
            if not class_name:
                unusable(f"PersistentVolumeClaim {ref} is not bound yet (it has no StorageClass)")
                continue
            if cls is None:
                unusable(
                    f"PersistentVolumeClaim {ref} names StorageClass {class_name} (spec.storageClassName), "
                    "which does not exist"
                )
                continue
            if cls.binding_mode != WAIT_FOR_FIRST_CONSUMER:
                unusable(f"PersistentVolumeClaim {ref} is not bound yet (StorageClass {class_name} binds Immediately)")
                continue
            unbound.append((key, pvc, class_name))
            ok = book.provisionable(pvc, class_name) | book.free_mask(key, pvc, class_name)
            if book.storage.classes[class_name].provisions:
                why = f"have no free PersistentVolume for claim {ref}, and StorageClass {class_name} "
                why += "cannot provision one there"
            else:
                why = f"have no free PersistentVolume for claim {ref} "
                why += f"(StorageClass {class_name} only binds existing ones)"
            parts.append((why, ok))
        if len(unbound) > 1:
            parts.append(
                ("have too few free PersistentVolumes for all of this pod's claims", self._distinct(unbound, parts))
            )
        for driver in book.drivers:
            mine = [vid for vid, d in book.volumes_of(self._pod) if d == driver]
            if not mine:
                continue
            new = np.full(n, len(mine), dtype=np.int64)
            for vid in mine:  # a volume already attached to a node is not attached again
                there = book.nodes_of.get(vid)
                if there:
                    new[list(there)] -= 1
            ok = book.attached[driver] + new <= book.limit[driver]
            parts.append((f"cannot attach another volume of CSI driver {driver} (CSINode allocatable.count)", ok))
        return parts

    def _distinct(
        self, unbound: list[tuple[ClaimKey, PersistentVolumeClaim, str]], parts: list[tuple[str, np.ndarray]]
    ) -> np.ndarray:
        """Rows where every unbound claim gets its own volume (or provisioning). Claims whose candidate volumes
        are disjoint cannot compete: every row the per-claim parts allow works. Otherwise (a pod with several
        claims of one class: rare) greedy row by row over the rows still allowed, smallest claim first, as
        kube-scheduler matches claims one after another."""
        book = self.book
        ok = np.ones(book.n, dtype=bool)
        for _, m in parts:
            ok &= m
        shapes = [book.shape(pvc, class_name) for _, pvc, class_name in unbound]
        names = [{v.meta.name for v in sh.volumes} for sh in shapes]
        if not any(names[i] & names[j] for i in range(len(names)) for j in range(i)):
            return ok  # no two claims can want the same volume
        order = sorted(unbound, key=lambda u: u[1].request)
        for row in np.flatnonzero(ok).tolist():  # rare: a pod with several claims of one kind
            used: set[str] = set()
            for key, pvc, class_name in order:
                pv = next((v for v in book.free_at(key, pvc, class_name, row) if v.meta.name not in used), None)
                if pv is not None:
                    used.add(pv.meta.name)
                elif not book.provisionable(pvc, class_name)[row]:
                    ok[row] = False
                    break
        return ok

    def _compute(self, rows: np.ndarray | None) -> Answer:
        ok = np.ones(self._n, dtype=bool)
        for _, m in self._claim_parts():
            ok &= m
        return ok, ok, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return tuple((reason, ~m) for reason, m in self._claim_parts())
