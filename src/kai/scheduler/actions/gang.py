"""Placing one job's pods with subgroup minimums and topology constraints, inside the caller's Statement.

Used by allocate (the job loop) and by the victim solver (the preemptor's pods),
so a placement made by evicting honours the same constraints as one made on
free resources.

Theory of operation (KAI's ``allocateSubGroupSet`` → ``SubsetNodesFn``, kai-behaviour §6).
A *plan* says what to place: pods per leaf, and for every set how many of
which children must succeed. ``place(node)`` walks the subgroup tree: at a
node with a topology constraint it asks ``topology.candidates`` for the
domains that can hold the node's pods and tries them in order, each from a
Statement checkpoint, rolling back a domain that fails; inside a domain it
places the children (a set) or the pods (a leaf, each on the Placer's best
node within the domain's node mask). A set with ``minSubGroup`` k tries its
unsatisfied children in subgroup order until k succeed; a child that fails is
rolled back and the next one is tried. Nothing here commits.

Plans: the *gang phase* (the job is not yet gang satisfied) places the
missing pods of every unsatisfied required leaf; the *elastic phase* places
one more pod (or the missing pods of an optional leaf as one unit) along the
path from the root to its leaf; a *fixed* plan (the solver) places exactly the
pods it is given.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from kai.scheduler.explain import explain_no_node
from kai.scheduler.model import ACTIVE_ALLOCATED, GPU, JobInfo, TaskInfo, TaskStatus
from kai.scheduler.session import Session, Statement
from kai.scheduler.subgroups import (
    Gang,
    counts,
    node_satisfied,
    pending_of,
)
from kai.scheduler.topology import Constraint, TopologyError, candidates


@dataclass(slots=True)
class Plan:
    leaf_tasks: dict[int, list[TaskInfo]] = field(default_factory=dict)  # leaf -> pods to place, in order
    need: dict[int, int] = field(default_factory=dict)  # set -> children that must succeed
    tryable: dict[int, list[int]] = field(default_factory=dict)  # set -> children to try, in order
    extra: list[TaskInfo] = field(default_factory=list)  # root minMember beyond the leaves' minimums
    gang_phase: bool = True

    def demand(self, gang: Gang, node: int = 0) -> list[TaskInfo]:
        """The pods placing *node* needs at least: its leaf pods, or those of its first ``need`` children."""
        if gang.nodes[node].leaf:
            return list(self.leaf_tasks.get(node, ()))
        out: list[TaskInfo] = []
        for c in self.tryable.get(node, [])[: self.need.get(node, 0)]:
            out += self.demand(gang, c)
        return out

    def tasks(self, gang: Gang) -> list[TaskInfo]:
        return self.demand(gang) + self.extra


def is_simple(job: JobInfo) -> bool:
    """A flat gang with no topology constraint: the classic path, unchanged."""
    return job.gang is None or (job.gang.flat and not job.gang.constrained)


def job_constraints(ssn: Session, job: JobInfo) -> list[Constraint | None]:
    """Each gang node's resolved constraint (the topology plugin's ``subset_nodes``); raises TopologyError naming
    the job (and subgroup). Without a topology plugin a constraint cannot be honoured: the job says so."""
    got = ssn.hooks.subset_nodes(ssn, job)
    if got is None:
        raise TopologyError(f"podgroup {job.ref} has a topology constraint, but the topology plugin is disabled")
    return got


def _order(ssn: Session, gang: Gang, nodes: list[int], count: list[int]) -> list[int]:
    """Subgroup order: leaves and sets by the subgroup_order plugins (KAI's subgrouporder: unsatisfied first,
    then the lower ratio of members to threshold); ties in spec order."""
    subgroup_order = ssn.hooks.subgroup_order
    return sorted(nodes, key=lambda n: (*subgroup_order(gang, n, count), n))


def plan_for(ssn: Session, job: JobInfo) -> Plan:
    """The gang phase while the job is below its minimums, else the elastic phase."""
    gang = job.gang
    assert gang is not None
    count = counts(gang, ssn.status, ACTIVE_ALLOCATED)
    if not node_satisfied(gang, 0, count):
        return _plan_gang(ssn, gang, count)
    return _plan_elastic(ssn, gang, count)


def _plan_gang(ssn: Session, gang: Gang, count: list[int]) -> Plan:
    plan = Plan()
    status = ssn.status
    tasks = ssn.snap.tasks
    planned = 0

    def walk(node: int) -> None:
        nonlocal planned
        g = gang.nodes[node]
        if g.leaf:
            missing = g.min_member - count[node]
            if missing > 0:
                plan.leaf_tasks[node] = [tasks[t] for t in pending_of(gang, node, status)[:missing]]
                planned += len(plan.leaf_tasks[node])
            return
        kids = [c for c in g.children if gang.nodes[c].counted]
        done = sum(1 for c in kids if node_satisfied(gang, c, count))
        todo = _order(ssn, gang, [c for c in kids if not node_satisfied(gang, c, count)], count)
        plan.need[node] = max(0, gang.required(node) - done)
        plan.tryable[node] = todo
        for c in todo:
            walk(c)

    walk(0)
    short = gang.nodes[0].min_member - count[0] - planned
    if short > 0:  # the root asks for more pods than its leaves' minimums: any pending pods, in leaf order
        chosen = {t.index for ts in plan.leaf_tasks.values() for t in ts}
        for leaf in _order(ssn, gang, [i for i, g in enumerate(gang.nodes) if g.leaf], count):
            for t in pending_of(gang, leaf, status):
                if short > 0 and t not in chosen:
                    plan.extra.append(tasks[t])
                    short -= 1
    return plan


def _plan_elastic(ssn: Session, gang: Gang, count: list[int]) -> Plan:
    """One pod (or an optional leaf's missing pods) along the path to the first leaf in subgroup order, chosen
    from the root down as KAI's collectTasksFromSubGroupSet does: at each set, the first child in subgroup
    order that has pending pods."""
    status = ssn.status
    waiting = [False] * len(gang.nodes)  # the node's subtree has pending pods
    for i in range(len(gang.nodes) - 1, -1, -1):  # children come after parents
        g = gang.nodes[i]
        if g.leaf:
            waiting[i] = waiting[i] or bool(pending_of(gang, i, status))
        if waiting[i] and g.parent >= 0:
            waiting[g.parent] = True
    plan = Plan(gang_phase=False)
    if not waiting[0]:
        return plan
    leaf = 0
    while not gang.nodes[leaf].leaf:
        leaf = _order(ssn, gang, [c for c in gang.nodes[leaf].children if waiting[c]], count)[0]
    missing = max(1, gang.nodes[leaf].min_member - count[leaf])
    plan.leaf_tasks[leaf] = [ssn.snap.tasks[t] for t in pending_of(gang, leaf, status)[:missing]]
    _route(plan, gang, leaf)
    return plan


def _route(plan: Plan, gang: Gang, leaf: int) -> None:
    path = gang.path(leaf)
    for parent, child in itertools.pairwise(path):
        if child not in plan.tryable.setdefault(parent, []):
            plan.tryable[parent].append(child)
            plan.need[parent] = plan.need.get(parent, 0) + 1


def plan_fixed(gang: Gang, tasks: list[TaskInfo]) -> Plan:
    """Exactly *tasks*, every one mandatory (the solver's preemptor pods)."""
    plan = Plan()
    for t in tasks:
        leaf = gang.leaf(t.index)
        plan.leaf_tasks.setdefault(leaf, []).append(t)
    for leaf in sorted(plan.leaf_tasks):
        _route(plan, gang, leaf)
    return plan


def tasks_to_allocate(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The pods the next attempt for *job* places: KAI's GetTasksToAllocate with subgroups."""
    if job.gang is None or job.gang.flat:
        return ssn.tasks_to_allocate(job)
    return plan_for(ssn, job).tasks(job.gang)


class JobPlacement:
    """One attempt to place a plan for *job* inside *stmt* (see the module docstring)."""

    def __init__(self, ssn: Session, stmt: Statement, job: JobInfo, constraints: list[Constraint | None]) -> None:
        assert job.gang is not None
        self.ssn = ssn
        self.stmt = stmt
        self.job = job
        self.gang = job.gang
        self.constraints = constraints
        self.plan = Plan()
        self.why = ""
        self.max_placed = 0
        self._base = stmt.checkpoint()

    def run(self, plan: Plan) -> bool:
        """Place *plan*; on False the statement may hold partial work the caller rolls back."""
        self.plan = plan
        if not self._place(0, None, None):
            return False
        for task in plan.extra:
            leaf = self.gang.leaf(task.index)
            self.plan = Plan(leaf_tasks={leaf: [task]})
            _route(self.plan, self.gang, leaf)
            if not self._place(0, None, None):
                return False
        return True

    # --- the walk ---------------------------------------------------------------------------------

    def _has_work(self, node: int) -> bool:
        g = self.gang.nodes[node]
        if g.leaf:
            return node in self.plan.leaf_tasks  # even with no pods: a leaf short of pods must fail, not pass
        return self.plan.need.get(node, 0) > 0

    def _place(self, node: int, allowed: np.ndarray | None, bonus: np.ndarray | None) -> bool:
        if not self._has_work(node):
            return True
        con = self.constraints[node]
        if con is None:
            return self._place_inner(node, allowed, bonus)
        ssn = self.ssn
        demand = self.plan.demand(self.gang, node)
        if not demand:  # only leaves short of pods: they fail with their own reason
            return self._place_inner(node, allowed, bonus)
        n = ssn.snap.nodes.n
        mask = np.ones(n, dtype=bool) if allowed is None else allowed.copy()
        for sig in {t.signature for t in demand}:
            mask &= ssn.static_fit(next(t for t in demand if t.signature == sig)).mask
        requests = np.array([t.request for t in demand])
        pinned = None
        if con.required is not None:
            pinned = np.zeros(n, dtype=bool)
            nodes = [ssn.node[t] for t in self._subtree_tasks(node) if ssn.status[t] in ACTIVE_ALLOCATED]
            pinned[[x for x in nodes if x >= 0]] = True
        free = ssn.idle + ssn.releasing
        if ssn.any_groups:  # room left on shared GPUs counts for fractional pods (a bound; placement decides)
            free[:, GPU] = ssn.free_gpu_milli()
        cands = candidates(
            con,
            mask,
            free,
            requests.max(axis=0),
            requests.sum(axis=0),
            len(demand),
            pinned,
        )
        tried = 0
        for cand in cands:
            cp = self.stmt.checkpoint()
            if self._place_inner(node, cand.mask, cand.bonus if cand.bonus is not None else bonus):
                return True
            self.stmt.rollback(cp)
            tried += 1
        where = "" if node == 0 else f"{self.gang.nodes[node].label}: "
        self.why = where + cands.failure(tried, self.why)
        return False

    def _subtree_tasks(self, node: int) -> list[int]:
        g = self.gang.nodes[node]
        if g.leaf:
            return g.tasks
        return [t for c in g.children for t in self._subtree_tasks(c)]

    def _place_inner(self, node: int, allowed: np.ndarray | None, bonus: np.ndarray | None) -> bool:
        g = self.gang.nodes[node]
        if g.leaf:
            return self._place_leaf(node, allowed, bonus)
        need = self.plan.need.get(node, 0)
        options = self.plan.tryable.get(node, [])
        for i, child in enumerate(options):
            if need == 0:
                break
            if len(options) - i < need:
                return False
            cp = self.stmt.checkpoint()
            if self._place(child, allowed, bonus):
                need -= 1
            else:
                self.stmt.rollback(cp)
        return need == 0

    def _place_leaf(self, node: int, allowed: np.ndarray | None, bonus: np.ndarray | None) -> bool:
        ssn, stmt = self.ssn, self.stmt
        g = self.gang.nodes[node]
        todo = self.plan.leaf_tasks.get(node, [])
        if self.plan.gang_phase and g.min_member > 0:
            have = sum(1 for t in g.tasks if ssn.status[t] in ACTIVE_ALLOCATED) + len(todo)
            if have < g.min_member:
                self.why = f"{g.label} has {have} pods that could run, its minMember is {g.min_member}"
                return False
        placer = ssn.placer
        for task in todo:
            choice = placer.best_node(task, allowed, bonus)
            if choice is None:
                why = explain_no_node(ssn, task)
                self.why = why if allowed is None else f"inside the domain: {why}"
                return False
            (stmt.allocate if choice.now else stmt.pipeline)(task, choice.node, choice.gpus)
            self.max_placed = max(self.max_placed, stmt.checkpoint() - self._base)
        return True


def place_fixed(ssn: Session, stmt: Statement, job: JobInfo, tasks: list[TaskInfo]) -> list[int] | None:
    """Place exactly *tasks* of *job* (all or none) honouring its constraints; their node rows, or None."""
    try:
        constraints = job_constraints(ssn, job)
    except TopologyError:
        return None
    assert job.gang is not None
    jp = JobPlacement(ssn, stmt, job, constraints)
    if not jp.run(plan_fixed(job.gang, tasks)):
        return None
    status = ssn.status
    if any(status[t.index] not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED) for t in tasks):
        return None
    return [ssn.node[t.index] for t in tasks]
