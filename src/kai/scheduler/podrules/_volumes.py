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

from dataclasses import dataclass

import numpy as np

from kai.api.objects import Pod
from kai.api.storage import WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim
from kai.scheduler.decisions import VolumeBinding
from kai.scheduler.podrules._counters import Counter
from kai.scheduler.podrules._rule import CountedRule
from kai.scheduler.podrules._shared import NONE, SessionPods
from kai.scheduler.predicates import selector_terms_fit

ClaimKey = tuple[str, str]  # (namespace, name)


@dataclass(slots=True)
class _Pick:
    volume: str  # "" = provisioned
    node: int
    pods: int  # pods of the cycle holding this choice


class VolumeBook:
    """The volume choices of one Session and the attached-volume counts (see the module docstring)."""

    def __init__(self, pods: SessionPods) -> None:
        ssn = pods.ssn
        self.pods = pods
        self.ssn = ssn
        self.storage = ssn.snap.storage
        self.n = ssn.snap.nodes.n
        self.node_row = {name: i for i, name in enumerate(ssn.snap.nodes.names)}
        self.changes = Counter(self.n, "volumes")  # its version moves with every choice and attachment
        self.changes.version = 1
        self.picks: dict[ClaimKey, _Pick] = {}
        self.taken: dict[str, ClaimKey] = {}  # volume -> the claim that took it this cycle
        self._affinity: dict[str, np.ndarray] = {}
        self._topologies: dict[str, np.ndarray] = {}
        self._candidates: dict[ClaimKey, list[PersistentVolume]] = {}
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

    def volume_affinity(self, pv: PersistentVolume) -> np.ndarray:
        got = self._affinity.get(pv.meta.name)
        if got is None:
            ssn = self.ssn
            if pv.node_affinity:
                got = selector_terms_fit(ssn.snap.nodes, ssn.labels, pv.node_affinity)
            else:
                got = np.ones(self.n, dtype=bool)
            self._affinity[pv.meta.name] = got
        return got

    def provisionable(self, pvc: PersistentVolumeClaim, class_name: str) -> np.ndarray:
        """(n,) bool: nodes the claim's class can provision a volume for."""
        cls = self.storage.classes.get(class_name)
        if cls is None or not cls.provisions or pvc.selector is not None:
            return np.zeros(self.n, dtype=bool)
        got = self._topologies.get(class_name)
        if got is None:
            ssn = self.ssn
            if cls.allowed_topologies:
                got = selector_terms_fit(ssn.snap.nodes, ssn.labels, cls.allowed_topologies)
            else:
                got = np.ones(self.n, dtype=bool)
            self._topologies[class_name] = got
        return got

    def candidates(self, key: ClaimKey, pvc: PersistentVolumeClaim, class_name: str) -> list[PersistentVolume]:
        """Volumes that fit the claim wherever they are (smallest first), taken or not."""
        got = self._candidates.get(key)
        if got is None:
            got = []
            for pv in self.storage.volumes.values():
                ref = pv.claim_ref
                if ref is not None and (ref.namespace, ref.name) != key:
                    continue
                if pv.meta.deletion_timestamp is not None or pv.storage_class != class_name:
                    continue
                if pv.capacity < pvc.request or pv.volume_mode != pvc.volume_mode:
                    continue
                if not set(pvc.access_modes) <= set(pv.access_modes):
                    continue
                if pvc.selector is not None and not pvc.selector.matches(pv.meta.labels):
                    continue
                got.append(pv)
            got.sort(key=lambda v: (v.claim_ref is None, v.capacity, v.meta.name))  # pre-bound to it first
            self._candidates[key] = got
        return got

    def free(self, key: ClaimKey, pvc: PersistentVolumeClaim, class_name: str) -> list[PersistentVolume]:
        return [v for v in self.candidates(key, pvc, class_name) if self.taken.get(v.meta.name, key) == key]

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
                    self.taken[pick.volume] = key
            else:
                pick.pods += 1
            bindings.append(VolumeBinding(namespace, name, pick.volume, self.ssn.snap.nodes.names[node]))
        if bindings:
            self.ssn.volume_bindings[task_index] = tuple(bindings)
        self.changes.version += 1

    def _choose(self, key: ClaimKey, pvc: PersistentVolumeClaim, node: int) -> _Pick | None:
        if pvc.selected_node:
            return _Pick("", node, 1)
        if pvc.volume_name:
            return _Pick(pvc.volume_name, node, 1)
        class_name = self.storage.class_of(pvc)
        for pv in self.free(key, pvc, class_name):
            if self.volume_affinity(pv)[node]:
                return _Pick(pv.meta.name, node, 1)
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
                    del self.taken[pick.volume]
        self.changes.version += 1

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
        self.changes.version += 1

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

    def __init__(self, book: VolumeBook, pod: Pod) -> None:
        self.book = book
        self.namespace = pod.meta.namespace or ""
        self.claims = pod.claims
        self._pod = pod
        super().__init__(book.n, [book.changes])

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
            ok = book.provisionable(pvc, class_name).copy()
            for pv in book.free(key, pvc, class_name):
                ok |= book.volume_affinity(pv)
            what = "cannot provision one" if book.storage.classes[class_name].provisions else "provisions none"
            parts.append(
                (f"have no free PersistentVolume for claim {ref} and StorageClass {class_name} {what} there", ok)
            )
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
        seen: set[str] = set()
        overlap = False
        for key, pvc, class_name in unbound:
            names = {v.meta.name for v in book.candidates(key, pvc, class_name)}
            overlap = overlap or bool(names & seen)
            seen |= names
        if not overlap:
            return ok
        order = sorted(unbound, key=lambda u: u[1].request)
        for row in np.flatnonzero(ok).tolist():
            used: set[str] = set()
            for key, pvc, class_name in order:
                pv = next(
                    (
                        v
                        for v in book.free(key, pvc, class_name)
                        if v.meta.name not in used and book.volume_affinity(v)[row]
                    ),
                    None,
                )
                if pv is not None:
                    used.add(pv.meta.name)
                elif not book.provisionable(pvc, class_name)[row]:
                    ok[row] = False
                    break
        return ok

    def _compute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        ok = np.ones(self._n, dtype=bool)
        for _, m in self._claim_parts():
            ok &= m
        return ok, ok, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return tuple((reason, ~m) for reason, m in self._claim_parts())
