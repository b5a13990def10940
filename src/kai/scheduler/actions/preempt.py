"""preempt: inside one queue, a higher-priority job evicts strictly lower-priority preemptible jobs.

Inference (125) preempts train (50) in the same team queue; equal priorities
never preempt each other, and other queues are reclaim's business. A
non-preemptible preemptor must stay within its queue's quota (kai-behaviour §4.2),
which the shared capacity check (NonPreemptibleOverQuota) enforces before any search.
"""

from __future__ import annotations

from kai.scheduler.actions.evicting import EvictingAction, preemptible_jobs
from kai.scheduler.actions.solver import Scenario
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session


class Preempt(EvictingAction):
    name = "preempt"

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        return [
            v
            for v in preemptible_jobs(ssn, job.queue)
            if v.index != job.index
            and ssn.evictable_tasks(v)
            and ssn.hooks.preempt_victim_filter(ssn, job, v)  # priority: strictly lower priorities only
        ]

    def no_victims(self, ssn: Session, job: JobInfo) -> str:
        return f"no preemptible running jobs of lower priority than {job.priority} in queue {job.queue_name}"

    def validate(self, ssn: Session, scenario: Scenario) -> str | None:
        return ssn.hooks.preempt_scenario_validator(ssn, scenario)

    def message(self, ssn: Session, scenario: Scenario, task: TaskInfo) -> str:
        job = scenario.job
        victim = ssn.snap.jobs[task.job]
        return (
            f"Pod {task.namespace}/{task.name} was preempted by higher priority workload {job.ref} "
            f"(priority {job.priority} over {victim.priority}, queue {job.queue_name})"
        )
