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
from kai.scheduler.subgroups import node_satisfied
from kai.scheduler.taskorder import kubeflow_tier, ray_tier, task_priority_tier


class Priority(Plugin):
    """Higher priority first. (That a preemptor takes only from strictly lower priorities is the preempt
    action's own rule, as KAI's buildFilterFuncForPreempt.)"""

    name: ClassVar[str] = "priority"

    def job_order(self, ssn: Session, job: JobInfo) -> tuple:
        return (-job.priority,)


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
    """KAI's subgrouporder (orderByAllocationRatio), for leaves and sets alike: a member is a leaf's active pod
    or a set's satisfied child, the threshold its minMember or minSubGroup (all its children when unset).
    Unsatisfied subgroups first (tied among themselves); then required before optional (threshold 0); among
    optional ones fewer members first, among required ones the lower members/threshold ratio (ties: spec
    order). allocateElastic_test.go 'Elastic allocation: satisfied PodSets in two-parent tree, lower-ratio group
    wins consecutive extra slots' compares two sets by satisfied children, not by pods."""

    name: ClassVar[str] = "subgrouporder"

    def subgroup_order(self, gang: Gang, node: int, count: Sequence[int]) -> tuple:
        g = gang.nodes[node]
        if g.leaf:
            members, threshold = count[node], g.min_member
        else:
            members = sum(1 for c in g.children if gang.nodes[c].counted and node_satisfied(gang, c, count))
            threshold = gang.required(node)
        if members < threshold:
            return (False, False, 0.0)
        if threshold == 0:
            return (True, True, float(members))
        return (True, False, members / threshold)
