"""Where a pending job stands in the order the allocate action takes jobs in.

Rules: read from a Session opened on the snapshot with no action run (the order as the cycle starts):
inside its leaf queue by KAI's job order (priority, gang state, age), and at every level of the queue
tree by KAI's queue order between siblings (each represented by its subtree's best job), using the
engine's own key functions (``kai.scheduler.ordering``).
"""

from __future__ import annotations

from typing import Any

from kai.explain import _engine as E
from kai.scheduler.capacity import job_request
from kai.scheduler.model import JobInfo
from kai.scheduler.ordering import JobQueue
from kai.scheduler.session import Session


class QueueOrder:
    """Pending jobs at the start of the cycle, and the ranks the allocate action would see."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        snap = ssn.snap
        self._pending: dict[int, list[JobInfo]] = {}  # leaf queue -> its pending ready jobs (unsorted)
        for job in snap.jobs:
            if job.queue >= 0 and E.ready(ssn, job) and E.pending_tasks(ssn, job):
                self._pending.setdefault(job.queue, []).append(job)
        self._sorted: dict[int, list[JobInfo]] = {}
        self._jq = JobQueue(ssn, [])  # only its queue keys are used: they do not depend on the jobs it holds
        self._best: dict[int, JobInfo | None] = {}
        self._key: dict[int, tuple] = {}

    def jobs(self, qi: int) -> list[JobInfo]:
        """The leaf queue's pending jobs in KAI's job order (sorted on first use)."""
        if qi not in self._sorted:
            self._sorted[qi] = sorted(self._pending.get(qi, []), key=lambda j: E.job_order_key(self.ssn, j))
        return self._sorted[qi]

    def best(self, qi: int) -> JobInfo | None:
        """The job the queue's subtree would offer first (None if it has no pending job)."""
        if qi not in self._best:
            q = self.ssn.snap.queues[qi]
            if q.is_leaf:
                jobs = self._pending.get(qi)
                self._best[qi] = min(jobs, key=lambda j: E.job_order_key(self.ssn, j)) if jobs else None
            else:
                ranked = self.rank(q.children)
                self._best[qi] = self.best(ranked[0]) if ranked else None
        return self._best[qi]

    def key(self, qi: int) -> tuple:
        if qi not in self._key:
            job = self.best(qi)
            assert job is not None
            req = job_request(E.to_allocate(self.ssn, job))
            self._key[qi] = self._jq.queue_key(qi, req)
        return self._key[qi]

    def rank(self, queues: list[int]) -> list[int]:
        """*queues* (siblings) that have pending jobs, in queue order (ties: older queue first)."""
        snap = self.ssn.snap
        live = [q for q in queues if self.best(q) is not None]
        return sorted(live, key=lambda q: (self.key(q), snap.queues[q].creation, snap.queues[q].uid))

    def position(self, job: JobInfo) -> dict[str, Any] | None:
        """{inQueue: {rank, of, queue}, levels: [{queue, rank, of, parent, dominantShare, starved, ...}]}."""
        snap = self.ssn.snap
        jobs = self.jobs(job.queue) if job.queue >= 0 else []
        if job not in jobs:
            return None
        levels = []
        qi = job.queue
        while qi >= 0:
            parent = snap.queues[qi].parent
            siblings = snap.queues[parent].children if parent >= 0 else [q.index for q in snap.queues if q.parent < 0]
            ranked = self.rank(siblings)
            key = self.key(qi)
            levels.append(
                {
                    "queue": snap.queues[qi].name,
                    "rank": ranked.index(qi) + 1,
                    "of": len(ranked),
                    "parent": snap.queues[parent].name if parent >= 0 else None,
                    "overUtilized": bool(key[0]),
                    "starved": not key[1],
                    "priority": -key[2],
                    "dominantShare": round(float(key[5]), 3),
                    "dominantShareWithJob": round(float(key[4]), 3),
                }
            )
            qi = parent
        return {
            "inQueue": {"queue": job.queue_name, "rank": jobs.index(job) + 1, "of": len(jobs)},
            "levels": levels,
        }
