"""The ordering plugins: job order (priority, elastic), task order (kubeflow, ray, taskorder) and subgroup order
(subgrouporder), each KAI's plugin of the same name. Each answers its tier of a sort key; the framework
concatenates the tiers in priority order (``Hooks.job_order``), so the first plugin that tells two items
apart decides, as KAI's tiered comparators do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kai.api.objects import Pod
from kai.scheduler.framework import Plugin
from kai.scheduler.model import Gang, JobInfo
from kai.scheduler.session import Session
from kai.scheduler.taskorder import kubeflow_tier, ray_tier, task_priority_tier


class Priority(Plugin):
    """Higher priority first; a preemptor may only take from strictly lower priorities."""

    name: ClassVar[str] = "priority"

    def job_order(self, ssn: Session, job: JobInfo) -> tuple:
        return (-job.priority,)

    def preempt_victim_filter(self, ssn: Session, preemptor: JobInfo, victim: JobInfo) -> bool:
        return victim.priority < preemptor.priority


class Elastic(Plugin):
    """A job below its minimum first, then one at it, then one above it."""

    name: ClassVar[str] = "elastic"

    def job_order(self, ssn: Session, job: JobInfo) -> tuple:
        allocated = ssn.job_allocated[job.index]
        return (0 if allocated < job.min_available else 1 if allocated == job.min_available else 2,)


class Kubeflow(Plugin):
    name: ClassVar[str] = "kubeflow"

    def task_order(self, pod: Pod) -> tuple:
        return kubeflow_tier(pod)


class Ray(Plugin):
    name: ClassVar[str] = "ray"

    def task_order(self, pod: Pod) -> tuple:
        return ray_tier(pod)


class TaskOrder(Plugin):
    name: ClassVar[str] = "taskorder"

    def task_order(self, pod: Pod) -> tuple:
        return task_priority_tier(pod)


class SubGroupOrder(Plugin):
    """Unsatisfied subgroups first, then the lower allocated/minimum ratio (ties: spec order)."""

    name: ClassVar[str] = "subgrouporder"

    def subgroup_order(self, gang: Gang, leaf: int, count: Sequence[int]) -> tuple:
        g = gang.nodes[leaf]
        ratio = count[leaf] / g.min_member if g.min_member > 0 else float("inf")
        return (count[leaf] >= g.min_member, ratio)
