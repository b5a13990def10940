"""Job order, queue order and the hierarchical job queue (KAI's JobsOrderByQueues).

Job order (first difference wins): higher priority; a job below minAvailable
before one at it, before one above it (elastic); older creation; lower UID.

Queue order, applied at every level of the tree between sibling queues, each
represented by the best pending job of its subtree (reference 4.4.3):
1. not over-utilized (fairShare < allocated in all of gpu, cpu, memory) first;
2. starved (allocated + job <= quota in every resource) first;
3. higher queue priority;
4. no allocatable share of 0 for a resource the job uses;
5. smaller dominant share with the job; 6. without it;
7. smaller allocatable share (<= everywhere, < somewhere);
8. older queue, then lower UID.

Theory of operation: a pop walks from the root to a leaf choosing the best
child at each level, then takes the leaf's best job (the jobs queued at the
start sorted once, later pushes in a heap: see JobQueue.__init__). Keys are
plain Python floats (three resources; NumPy call overhead would dominate) and
are cached per queue; a pop or push invalidates only the queues on that job's
path.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from kai.scheduler.capacity import job_request
from kai.scheduler.fairshare import queue_allocatable_share
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session

INF = math.inf


def job_order_key(ssn: Session, job: JobInfo) -> tuple:
    allocated = ssn.job_allocated[job.index]
    elastic = 0 if allocated < job.min_available else (1 if allocated == job.min_available else 2)
    return (-job.priority, elastic, job.creation, job.uid)


def _share(x: float, allocatable: float, total: float) -> float:
    if allocatable == INF:
        return x / total if total > 0 else (0.0 if x == 0 else INF)
    if allocatable == 0:
        return x * 1000.0
    return x / allocatable


def queue_order_key(
    alloc: list[int],
    req: list[float] | tuple[int, ...],
    fair: list[float],
    deserved: list[float],
    allocatable: list[float],
    total: list[float],
    neg_priority: int,
) -> tuple:
    """Rules 1-6 of KAI's queue order as a sortable tuple (smaller first); plain floats, three resources.

    ``_share`` is inlined for the usual cases (a finite, non-zero allocatable share; none, with a cluster total):
    allocate computes this key once per job it pops, and the two calls per resource were a sizeable part of it.
    Same arithmetic, same floats."""
    over_utilized = starved = True
    penalty = False
    drf_with = drf_without = 0.0
    for a, x, s, f, d, t in zip(alloc, req, allocatable, fair, deserved, total):  # the three resources
        if not f < a:
            over_utilized = False
        if a + x > d:
            starved = False
        if s == 0 and x > 0:
            penalty = True
        if s != INF and s != 0:
            w, wo = (a + x) / s, a / s
        elif s == INF and t > 0:  # no quota or limit on the resource: share of the cluster's total
            w, wo = (a + x) / t, a / t
        else:
            w, wo = _share(a + x, s, t), _share(a, s, t)
        if w > drf_with:
            drf_with = w
        if wo > drf_without:
            drf_without = wo
    return (over_utilized, not starved, neg_priority, penalty, drf_with, drf_without)


def allocatable_shares(ssn: Session) -> list[list[float]]:
    """Each queue's allocatable share (max(deserved, fair share) capped by the limit), INF for unlimited."""
    return [
        [
            INF if s == -1 else float(s)
            for s in queue_allocatable_share(q.deserved, ssn.queues.fair_share[q.index], q.limit).tolist()
        ]
        for q in ssn.snap.queues
    ]


def deserved_shares(ssn: Session) -> list[list[float]]:
    return [[INF if d == -1 else d for d in q.deserved.tolist()] for q in ssn.snap.queues]


class JobQueue:
    """Pending jobs in KAI's hierarchical queue order."""

    def __init__(self, ssn: Session, jobs: Iterable[JobInfo]) -> None:
        self.ssn = ssn
        snap = ssn.snap
        # Per leaf queue, its jobs as entries (*job_order_key, job index): one flat tuple, which compares faster
        # than a key tuple nested in a pair and orders the same. The jobs queued at the start are sorted once,
        # best last (``_initial``: timsort is near linear on jobs listed in creation order, where a heap paid
        # some 20 tuple comparisons per pop); jobs pushed later go to a heap (``_heaps``). The leaf's best job
        # is the smaller of the two heads; entries are distinct (job index last), so the order is exactly a
        # single heap's.
        self._initial: dict[int, list[tuple]] = {}
        self._heaps: dict[int, list[tuple]] = {}
        self._count = [0] * len(snap.queues)
        # per queue (lists: indexing is cheaper than a dict's get), None until asked and after a push or pop below
        self._best: list[int | None] = [None] * len(snap.queues)  # job index of its subtree's best job
        self._key: list[tuple | None] = [None] * len(snap.queues)  # order key with its best job
        self._request: dict[int, tuple[int, int, int]] = {}  # job -> QRES request of its tasks to allocate
        self._total = snap.total.tolist()
        self._deserved = deserved_shares(ssn)
        self._roots = [q.index for q in snap.queues if q.parent < 0]
        self._fair = ssn.queues.fair_share.tolist()
        self._neg_priority = [-q.priority for q in snap.queues]
        self._tie_break: dict[tuple[int, ...], int] = {}
        # fair share is fixed for the session, so each queue's allocatable share is too
        self._allocatable_share = allocatable_shares(ssn)
        self._children = [q.children for q in snap.queues]
        self._is_leaf = [q.is_leaf for q in snap.queues]
        initial, count, ancestors = self._initial, self._count, ssn.queues.ancestors
        for job in jobs:
            initial.setdefault(job.queue, []).append((*job_order_key(ssn, job), job.index))
            self._request[job.index] = job_request(ssn.tasks_to_allocate(job))
            for a in ancestors[job.queue]:
                count[a] += 1
        for entries in initial.values():
            entries.sort(reverse=True)

    def __len__(self) -> int:
        return sum(self._count[r] for r in self._roots)

    def _invalidate(self, qi: int) -> None:
        for a in self.ssn.queues.ancestors[qi]:
            self._best[a] = None
            self._key[a] = None

    def push(self, job: JobInfo, tasks: list[TaskInfo] | None = None) -> None:
        """Queue *job*; *tasks*: ``ssn.tasks_to_allocate(job)`` if the caller has it at hand."""
        heapq.heappush(self._heaps.setdefault(job.queue, []), (*job_order_key(self.ssn, job), job.index))
        if tasks is None:
            tasks = self.ssn.tasks_to_allocate(job)
        self._request[job.index] = job_request(tasks)
        count = self._count
        for a in self.ssn.queues.ancestors[job.queue]:
            count[a] += 1
        self._invalidate(job.queue)

    def pop(self) -> JobInfo | None:
        count, roots = self._count, self._roots
        if len(roots) == 1:  # the usual tree: one root (a department or the default parent queue)
            qi = roots[0]
            if count[qi] == 0:
                return None
        else:
            children = [r for r in roots if count[r] > 0]
            if not children:
                return None
            qi = self._choose(children)
        while not self._is_leaf[qi]:
            qi = self._choose([c for c in self._children[qi] if count[c] > 0])
        initial, heap = self._initial.get(qi), self._heaps.get(qi)
        if heap and not (initial and initial[-1] < heap[0]):
            ji = heapq.heappop(heap)[-1]
        else:
            ji = initial.pop()[-1]  # type: ignore[union-attr]  # the count says the leaf has a job
        best, keys = self._best, self._key
        for a in self.ssn.queues.ancestors[qi]:  # one pass: the counts, and the path's cached choices (_invalidate)
            count[a] -= 1
            best[a] = None
            keys[a] = None
        return self.ssn.snap.jobs[ji]

    def _best_job(self, qi: int) -> int:
        best = self._best[qi]
        if best is None:
            if self._is_leaf[qi]:
                initial, heap = self._initial.get(qi), self._heaps.get(qi)
                if heap and not (initial and initial[-1] < heap[0]):
                    best = heap[0][-1]
                else:
                    best = initial[-1][-1]  # type: ignore[index]  # the count says the leaf has a job
            else:
                best = self._best_job(self._choose([c for c in self._children[qi] if self._count[c] > 0]))
            self._best[qi] = best
        return best

    def _order_key(self, qi: int) -> tuple:
        key = self._key[qi]
        if key is None:
            key = self._key[qi] = self.queue_key(qi, self._request[self._best_job(qi)])
        return key

    def queue_key(self, qi: int, req: list[float] | tuple[int, ...]) -> tuple:
        """Rules 1-6 of the queue order for queue *qi* with a job requesting *req* (QRES base units)."""
        return queue_order_key(
            self.ssn.queues.alloc[qi],
            req,
            self._fair[qi],
            self._deserved[qi],
            self._allocatable_share[qi],
            self._total,
            self._neg_priority[qi],
        )

    def _allocatable(self, qi: int) -> list[float]:
        return self._allocatable_share[qi]

    def _choose(self, children: list[int]) -> int:
        if len(children) == 1:
            return children[0]
        cached = self._key
        # a cached key is a non-empty tuple, so ``or`` computes only the missing ones (one call per pop,
        # not one per sibling: a pop invalidates only the queues on its job's path)
        keys = [cached[c] or self._order_key(c) for c in children]
        best_key = min(keys)
        if keys.count(best_key) == 1:
            return children[keys.index(best_key)]
        tied = [c for c, k in zip(children, keys) if k == best_key]
        key = tuple(tied)
        best = self._tie_break.get(key)
        if best is None:  # rules 7-8 depend only on fixed per-queue values, so the outcome is cached
            queues = self.ssn.snap.queues
            tied.sort(key=lambda c: (queues[c].creation, queues[c].uid))
            best = tied[0]
            for c in tied[1:]:  # rule 7: a strictly smaller allocatable share wins over the older queue
                a, b = self._allocatable(c), self._allocatable(best)
                if all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b)):
                    best = c
            self._tie_break[key] = best
        return best
