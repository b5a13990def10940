"""stalegangeviction: a gang that lost members and cannot run is evicted whole after a grace period.

A job is stale when it has no Succeeded pod, at least one pod holding
resources, and a PodSet (the job, or a sub-group with its own minMember) below
its minimum, counting pods that hold resources (a Releasing pod still counts,
as in KAI's IsGangSatisfied). The first cycle that sees it stale stamps the PodGroup
(``kai.scheduler/stale-podgroup-timestamp``); once stale for the grace period
(``spec.stalenessGracePeriod``, else the scheduler default of 60 s; negative:
never) all its active pods are evicted, so the GPUs a broken gang holds go back
to the cluster. A job no longer stale has its stamp cleared (kai-behaviour §4.2).
"""

from __future__ import annotations

from kai.scheduler.model import ACTIVE_ALLOCATED, ACTIVE_USED, JobInfo, TaskStatus
from kai.scheduler.session import Session
from kai.scheduler.subgroups import counts, first_unsatisfied, min_pods


def _unsatisfied(ssn: Session, job: JobInfo) -> tuple[str, int] | None:
    """(sub-group name or '', its minimum in pods) of the PodSet keeping the gang unsatisfied; None if satisfied.

    Subgroup jobs are judged per subgroup (leaves' minMember, sets' minSubGroup), so one leaf short makes the
    whole job stale."""
    gang = job.gang
    if gang is None or gang.flat:
        active = sum(1 for t in job.tasks if ssn.status[t] in ACTIVE_USED)
        return None if active >= job.min_available else ("", job.min_available)
    count = counts(gang, ssn.status, ACTIVE_USED)
    hit = first_unsatisfied(gang, count)
    if hit is None:
        return None
    g = gang.nodes[hit]
    return g.name, (g.min_member if g.leaf else min_pods(gang, hit))


def _may_act(ssn: Session, job: JobInfo, touched: set[int]) -> bool:
    """Whether ``_check`` could stamp, clear or evict *job*. A stamped job always gets the check. Otherwise
    one with no pod holding resources has nothing to stamp; and a flat gang this cycle did not touch is
    judged from its snapshot sums, where its pods' statuses are the snapshot's: most jobs of a big cycle
    run whole, and reading each one's pods every cycle was a tenth of a cycle at 20,000 jobs."""
    if job.podgroup.stale_since is not None:
        return True
    sums = job.sums
    if sums is None or job.index in touched:
        return any(ssn.status[t] in ACTIVE_USED for t in job.tasks)
    if sums.used == 0:
        return False
    gang = job.gang
    if gang is None or gang.flat:  # _check's test, on the same statuses
        return not sums.succeeded and sums.used < job.min_available
    return True


class StaleGangEviction:
    name = "stalegangeviction"

    def execute(self, ssn: Session) -> None:
        tasks = ssn.snap.tasks
        touched = {tasks[t].job for t in ssn.changed}  # jobs whose pods this cycle moved
        for job in ssn.snap.jobs:
            if job.index in ssn.job_errors or not _may_act(ssn, job, touched):
                continue
            mark = ssn.begin_job()
            try:
                self._check(ssn, job)
            except Exception as e:  # one job's failure costs only that job (Session.drop_job)
                ssn.drop_job(job, self.name, e, mark)
                ssn.stale_since.pop(job.index, None)

    def _check(self, ssn: Session, job: JobInfo) -> None:
        """Stamp, clear or act on *job*'s stale-gang timestamp."""
        now = ssn.snap.now
        pg = job.podgroup
        statuses = [ssn.status[t] for t in job.tasks]
        stale_set = None
        if TaskStatus.SUCCEEDED not in statuses and any(s in ACTIVE_USED for s in statuses):
            stale_set = _unsatisfied(ssn, job)
        if stale_set is None:
            if pg.stale_since is not None:
                ssn.stale_since[job.index] = None
            return
        since = pg.stale_since
        if since is None:
            since = now
            ssn.stale_since[job.index] = now
        grace = pg.staleness_grace_period
        if grace is None:
            grace = ssn.conf.default_staleness_grace_period
        if grace < 0 or now - since < grace:
            return
        self._evict(ssn, job, stale_set)

    def _evict(self, ssn: Session, job: JobInfo, stale_set: tuple[str, int]) -> None:
        name, minimum = stale_set
        where = f" in sub-group {name}" if name else ""
        stmt = ssn.statement()
        # a pod bound to a node that is not in the snapshot (deleted, or kept out as a bad object) holds nothing
        # kai accounts for: it is not evicted here (nothing to free; Session.evict has no node row for it)
        victims = [t for t in job.tasks if ssn.status[t] in ACTIVE_ALLOCATED and ssn.node[t] >= 0]
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
