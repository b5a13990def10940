"""reclaim: a queue below its fair share takes resources back from queues above theirs (reference 4.2, 4.4.4).

Preemptors are pending jobs whose queue stays within its fair share with them
(within quota for non-preemptible jobs). Victims are preemptible jobs of other
queues that the leveled-queue filter allows; a scenario must leave every
victim queue at or above what KAI's strategies protect (MaintainFairShare or
GuaranteeDeservedQuota) and the reclaimer no more saturated than the siblings
it took from. Evicted pods are told who took their place and the numbers.
"""

from __future__ import annotations

from kai.scheduler.actions.evicting import EvictingAction
from kai.scheduler.actions.solver import Scenario
from kai.scheduler.capacity import job_request
from kai.scheduler.minruntime import protected, reclaim_min_runtime
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.reclaimable import ReclaimRules
from kai.scheduler.session import Session


class Reclaim(EvictingAction):
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        self._rules = ReclaimRules(ssn)
        super().execute(ssn)

    def gate(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        return self._rules.cannot_reclaim(job, req)

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        rules = self._rules
        return [
            v
            for v in ssn.snap.jobs
            if v.queue >= 0
            and v.queue != job.queue
            and v.preemptible
            and ssn.evictable_tasks(v)
            and rules.victim_allowed(job, req, v)
        ]

    def no_victims(self, ssn: Session, job: JobInfo) -> str:
        return "no other queue is above its quota or fair share with preemptible running jobs"

    def core_allowed(self, ssn: Session, preemptor: JobInfo, victim: JobInfo) -> bool:
        return not protected(ssn, victim, reclaim_min_runtime(ssn, preemptor, victim))

    def validate(self, ssn: Session, scenario: Scenario) -> str | None:
        tasks = ssn.snap.tasks
        moved = {t for t, _ in scenario.moved}
        victims = []
        for unit in scenario.evicted:
            lost = [0, 0, 0]
            for t in unit.tasks:
                if t in moved and ssn.conf.allow_consolidating_reclaim:
                    continue
                if t in moved or t in scenario.evicted_tasks:
                    g, c, m = tasks[t].qreq
                    lost[0] += g
                    lost[1] += c
                    lost[2] += m
            victims.append((ssn.snap.jobs[unit.job].queue, (lost[0], lost[1], lost[2])))
        return self._rules.reject(scenario.job, job_request(scenario.tasks), victims, scenario.before_alloc)

    def message(self, ssn: Session, scenario: Scenario, task: TaskInfo) -> str:
        rules = self._rules
        job = scenario.job
        victim_queue = ssn.snap.jobs[task.job].queue
        rq, vq = rules.leveled(job.queue, victim_queue)
        before = scenario.before_alloc
        return (
            f"Pod {task.namespace}/{task.name} was preempted by workload {job.ref}.\n"
            f"{rules.describe(rq, before[rq])}\n{rules.describe(vq, before[vq])}"
        )
