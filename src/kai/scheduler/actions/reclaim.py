"""reclaim: a queue below its fair share takes resources back from queues above theirs (kai-behaviour §4.2, 4.4.4).

Preemptors are pending jobs whose queue stays within its fair share with them
(within quota for non-preemptible jobs). Victims are preemptible jobs of other
queues that the leveled-queue filter allows; a scenario must leave every
victim queue at or above what KAI's strategies protect (MaintainFairShare or
GuaranteeDeservedQuota) and the reclaimer no more saturated than the siblings
it took from. Evicted pods are told who took their place and the numbers.
"""

from __future__ import annotations

from kai.scheduler.actions.evicting import EvictingAction, preemptible_jobs
from kai.scheduler.actions.solver import Scenario
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.plugins.proportion import reclaim_rules
from kai.scheduler.session import Session


class Reclaim(EvictingAction):
    name = "reclaim"

    def gate(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        return ssn.hooks.can_reclaim(ssn, job, req)

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        hooks = ssn.hooks
        return [
            v
            for v in preemptible_jobs(ssn)
            if v.queue != job.queue and ssn.evictable_tasks(v) and hooks.reclaim_victim_filter(ssn, job, req, v)
        ]

    def no_victims(self, ssn: Session, job: JobInfo) -> str:
        return "no other queue is above its quota or fair share with preemptible running jobs"

    def validate(self, ssn: Session, scenario: Scenario) -> str | None:
        return ssn.hooks.reclaim_scenario_validator(ssn, scenario)

    def message(self, ssn: Session, scenario: Scenario, task: TaskInfo) -> str:
        job = scenario.job
        text = f"Pod {task.namespace}/{task.name} was preempted by workload {job.ref}."
        rules = reclaim_rules(ssn)
        if rules is None:  # the numbers are proportion's
            return text
        rq, vq = rules.leveled(job.queue, ssn.snap.jobs[task.job].queue)
        before = scenario.before_alloc
        return f"{text}\n{rules.describe(rq, before[rq])}\n{rules.describe(vq, before[vq])}"
