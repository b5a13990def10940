"""stalegangeviction: a gang that lost members and cannot run is evicted whole after a grace period.

A job is stale when it has no Succeeded pod, at least one pod holding
resources, and a PodSet (the job, or a sub-group with its own minMember) below
its minimum, counting pods that hold resources (a Releasing pod still counts,
as in KAI's IsGangSatisfied). The first cycle that sees it stale stamps the PodGroup
(``kai.scheduler/stale-podgroup-timestamp``); once stale for the grace period
(``spec.stalenessGracePeriod``, else the scheduler default of 60 s; negative:
never) all its active pods are evicted, so the GPUs a broken gang holds go back
to the cluster. A job no longer stale has its stamp cleared (reference 4.2).
"""

from __future__ import annotations

from kai.api import constants as C
from kai.scheduler.model import ACTIVE_ALLOCATED, ACTIVE_USED, JobInfo, TaskStatus
from kai.scheduler.session import Session


def _unsatisfied(ssn: Session, job: JobInfo) -> tuple[str, int] | None:
    """(sub-group name or '', its minimum) of the first PodSet below its minimum; None if all are satisfied."""
    tasks = ssn.snap.tasks
    leaves = [g for g in job.podgroup.sub_groups if g.min_member is not None and g.min_subgroup is None]
    parents = {g.parent for g in job.podgroup.sub_groups if g.parent}
    leaves = [g for g in leaves if g.name not in parents]
    if not leaves:
        active = sum(1 for t in job.tasks if ssn.status[t] in ACTIVE_USED)
        return None if active >= job.min_available else ("", job.min_available)
    for g in leaves:
        active = sum(
            1
            for t in job.tasks
            if ssn.status[t] in ACTIVE_USED
            and tasks[t].pod.meta.labels.get(C.LABEL_SUBGROUP_NAME, C.DEFAULT_SUBGROUP) == g.name
        )
        if active < (g.min_member or 0):
            return g.name, g.min_member or 0
    return None


class StaleGangEviction:
    name = "stalegangeviction"

    def execute(self, ssn: Session) -> None:
        now = ssn.snap.now
        for job in ssn.snap.jobs:
            pg = job.podgroup
            statuses = [ssn.status[t] for t in job.tasks]
            stale_set = None
            if TaskStatus.SUCCEEDED not in statuses and any(s in ACTIVE_USED for s in statuses):
                stale_set = _unsatisfied(ssn, job)
            if stale_set is None:
                if pg.stale_since is not None:
                    ssn.stale_since[job.index] = None
                continue
            since = pg.stale_since
            if since is None:
                since = now
                ssn.stale_since[job.index] = now
            grace = pg.staleness_grace_period
            if grace is None:
                grace = ssn.conf.default_staleness_grace_period
            if grace < 0 or now - since < grace:
                continue
            self._evict(ssn, job, stale_set)

    def _evict(self, ssn: Session, job: JobInfo, stale_set: tuple[str, int]) -> None:
        name, minimum = stale_set
        where = f" in sub-group {name}" if name else ""
        stmt = ssn.statement()
        victims = [t for t in job.tasks if ssn.status[t] in ACTIVE_ALLOCATED]
        if ssn.disruption_guard(victims) is not None:
            return
        for t in victims:
            stmt.evict(ssn.snap.tasks[t])
        stmt.commit()
        tasks = ssn.snap.tasks
        ssn.record_evictions(
            victims,
            self.name,
            lambda t: (
                f"Workload doesn't meet the minimum required number of pods ({minimum}){where}, evicting remaining "
                f"pod: {tasks[t].namespace}/{tasks[t].name}"
            ),
        )
