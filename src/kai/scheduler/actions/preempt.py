"""preempt: inside one queue, a higher-priority job evicts strictly lower-priority preemptible jobs.

Inference (125) preempts train (50) in the same team queue; equal priorities
never preempt each other, and other queues are reclaim's business. A
non-preemptible preemptor must stay within its queue's quota (reference 4.2).
"""

from __future__ import annotations

from kai.scheduler.actions.evicting import EvictingAction
from kai.scheduler.actions.solver import Scenario
from kai.scheduler.explain import fmt_amount, qres_name
from kai.scheduler.minruntime import preempt_min_runtime, protected
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session


class Preempt(EvictingAction):
    name = "preempt"

    def gate(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        if job.preemptible:
            return None
        qs = ssn.queues
        for a in qs.ancestors[job.queue]:
            quota = ssn.queue_quotas[a]
            for r in range(3):
                if req[r] > 0 and quota[r] != -1 and qs.alloc_np[a][r] + req[r] > quota[r]:
                    return (
                        f"a non-preemptible job may preempt only within quota: queue {ssn.snap.queues[a].name} has "
                        f"{fmt_amount(r, qs.alloc_np[a][r])} non-preemptible + {fmt_amount(r, req[r])} > quota "
                        f"{fmt_amount(r, quota[r])} {qres_name(r)}"
                    )
        return None

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        return [
            v
            for v in ssn.snap.jobs
            if v.queue == job.queue
            and v.index != job.index
            and v.preemptible
            and v.priority < job.priority
            and ssn.evictable_tasks(v)
        ]

    def no_victims(self, ssn: Session, job: JobInfo) -> str:
        return f"no preemptible running jobs of lower priority than {job.priority} in queue {job.queue_name}"

    def core_allowed(self, ssn: Session, preemptor: JobInfo, victim: JobInfo) -> bool:
        return not protected(ssn, victim, preempt_min_runtime(ssn, victim))

    def message(self, ssn: Session, scenario: Scenario, task: TaskInfo) -> str:
        job = scenario.job
        victim = ssn.snap.jobs[task.job]
        return (
            f"Pod {task.namespace}/{task.name} was preempted by higher priority workload {job.ref} "
            f"(priority {job.priority} over {victim.priority}, queue {job.queue_name})"
        )
