"""Devices: kube-scheduler's DynamicResources filter (KAI's ``dynamicresources`` plugin), for the ResourceClaims of
a pod, with structured parameters.

For each ``spec.resourceClaims`` entry of the pod (its namespace):

* a template's claim not made yet, a claim that does not exist or is being deleted: no node (the reason names
  the claim);
* a claim of a GPU class named directly (shared between pods) must carry the job's queue label, as KAI's
  ``validateSharedGpuClaimQueueLabel`` requires;
* allocated already (``status.allocation``): only the nodes of its ``nodeSelector``; allocated earlier in this
  cycle (another pod of the claim was placed): that node;
* otherwise each request (``exactly``) needs, on the node, ``count`` free devices of its class matching its
  selectors (allocation mode All: every such device of the node free, and at least one). Per node that is one
  count per request shape (``np.bincount`` over the devices), vectorized over nodes. Requests whose devices
  may overlap (two of one class in a pod, rare) are checked together, greedily, on the rows left.

A device is taken while the claim allocated to it is held: by a pod that stays, or by no pod at all (an
allocated claim keeps its devices until it is deallocated). When every pod holding a claim is being released
(evicted, terminating), its devices are free *later* but not *now*: a preemptor may be pipelined onto them,
as the eviction actions need.

When a pod is placed, the book (``DeviceBook``) picks devices for its unallocated claims: for each request in
order, the node's first free matching devices (free now before free later), and keeps the choice for the
rest of the cycle (a rollback gives them back). The choice goes into ``Session.claim_allocations``, and from
there into the pod's Bind decision: the backend writes ``status.allocation`` and ``reservedFor`` first.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from kai.api import constants as C
from kai.api.dra import ALL, MAX_RESERVED_FOR, DeviceRequest, ResourceClaim, is_gpu_class
from kai.api.objects import Pod
from kai.scheduler.decisions import ClaimAllocation
from kai.scheduler.model import TaskInfo, TaskStatus
from kai.scheduler.podrules._rule import Answer, CountedRule
from kai.scheduler.podrules._shared import NONE, RELEASING, SessionPods
from kai.scheduler.predicates import selector_terms_fit

ClaimKey = tuple[str, str]


@dataclass(slots=True)
class _Pick:
    node: int
    devices: np.ndarray  # device indexes
    results: tuple[tuple[str, str, str, str], ...]
    pods: int


@dataclass(slots=True)
class _Shape:
    """Requests of one class and selectors: their devices, and per node the total and free ones (later, now)."""

    matching: np.ndarray  # (devices,) bool
    total: np.ndarray  # (n,) int
    free_later: np.ndarray
    free_now: np.ndarray


class DeviceBook:
    """The device choices of one Session and which devices are taken now and later (module docstring)."""

    def __init__(self, pods: SessionPods) -> None:
        ssn = pods.ssn
        self.pods = pods
        self.ssn = ssn
        self.dra = dra = ssn.snap.dra
        self.n = ssn.snap.nodes.n
        self.node_row = {name: i for i, name in enumerate(ssn.snap.nodes.names)}
        self.dev_row = np.array([self.node_row.get(nm, -1) for nm in dra.device_node], dtype=np.int64)
        self.on_node = self.dev_row >= 0
        self.index = {key: i for i, key in enumerate(dra.devices)}
        n_dev = len(dra.devices)
        # per device, how many claims hold it later / now (a pipelined pod's pick may share a device with the
        # released claim it waits for): taken where the count is above zero
        self.later_count = np.zeros(n_dev, dtype=np.int64)
        self.now_count = np.zeros(n_dev, dtype=np.int64)
        self.taken_later = np.zeros(n_dev, dtype=bool)
        self.taken_now = np.zeros(n_dev, dtype=bool)
        self._state: dict[ClaimKey, tuple[int, int]] = {}  # allocated claim -> what it adds (later, now)
        self._shapes: dict[Hashable, _Shape] = {}
        self.picks: dict[ClaimKey, _Pick] = {}
        self.version = 1
        self._selector_masks: dict[ClaimKey, np.ndarray] = {}
        # allocated claims: their devices, and the pods (pids) that use them (spec or reservedFor)
        self._held: dict[ClaimKey, np.ndarray] = {}
        self._users: dict[ClaimKey, list[int]] = {}
        self.claims_of: dict[int, tuple[ClaimKey, ...]] = {}  # pid -> its claims (resolved names)
        # per claim, the pods placed this cycle that are not in its reservedFor yet: each becomes a consumer
        self.reserving: dict[ClaimKey, int] = {}
        by_name: dict[tuple[str, str], int] = {}
        for pid, pod in enumerate(pods.pods):
            ns = pod.meta.namespace or ""
            by_name[ns, pod.meta.name] = pid
            if pod.resource_claims:
                keys = tuple((ns, dra.claim_name(pod, c.name)) for c in pod.resource_claims)
                self.claims_of[pid] = keys
                for key in keys:
                    if key[1]:
                        self._users.setdefault(key, []).append(pid)
        for key, claim in dra.claims.items():
            if claim.allocation is None:
                continue
            found = (self.index.get((r.driver, r.pool, r.device)) for r in claim.allocation.results)
            idx = [i for i in found if i is not None]  # a device whose slice is gone takes nothing
            self._held[key] = np.array(sorted(set(idx)), dtype=np.int64)
            users = self._users.setdefault(key, [])
            for c in claim.reserved_for:
                pid = by_name.get((key[0], c.name))
                if pid is not None and pid not in users:
                    users.append(pid)
            self._claim_state(key)

    # --- device state ------------------------------------------------------------------------------

    def _claim_state(self, key: ClaimKey) -> None:
        """Set the taken flags of an allocated claim's devices from where its pods are."""
        devices = self._held.get(key)
        if devices is None or not devices.size:
            return
        states = [self.pods.where(pid)[1] for pid in self._users.get(key, ())]
        on = [s for s in states if s != NONE]
        releasing = bool(on) and all(s == RELEASING for s in on)
        new = (0 if releasing else 1, 1)
        old = self._state.get(key, (0, 0))
        if new != old:
            self._state[key] = new
            self._count(devices, new[0] - old[0], new[1] - old[1])

    def _count(self, devices: np.ndarray, later: int, now: int) -> None:
        for counts, taken, delta, free_of in (
            (self.later_count, self.taken_later, later, "free_later"),
            (self.now_count, self.taken_now, now, "free_now"),
        ):
            if not delta:
                continue
            counts[devices] += delta
            flipped = devices[(counts[devices] > 0) != taken[devices]]
            if not flipped.size:
                continue
            taken[flipped] = counts[flipped] > 0
            step = np.where(taken[flipped], -1, 1)  # a device taken leaves the free counts, one freed joins
            rows = self.dev_row[flipped]
            for shape in self._shapes.values():
                inside = shape.matching[flipped] & (rows >= 0)
                if inside.any():
                    np.add.at(getattr(shape, free_of), rows[inside], step[inside])

    def still_own(self, key: ClaimKey) -> tuple[bool, bool]:
        """(later, now): whether an allocated claim's devices are still its own, not picked for another claim
        this cycle (a victim's devices given to the pod that evicted it: the victim cannot come back there)."""
        devices = self._held.get(key)
        if devices is None or not devices.size:
            return True, True
        own_later, own_now = self._state.get(key, (0, 0))
        return (
            bool((self.later_count[devices] - own_later <= 0).all()),
            bool((self.now_count[devices] - own_now <= 0).all()),
        )

    def allocated_nodes(self, key: ClaimKey, claim: ResourceClaim) -> np.ndarray:
        """(n,) bool: nodes an allocated claim can be used from (its nodeSelector; every node without one)."""
        got = self._selector_masks.get(key)
        if got is None:
            assert claim.allocation is not None
            terms = claim.allocation.node_selector
            got = selector_terms_fit(self.ssn.snap.nodes, self.ssn.labels, terms) if terms else np.ones(self.n, bool)
            self._selector_masks[key] = got
        return got

    def shape(self, req: DeviceRequest) -> _Shape:
        """The free devices per node for requests like *req* (class, selectors), kept current by ``_count``."""
        key = (req.device_class, req.selectors)
        got = self._shapes.get(key)
        if got is None:
            matching = self.dra.matching(req.device_class, req.selectors)
            m = matching & self.on_node
            rows = self.dev_row
            got = self._shapes[key] = _Shape(
                matching,
                np.bincount(rows[m], minlength=self.n),
                np.bincount(rows[m & ~self.taken_later], minlength=self.n),
                np.bincount(rows[m & ~self.taken_now], minlength=self.n),
            )
        return got

    def request_masks(self, req: DeviceRequest) -> tuple[np.ndarray, np.ndarray]:
        """(later, now): (n,) bool, nodes with free devices for *req* (vectorized: one comparison per node)."""
        shape = self.shape(req)
        if req.mode == ALL:
            some = shape.total > 0
            return some & (shape.free_later == shape.total), some & (shape.free_now == shape.total)
        return shape.free_later >= req.count, shape.free_now >= req.count

    # --- choosing ------------------------------------------------------------------------------------

    def _choose(self, claim: ResourceClaim, node: int, pipelined: bool) -> _Pick | None:
        dra = self.dra
        used = self.taken_later.copy() if pipelined else self.taken_now.copy()
        here = self.dev_row == node
        chosen: list[int] = []
        results = []
        for req in claim.spec.requests:
            cand = np.flatnonzero(dra.matching(req.device_class, req.selectors) & here & ~used)
            if pipelined:  # devices free now first
                cand = cand[np.argsort(self.taken_now[cand], kind="stable")]
            if req.mode == ALL:
                total = int((dra.matching(req.device_class, req.selectors) & here).sum())
                if total == 0 or cand.size != total:
                    return None
                picked = cand
            else:
                if cand.size < req.count:
                    return None
                picked = cand[: req.count]
            used[picked] = True
            chosen.extend(picked.tolist())
            for i in picked.tolist():
                driver, pool, device = dra.devices[i]
                results.append((req.name, driver, pool, device))
        return _Pick(node, np.array(chosen, dtype=np.int64), tuple(results), 1)

    def placed(self, task: TaskInfo, node: int, pipelined: bool) -> None:
        pid = task.index
        allocations = []
        name = self.ssn.snap.nodes.names[node]
        for key in self.claims_of.get(pid, ()):
            claim = self.dra.claims.get(key)
            if claim is None:
                continue
            if not _reserved(claim, task.pod):
                self.reserving[key] = self.reserving.get(key, 0) + 1
            if claim.allocation is not None:
                allocations.append(ClaimAllocation(key[0], key[1], name))
                self._claim_state(key)
                continue
            pick = self.picks.get(key)
            if pick is None:
                pick = self._choose(claim, node, pipelined)
                if pick is None:
                    continue  # the rule refused every such node: only a direct placement gets here
                self.picks[key] = pick
                self._count(pick.devices, 1, 1)
                allocations.append(ClaimAllocation(key[0], key[1], name, pick.results))
            else:
                pick.pods += 1
                allocations.append(ClaimAllocation(key[0], key[1], name))
        if allocations:
            self.ssn.claim_allocations[pid] = tuple(allocations)
        self.version += 1

    def removed(self, task: TaskInfo) -> None:
        """*task* left the node it was placed on this cycle (a rollback): give back what it chose."""
        self.ssn.claim_allocations.pop(task.index, None)
        for key in self.claims_of.get(task.index, ()):
            claim = self.dra.claims.get(key)
            if claim is not None and self.reserving.get(key, 0) > 0 and not _reserved(claim, task.pod):
                self.reserving[key] -= 1
            pick = self.picks.get(key)
            if pick is not None:
                pick.pods -= 1
                if pick.pods <= 0:
                    del self.picks[key]
                    self._count(pick.devices, -1, -1)
            elif key in self._held:
                self._claim_state(key)
        self.version += 1

    def changed(self, task: TaskInfo, old: tuple[int, int], new: tuple[int, int]) -> None:
        """``on_task_change`` of a task with claims: placed, undone, or evicted (its claims' devices free later)."""
        if old[1] == NONE and new[1] != NONE:
            self.placed(task, new[0], self.ssn.status[task.index] == TaskStatus.PIPELINED)
        elif new[1] == NONE and old[1] != NONE:
            self.removed(task)
        elif old[1] != new[1]:
            for key in self.claims_of.get(task.index, ()):
                self._claim_state(key)
            self.version += 1


class DraRule(CountedRule):
    """Where a pod with these claims may go, given the book (see the module docstring)."""

    def __init__(self, book: DeviceBook, pod: Pod, queue: str) -> None:
        self.book = book
        self.pod = pod
        self.queue = queue
        super().__init__(book.n, [])
        self._seen = 0

    def _refresh(self) -> None:
        if self._seen != self.book.version:
            self._seen = self.book.version
            self.stale()
        super()._refresh()

    def _parts(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(reason, rows passing later, rows passing now) per claim and request."""
        book, dra, pod = self.book, self.book.dra, self.pod
        ns = pod.meta.namespace or ""
        none = np.zeros(book.n, dtype=bool)
        parts: list[tuple[str, np.ndarray, np.ndarray]] = []
        pending: list[tuple[str, DeviceRequest, np.ndarray]] = []

        def unusable(why: str) -> None:
            parts.append((f"cannot use the pod's ResourceClaims: {why}", none, none))

        for pc in pod.resource_claims:
            name = pc.claim or pod.claim_statuses.get(pc.name, "")
            if not name:
                unusable(f"the claim of {pc.name!r} (ResourceClaimTemplate {ns}/{pc.template}) is not made yet")
                continue
            ref = f"{ns}/{name}"
            claim = dra.claims.get((ns, name))
            if claim is None:
                unusable(f"ResourceClaim {ref} does not exist")
                continue
            if claim.meta.deletion_timestamp is not None:
                unusable(f"ResourceClaim {ref} is being deleted")
                continue
            # KAI's dynamicresources preFilter (kube-scheduler's CanBeReserved, less its exemption of a pod already
            # reserved, kept here): reservedFor holds at most MAX_RESERVED_FOR consumers, the pods placed this
            # cycle included; asked of every claim, allocated or not
            consumers = len(claim.reserved_for) + book.reserving.get((ns, name), 0)
            if consumers >= MAX_RESERVED_FOR and not _reserved(claim, pod):
                unusable(f"ResourceClaim {ref} has {MAX_RESERVED_FOR} consumers already")
                continue
            if pc.claim and any(is_gpu_class(r.device_class) for r in claim.spec.requests):
                label = claim.meta.labels.get(C.LABEL_QUEUE, "")
                if label != self.queue:
                    got = f"label {C.LABEL_QUEUE}={label}" if label else f"no {C.LABEL_QUEUE} label"
                    unusable(f"ResourceClaim {ref} is a shared GPU claim with {got}, not queue {self.queue}")
                    continue
            pick = book.picks.get((ns, name))
            if pick is not None:
                ok = np.zeros(book.n, dtype=bool)
                ok[pick.node] = True
                parts.append((f"are not where ResourceClaim {ref} was allocated this cycle", ok, ok))
                continue
            if claim.allocation is not None:
                ok = book.allocated_nodes((ns, name), claim)
                parts.append((f"do not match the nodeSelector of ResourceClaim {ref}'s allocation", ok, ok))
                later_own, now_own = book.still_own((ns, name))
                if not (later_own and now_own):
                    why = f"cannot use ResourceClaim {ref}: its devices were given to another claim this cycle"
                    parts.append((why, ok & later_own, ok & now_own))
                continue
            for i, req in enumerate(claim.spec.requests):
                if req.device_class not in dra.classes:
                    unusable(
                        f"ResourceClaim {ref} names DeviceClass {req.device_class} "
                        f"(spec.devices.requests[{i}].exactly.deviceClassName), which does not exist"
                    )
                    continue
                matching = dra.matching(req.device_class, req.selectors)
                later, now = book.request_masks(req)
                want = "every device (allocationMode All)" if req.mode == ALL else f"{req.count} device(s)"
                why = f"have too few free devices of DeviceClass {req.device_class} for {want}"
                why += f" of {ref} request {req.name}"
                parts.append((why, later, now))
                pending.append((ref, req, matching))
        if len(pending) > 1:
            later, now = self._together(pending, parts)
            parts.append(("have too few free devices for all of this pod's ResourceClaims together", later, now))
        return parts

    def _together(
        self, pending: list[tuple[str, DeviceRequest, np.ndarray]], parts: list[tuple[str, np.ndarray, np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows where every request gets its own devices. Requests whose devices never overlap cannot compete:
        the per-request rows stand. Otherwise greedy per row (rare: two requests of one kind in a pod)."""
        book = self.book
        later = np.ones(book.n, dtype=bool)
        now = np.ones(book.n, dtype=bool)
        for _, m_later, m_now in parts:
            later &= m_later
            now &= m_now
        if not any((pending[i][2] & pending[j][2]).any() for i in range(len(pending)) for j in range(i)):
            return later, now
        for mask, taken in ((later, book.taken_later), (now, book.taken_now)):
            for row in np.flatnonzero(mask).tolist():
                used = taken | (book.dev_row != row)
                for _, req, matching in pending:
                    cand = np.flatnonzero(matching & ~used)
                    if req.mode == ALL:
                        need = int((matching & (book.dev_row == row)).sum())
                        ok = need > 0 and cand.size == need
                    else:
                        need = req.count
                        ok = cand.size >= need
                    if not ok:
                        mask[row] = False
                        break
                    used[cand[:need]] = True
        return later, now

    def _compute(self, rows: np.ndarray | None) -> Answer:
        later = np.ones(self._n, dtype=bool)
        now = np.ones(self._n, dtype=bool)
        for _, m_later, m_now in self._parts():
            later &= m_later
            now &= m_now
        return later, now, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return tuple((reason, ~m) for reason, m, _ in self._parts())


def rule_key(pod: Pod, queue: str) -> Hashable:
    """What a pod's device rule depends on: its namespace, claims (resolved) and, for shared GPU claims, queue."""
    return ("dra", pod.meta.namespace, pod.resource_claims, tuple(sorted(pod.claim_statuses.items())), queue)


def _reserved(claim: ResourceClaim, pod: Pod) -> bool:
    """*pod* is one of *claim*'s consumers already (``status.reservedFor`` names it)."""
    return any(c.name == pod.meta.name for c in claim.reserved_for)
