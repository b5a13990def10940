"""preempt: inside one queue, a higher-priority job evicts strictly lower-priority preemptible jobs.

Inference (125) preempts train (50) in the same team queue; equal priorities
never preempt each other (the action's own rule, as in KAI: ``victims``), and
other queues are reclaim's business. A non-preemptible preemptor must stay
within its queue's quota (kai-behaviour §4.2), which the shared capacity check
(NonPreemptibleOverQuota) enforces before any search.
"""

from __future__ import annotations

from bisect import bisect_left

from kai.scheduler.actions.evicting import EvictingAction, preemptible_jobs
from kai.scheduler.actions.solver import Scenario
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session


class Preempt(EvictingAction):
    name = "preempt"

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        """KAI's buildFilterFuncForPreempt: preemptible jobs of the preemptor's queue with strictly lower
        priority, with pods placed before this cycle, that every ``preempt_victim_filter`` allows."""
        lower = _lower_priority(ssn, job.queue, job.priority)
        filter_ = ssn.hooks.preempt_victim_filter
        return [v for v in lower if ssn.evictable_tasks(v) and filter_(ssn, job, v)]

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


def _lower_priority(ssn: Session, queue: int, priority: int) -> list[JobInfo]:
    """The preemptible jobs of leaf *queue* below *priority*, in job index order. Every pending job of a
    queue asks, and in a queue of equal priorities the answer is always none: the sorted priorities (once per
    Session, from the snapshot alone) say so without a walk over the queue's jobs."""
    by_queue = ssn.cache.setdefault("preemptible_priorities", {})
    priorities = by_queue.get(queue)
    if priorities is None:
        priorities = by_queue[queue] = sorted(v.priority for v in preemptible_jobs(ssn, queue))
    if bisect_left(priorities, priority) == 0:
        return []
    return [v for v in preemptible_jobs(ssn, queue) if v.priority < priority]
