"""Job order, queue order and the hierarchical job queue (KAI's JobsOrderByQueues).

Job order (first difference wins): higher priority; a job below minAvailable
before one at it, before one above it (elastic); older creation; lower UID.

Queue order, applied at every level of the tree between sibling queues, each
represented by the best pending job of its subtree (kai-behaviour §4.4.3):
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
are cached per queue; a push invalidates only the queues on that job's path,
and a pop only where its path's keys would change (JobQueue._recheck).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Iterable

from kai.scheduler.capacity import job_request
from kai.scheduler.fairshare import queue_allocatable_share
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session

INF = math.inf


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


def share_divisors(allocatable: list[float], total: list[float]) -> tuple[float, float, float] | None:
    """What ``queue_order_key`` divides each resource's allocation by, when every resource has a divisor (a
    finite, non-zero allocatable share; none, with a cluster total); None if one takes ``_share``'s other cases."""
    out = []
    for s, t in zip(allocatable, total):
        if s != INF and s != 0:
            out.append(s)
        elif s == INF and t > 0:
            out.append(t)
        else:
            return None
    return out[0], out[1], out[2]


def plain_queue_order_key(
    alloc: list[int],
    req: list[float] | tuple[int, ...],
    fair: list[float],
    deserved: list[float],
    divisors: tuple[float, float, float],
    neg_priority: int,
) -> tuple:
    """``queue_order_key`` for a queue with ``share_divisors``, written out for the three resources: no share of
    0, so no penalty. Allocate computes one key per job it pops, and a loop over the resources cost a third
    more. Same arithmetic, same floats (the maxima start from 0.0 as the loop's do)."""
    a0, a1, a2 = alloc
    x0, x1, x2 = req
    f0, f1, f2 = fair
    d0, d1, d2 = deserved
    s0, s1, s2 = divisors
    return (
        f0 < a0 and f1 < a1 and f2 < a2,  # over-utilized
        a0 + x0 > d0 or a1 + x1 > d1 or a2 + x2 > d2,  # not starved
        neg_priority,
        False,
        max(0.0, (a0 + x0) / s0, (a1 + x1) / s1, (a2 + x2) / s2),  # dominant share with the job
        max(0.0, a0 / s0, a1 / s1, a2 / s2),  # and without it
    )


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

    def __init__(
        self,
        ssn: Session,
        jobs: Iterable[JobInfo],
        depth: int | None = None,
        *,
        prepared: dict[int, tuple[list[tuple], dict[int, tuple[int, int, int]]]] | None = None,
    ) -> None:
        """*prepared*: per leaf queue, entries the caller made already (``entry``, a new list: the queue pops from
        it) and their jobs' requests, queued besides *jobs* (the victim solver keeps them between simulations)."""
        self.ssn = ssn
        snap = ssn.snap
        nq = len(snap.queues)
        # Per leaf queue, its jobs as entries (*job_order_key, job index): one flat tuple, which compares faster
        # than a key tuple nested in a pair and orders the same. The jobs queued at the start are sorted once,
        # best last (``_initial``: timsort is near linear on jobs listed in creation order, where a heap paid
        # some 20 tuple comparisons per pop); jobs pushed later go to a heap (``_heaps``). The leaf's best job
        # is the smaller of the two heads; entries are distinct (job index last), so the order is exactly a
        # single heap's.
        self._initial: dict[int, list[tuple]] = {}
        self._heaps: dict[int, list[tuple]] = {}
        self._count = [0] * nq
        # per queue (lists: indexing is cheaper than a dict's get), None until asked and after a push or pop below
        self._best: list[int | None] = [None] * nq  # job index of its subtree's best job
        self._key: list[tuple | None] = [None] * nq  # order key with its best job, while ranked in its parent
        # Per parent queue (-1: the roots), its children with jobs in order: (key, child) sorted, for the children
        # whose key is current, plus the children to rank again (their key went stale, or they got jobs). A pop
        # or push changes the keys on one path only, so a choice re-ranks one child instead of comparing them all.
        self._ranked: dict[int, list[tuple[tuple, int]]] = {-1: []}
        self._unranked: dict[int, set[int]] = {-1: set()}
        for q in snap.queues:
            if q.children:
                self._ranked[q.index] = []
                self._unranked[q.index] = set()
        self._parent = [q.parent for q in snap.queues]
        self._request: dict[int, tuple[int, int, int]] = {}  # job -> QRES request of its tasks to allocate
        self._roots = [q.index for q in snap.queues if q.parent < 0]
        self._tie_break: dict[tuple[int, ...], int] = {}
        order = ssn.hooks.queue_order(ssn)  # proportion's; without it, the older queue first
        self.queue_key = order.queue_key if order is not None else _creation_key(ssn)
        self._tie_breaker = order.tie_break if order is not None else min
        self._is_leaf = [q.is_leaf for q in snap.queues]
        # what each key in ``_key`` was computed from: its best job's request, and the Session's
        # ``alloc_changes`` then (a key reads only its queue's allocation and that request: QueueOrder)
        self._key_req: list[tuple[int, int, int] | None] = [None] * nq
        self._key_at = [-1] * nq
        # per parent queue (-1: the roots), its children a pop went through since it last chose: their keys may be
        # stale, and are checked at its next choice (``_recheck``)
        self._popped: dict[int, set[int]] = {p: set() for p in self._unranked}
        self._tied: dict[int, int] = {}  # parent -> the child its tie-break chose, while its ranking holds
        initial, request, count = self._initial, self._request, self._count
        job_order = ssn.hooks.job_order
        jobs = list(jobs)
        if depth is not None:  # queueDepthPerAction: only the first *depth* jobs of each leaf queue, in job order
            jobs = _first_per_queue(ssn, jobs, depth)
        for qi, (entries, requests) in (prepared or {}).items():
            initial.setdefault(qi, []).extend(entries)
            request.update(requests)
        for job in jobs:
            initial.setdefault(job.queue, []).append((*job_order(ssn, job), job.index))
            request[job.index] = job_request(ssn.tasks_to_allocate(job))
        for qi, entries in initial.items():
            entries.sort(reverse=True)
            for a in ssn.queues.ancestors[qi]:  # counted per leaf, not per job
                count[a] += len(entries)
        for q in range(nq):
            if count[q] > 0:
                self._unranked[self._parent[q]].add(q)

    @staticmethod
    def entry(ssn: Session, job: JobInfo) -> tuple[tuple, tuple[int, int, int]]:
        """What queuing *job* adds: its entry (job order key, then index) and the request its queue is ranked
        with (``prepared``'s parts)."""
        return (*ssn.hooks.job_order(ssn, job), job.index), job_request(ssn.tasks_to_allocate(job))

    def __len__(self) -> int:
        return sum(self._count[r] for r in self._roots)

    def _pushed(self, qi: int) -> None:
        """A job was pushed to leaf *qi*: the counts, best jobs and keys of the queues on its path change, so
        each leaves its parent's ranking until the parent chooses again."""
        count, best = self._count, self._best
        ancestors = self.ssn.queues.ancestors[qi]
        for a in ancestors:
            count[a] += 1
            best[a] = None
        self._unrank(ancestors)

    def _unrank(self, path: list[int]) -> None:
        """Take the queues of *path* out of their parents' rankings, to be ranked again at the next choice."""
        keys, parent = self._key, self._parent
        for a in path:
            key = keys[a]
            p = parent[a]
            if key is not None:
                ranked = self._ranked[p]
                del ranked[bisect_left(ranked, (key, a))]
                keys[a] = None
            self._unranked[p].add(a)

    def push(self, job: JobInfo, tasks: list[TaskInfo] | None = None) -> None:
        """Queue *job*; *tasks*: ``ssn.tasks_to_allocate(job)`` if the caller has it at hand."""
        heapq.heappush(self._heaps.setdefault(job.queue, []), (*self.ssn.hooks.job_order(self.ssn, job), job.index))
        if tasks is None:
            tasks = self.ssn.tasks_to_allocate(job)
        self._request[job.index] = job_request(tasks)
        self._pushed(job.queue)

    def _recheck(self, parent: int) -> None:
        """Before *parent* chooses: rank again those of its children a pop went through whose keys changed.

        A pop changes the best job of every queue on its path, and the popped job's attempt may change their
        allocations, so the path's keys may be stale when its queues' parents next choose; the other queues keep
        their keys, as KAI's queue heap does. Taking the path out of the ranking at every pop made each choice
        compute its keys again and re-sort them, a seventh of a saturated full cycle. Most pops there change
        neither input: the attempt failed, allocating nothing, and the leaf's next job asks for what the popped
        one asked. So a key is computed again only where one moved: a queue allocation changed since it was
        computed (``Session.alloc_changes``), or the child's best job asks for another request. A key that
        stays is the one computing it again would give, so the ranking is the one ranking every path again
        gives (``tests/unit/test_ordering.py``)."""
        popped = self._popped[parent]
        keys, count, key_at, key_req = self._key, self._count, self._key_at, self._key_req
        now, request = self.ssn.alloc_changes, self._request
        stale = [
            c
            for c in popped
            # a child without a key is not ranked (a push took it out, or it is an only child): ranked at the choice
            if keys[c] is not None
            and not (count[c] > 0 and key_at[c] == now and key_req[c] == request[self._best_job(c)])
        ]
        popped.clear()
        if stale:
            self._unrank(stale)

    def _head(self, qi: int) -> int:
        """The best job of leaf *qi*, which has one."""
        initial, heap = self._initial.get(qi), self._heaps.get(qi)
        if heap and not (initial and initial[-1] < heap[0]):
            return heap[0][-1]
        return initial[-1][-1]  # type: ignore[index]  # the count says the leaf has a job

    def pop(self) -> JobInfo | None:
        roots = self._roots
        if len(roots) == 1:  # the usual tree: one root (a department or the default parent queue)
            qi = roots[0]
            if self._count[qi] == 0:
                return None
        else:
            qi = self._choose(-1)
            if qi < 0:
                return None
        is_leaf = self._is_leaf
        while not is_leaf[qi]:
            qi = self._choose(qi)
        initial, heap = self._initial.get(qi), self._heaps.get(qi)
        if heap and not (initial and initial[-1] < heap[0]):
            ji = heapq.heappop(heap)[-1]
        else:
            ji = initial.pop()[-1]  # type: ignore[union-attr]  # the count says the leaf has a job
        count, best, parent, popped = self._count, self._best, self._parent, self._popped
        for a in self.ssn.queues.ancestors[qi]:
            count[a] -= 1
            best[a] = None
            popped[parent[a]].add(a)
        return self.ssn.snap.jobs[ji]

    def _best_job(self, qi: int) -> int:
        best = self._best[qi]
        if best is None:
            if self._is_leaf[qi]:
                best = self._head(qi)
            else:
                best = self._best_job(self._choose(qi))
            self._best[qi] = best
        return best

    def _choose(self, parent: int) -> int:
        """The child of *parent* (-1: among the roots) to take the next job from; -1 if none has a job."""
        if self._popped[parent]:
            self._recheck(parent)
        ranked = self._ranked[parent]
        unranked = self._unranked[parent]
        if unranked:  # the ranking changes here only: children leave it through ``unranked`` too
            self._tied.pop(parent, None)
            count, keys = self._count, self._key
            if not ranked and len(unranked) == 1:  # one child to rank and none ranked: no key is needed
                (only,) = unranked
                if count[only] > 0:  # left unranked: ranked the day a sibling has jobs too
                    return only
            for c in unranked:
                if count[c] > 0:
                    req = self._key_req[c] = self._request[self._best_job(c)]
                    self._key_at[c] = self.ssn.alloc_changes
                    key = keys[c] = self.queue_key(c, req)
                    insort(ranked, (key, c))
            unranked.clear()
        if len(ranked) < 2:
            return ranked[0][1] if ranked else -1
        best_key = ranked[0][0]
        if ranked[1][0] != best_key:
            return ranked[0][1]
        best = self._tied.get(parent)
        if best is None:  # ties are common (sibling queues alike); kept until the parent's ranking changes
            tied = [c for k, c in ranked if k == best_key]
            key = tuple(tied)
            best = self._tie_break.get(key)
            if best is None:  # the tie-break depends only on fixed per-queue values, so the outcome is cached
                best = self._tie_break[key] = self._tie_breaker(tied)
            self._tied[parent] = best
        return best


def _creation_key(ssn: Session):
    """Queue order without a queue-order plugin: the older queue first."""
    queues = ssn.snap.queues

    def key(qi: int, req: object) -> tuple:
        return (queues[qi].creation, queues[qi].uid)

    return key


def _first_per_queue(ssn: Session, jobs: list[JobInfo], depth: int) -> list[JobInfo]:
    """KAI's MaxJobsQueueDepth: each leaf queue offers at most *depth* jobs to the action, the first in job order."""
    by_queue: dict[int, list[JobInfo]] = {}
    for job in jobs:
        by_queue.setdefault(job.queue, []).append(job)
    kept = []
    for queue_jobs in by_queue.values():
        queue_jobs.sort(key=lambda j: ssn.hooks.job_order(ssn, j))
        kept.extend(queue_jobs[:depth])
    return kept


class ProportionQueueOrder:
    """KAI's proportion queue order (rules 1-8 of the module docstring) for one Session: fair shares, quotas
    and allocatable shares are fixed for it; allocations are read live from the Session."""

    def __init__(self, ssn: Session) -> None:
        snap = ssn.snap
        self.ssn = ssn
        self._total = snap.total.tolist()
        self._deserved = deserved_shares(ssn)
        self._fair = ssn.queues.fair_share.tolist()
        self._neg_priority = [-q.priority for q in snap.queues]
        self._allocatable_share = allocatable_shares(ssn)
        self._divisors = [share_divisors(a, self._total) for a in self._allocatable_share]

    def queue_key(self, qi: int, req: list[float] | tuple[int, ...]) -> tuple:
        """Rules 1-6 of the queue order for queue *qi* with a job requesting *req* (QRES base units)."""
        divisors = self._divisors[qi]
        if divisors is not None:
            return plain_queue_order_key(
                self.ssn.queues.alloc[qi], req, self._fair[qi], self._deserved[qi], divisors, self._neg_priority[qi]
            )
        return queue_order_key(
            self.ssn.queues.alloc[qi],
            req,
            self._fair[qi],
            self._deserved[qi],
            self._allocatable_share[qi],
            self._total,
            self._neg_priority[qi],
        )

    def tie_break(self, tied: list[int]) -> int:
        """Rules 7-8: the older queue, unless another has a strictly smaller allocatable share."""
        queues = self.ssn.snap.queues
        tied = sorted(tied, key=lambda c: (queues[c].creation, queues[c].uid))
        best = tied[0]
        for c in tied[1:]:
            a, b = self._allocatable_share[c], self._allocatable_share[best]
            if all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b)):
                best = c
        return best
