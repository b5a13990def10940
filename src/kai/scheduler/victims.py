"""Victim order for reclaim, preempt and consolidation (KAI's VictimQueue).

The queue that most deserves to lose resources gives first: the queue order of
kai-behaviour §4.4.3 is reversed at every level of the tree and evaluated on each
queue's allocation *minus the victims already taken from it*, so a heavily
over-allocated queue gives until it is no longer the worst. Inside a leaf queue
the job order is reversed: lowest priority first, then the job furthest above
its minimum, then the newest. An elastic job gives its surplus pods one at a
time (last in task order first) before its core, the minAvailable pods, which
go as one unit: evicting part of a gang's core would leave a broken gang. With
subgroups, a surplus pod is one whose loss keeps every required subgroup at its
minMember (and every set at its minSubGroup).

Units are produced lazily: the solvers usually need only the first few.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kai.scheduler.model import JobInfo
from kai.scheduler.ordering import allocatable_shares, deserved_shares, queue_order_key
from kai.scheduler.session import Session
from kai.scheduler.subgroups import surplus_task


@dataclass(frozen=True, slots=True)
class VictimUnit:
    """Pods evicted together: one surplus pod of an elastic job, or a job's whole core."""

    job: int
    tasks: tuple[int, ...]
    core: bool


class VictimOrder:
    """Iterate victim units of *jobs* in KAI's victim order (see the module docstring).

    *core_allowed(job)* says whether a job's core may go (False for a job inside
    its min runtime: it may still lose surplus pods).
    """

    def __init__(self, ssn: Session, jobs: Iterable[JobInfo], core_allowed: Callable[[JobInfo], bool]) -> None:
        self.ssn = ssn
        snap = ssn.snap
        self._core_allowed = core_allowed
        self._active: dict[int, list[int]] = {}  # job -> its active tasks, in task order
        self._heaps: dict[int, list[tuple[tuple, int]]] = {}
        self._count = [0] * len(snap.queues)
        self._popped = [[0, 0, 0] for _ in snap.queues]
        self._keys: dict[int, tuple] = {}  # cached victim-order key per queue; a pop invalidates its path only
        self._fair = ssn.queues.fair_share.tolist()
        self._deserved = deserved_shares(ssn)
        self._allocatable = allocatable_shares(ssn)
        self._total = snap.total.tolist()
        rank = _victim_rank(ssn)
        self._rank = rank
        for job in jobs:
            active = ssn.evictable_tasks(job)
            if not active or job.queue < 0:
                continue
            self._active[job.index] = list(active)
            entry = self._entry(job)
            if entry is not None:
                self._heaps.setdefault(job.queue, []).append(entry)
                for a in ssn.queues.ancestors[job.queue]:
                    self._count[a] += 1
        for heap in self._heaps.values():
            heapq.heapify(heap)

    def _surplus(self, job: JobInfo) -> int | None:
        """Position in the job's active tasks of the next pod it can lose and stay gang satisfied (per subgroup)."""
        active = self._active[job.index]
        if job.gang is None or job.gang.flat:
            return len(active) - 1 if len(active) > job.min_available else None
        return surplus_task(job.gang, active, job.min_available)

    def _entry(self, job: JobInfo) -> tuple[tuple, int] | None:
        active = self._active[job.index]
        if not active:  # minMember 0 (everything elastic): its last surplus pod was its last pod
            return None
        surplus = self._surplus(job) is not None
        if not surplus and not self._core_allowed(job):
            return None
        elastic = 2 if surplus else 1 if len(active) == job.min_available else 0
        return ((job.priority, -elastic, -self._rank[job.index]), job.index)

    def _push(self, job: JobInfo) -> None:
        entry = self._entry(job)
        if entry is None:
            return
        heapq.heappush(self._heaps.setdefault(job.queue, []), entry)
        for a in self.ssn.queues.ancestors[job.queue]:
            self._count[a] += 1

    def _queue_key(self, qi: int) -> tuple:
        q = self.ssn.snap.queues[qi]
        alloc = self.ssn.queues.alloc[qi]
        popped = self._popped[qi]
        remaining = [alloc[0] - popped[0], alloc[1] - popped[1], alloc[2] - popped[2]]
        key = queue_order_key(
            remaining, (0, 0, 0), self._fair[qi], self._deserved[qi], self._allocatable[qi], self._total, -q.priority
        )
        return (key, q.creation, q.uid)

    def _choose(self, children: list[int]) -> int:
        if len(children) == 1:
            return children[0]
        keys = self._keys
        best, best_key = -1, None
        for c in children:
            k = keys.get(c)
            if k is None:
                k = keys[c] = self._queue_key(c)
            if best_key is None or k > best_key:
                best, best_key = c, k
        return best

    def __iter__(self) -> Iterator[VictimUnit]:
        ssn = self.ssn
        queues = ssn.snap.queues
        tasks = ssn.snap.tasks
        count, keys, popped = self._count, self._keys, self._popped
        roots = [q.index for q in queues if q.parent < 0]
        while True:
            live = [r for r in roots if count[r] > 0]
            if not live:
                return
            qi = self._choose(live)
            while not queues[qi].is_leaf:
                qi = self._choose([c for c in queues[qi].children if count[c] > 0])
            _, ji = heapq.heappop(self._heaps[qi])
            job = ssn.snap.jobs[ji]
            active = self._active[ji]
            pos = self._surplus(job)
            if pos is not None:
                unit = VictimUnit(ji, (active.pop(pos),), core=False)
            else:
                unit = VictimUnit(ji, tuple(active), core=True)
            g = c = m = 0
            for t in unit.tasks:
                tg, tc, tm = tasks[t].qreq
                g += tg
                c += tc
                m += tm
            for a in ssn.queues.ancestors[qi]:  # one pass up the tree: counts, cached keys, what was taken
                count[a] -= 1
                keys.pop(a, None)
                row = popped[a]
                row[0] += g
                row[1] += c
                row[2] += m
            if not unit.core:
                self._push(job)
            yield unit


def _victim_rank(ssn: Session) -> list[int]:
    """Every job's place in job order (highest priority, oldest first), computed once per session: the
    newest, lowest job of a queue gives first, and the order of a subset is the order of the whole."""
    rank = ssn.cache.get("victim_rank")
    if rank is None:
        jobs = ssn.snap.jobs
        ranked = sorted(range(len(jobs)), key=lambda j: (-jobs[j].priority, jobs[j].creation, jobs[j].uid))
        rank = [0] * len(jobs)
        for r, j in enumerate(ranked):
            rank[j] = r
        ssn.cache["victim_rank"] = rank
    return rank
