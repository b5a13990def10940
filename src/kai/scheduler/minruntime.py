"""Min runtime (KAI's minruntime plugin, reference 4.5): a job that started recently is protected.

A protected job keeps its minAvailable core; an elastic one may still lose the
pods above its minimum. The protection window comes from the first queue that
sets it, walking up the tree:

* preempt: from the victim's own queue, ``preemptMinRuntime``;
* reclaim, method ``queue``: from the victim's queue, ``reclaimMinRuntime``;
* reclaim, method ``lca`` (default): from the victim-side child of the lowest
  common ancestor of reclaimer and victim, so a department-level setting
  governs reclaims between departments;
* else the scheduler's default (0: no protection).
"""

from __future__ import annotations

from kai.scheduler.model import JobInfo
from kai.scheduler.reclaimable import leveled_queues
from kai.scheduler.session import Session


def _walk(ssn: Session, start: int, attr: str, default: float) -> float:
    queues = ssn.snap.queues
    cur = start
    while cur >= 0:
        value = getattr(queues[cur], attr)
        if value is not None:
            return value
        cur = queues[cur].parent
    return default


def preempt_min_runtime(ssn: Session, victim: JobInfo) -> float:
    return _walk(ssn, victim.queue, "preempt_min_runtime", ssn.conf.default_preempt_min_runtime)


def reclaim_min_runtime(ssn: Session, reclaimer: JobInfo, victim: JobInfo) -> float:
    start = victim.queue
    if ssn.conf.reclaim_resolve_method == "lca" and reclaimer.queue != victim.queue:
        start = leveled_queues(ssn, reclaimer.queue, victim.queue)[1]
    return _walk(ssn, start, "reclaim_min_runtime", ssn.conf.default_reclaim_min_runtime)


def protected(ssn: Session, victim: JobInfo, min_runtime: float) -> bool:
    """Still inside its min runtime: started less than *min_runtime* seconds ago."""
    if min_runtime <= 0 or victim.last_start is None:
        return False
    return victim.last_start + min_runtime > ssn.snap.now
