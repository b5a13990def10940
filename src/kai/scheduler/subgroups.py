"""A job's gang as a tree of subgroups (KAI's SubGroupSet / PodSet), and when it is satisfied.

Rules: pure functions of a PodGroup, its tasks and a task-status list; no
Session. The tree is built once per snapshot (``attach_gang``) and read by
allocate, the eviction actions and stale gang eviction, so all of them agree
on what "gang satisfied" means.

Shape (kai-behaviour §2.2, KAI's ``subgroup_info.FromPodGroup``):

* a PodGroup without ``spec.subGroups`` is one leaf holding every pod, whose
  minimum is ``minMember``;
* otherwise the root is a set whose children are the subgroups without a
  parent; a subgroup with children is a set, one without is a leaf (a PodSet)
  holding the pods labelled ``kai.scheduler/subgroup-name: <leaf>``.
* A leaf is satisfied when at least ``minMember`` of its pods are counted; a
  set when at least ``minSubGroup`` of its children are satisfied (all of them
  when ``minSubGroup`` is unset). The root also needs ``minMember`` pods in
  all when ``spec.minSubGroup`` is unset (a PyTorchJob's minAvailable).
* Pods naming no leaf (no label, an unknown name, a set's name) go to an
  implicit leaf ``default`` with minimum 0 that never counts towards a set's
  ``minSubGroup`` (KAI puts unlabelled pods in the ``default`` PodSet).

``min_pods`` is the fewest pods that can satisfy the tree; the snapshot uses it
as the job's ``min_available`` so job order, victims' core/surplus split and
"waiting for N pods" speak of the same number.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kai.api import constants as C
from kai.api.objects import PodGroup, TopologyConstraint
from kai.scheduler.model import Gang, GangNode, TaskInfo, TaskStatus


def _constrained(tc: TopologyConstraint | None) -> bool:
    return tc is not None and bool(tc.topology or tc.required_level or tc.preferred_level)


def build_gang(pg: PodGroup, tasks: Sequence[TaskInfo]) -> Gang:
    """The subgroup tree of *pg* with *tasks* (the job's tasks, in task order) in their leaves."""
    if not pg.sub_groups:
        return _flat(pg, [t.index for t in tasks])
    root = GangNode(
        "",
        -1,
        min_member=pg.min_member if pg.min_subgroup is None else 0,
        min_subgroup=pg.min_subgroup,
        constraint=pg.topology_constraint,
        leaf=False,
    )
    nodes = [root]
    index: dict[str, int] = {}
    has_children = {g.parent for g in pg.sub_groups if g.parent}
    pending = list(pg.sub_groups)
    while pending:  # parents before children (the parser rejected cycles and missing parents)
        rest = []
        for g in pending:
            if g.parent is not None and g.parent not in index:
                rest.append(g)
                continue
            parent = 0 if g.parent is None else index[g.parent]
            leaf = g.name not in has_children
            node = GangNode(
                g.name,
                parent,
                min_member=(g.min_member or 0) if leaf else 0,
                min_subgroup=None if leaf else g.min_subgroup,
                constraint=g.topology_constraint,
                leaf=leaf,
            )
            index[g.name] = len(nodes)
            nodes[parent].children.append(len(nodes))
            nodes.append(node)
        pending = rest
    leaf_of: dict[int, int] = {}
    loose: list[int] = []
    for t in tasks:
        name = t.pod.meta.labels.get(C.LABEL_SUBGROUP_NAME, C.DEFAULT_SUBGROUP)
        ni = index.get(name)
        if ni is None or not nodes[ni].leaf:
            loose.append(t.index)
            continue
        nodes[ni].tasks.append(t.index)
        leaf_of[t.index] = ni
    if loose:
        implicit = GangNode(C.DEFAULT_SUBGROUP, 0, counted=False)
        implicit.tasks = loose
        root.children.append(len(nodes))
        for t in loose:
            leaf_of[t] = len(nodes)
        nodes.append(implicit)
    gang = Gang(nodes, leaf_of, 0, any(_constrained(n.constraint) for n in nodes))
    gang.min_pods = min_pods(gang, 0)
    return gang


def _flat(pg: PodGroup, task_indices: list[int]) -> Gang:
    """One leaf with every pod; ``leaf_of`` stays empty (``Gang.leaf`` answers 0), so the snapshot pays
    one object per job, not one dict entry per pod."""
    root = GangNode("", -1, min_member=pg.min_member, constraint=pg.topology_constraint, tasks=task_indices)
    return Gang([root], {}, pg.min_member, _constrained(pg.topology_constraint))


def min_pods(gang: Gang, node: int) -> int:
    g = gang.nodes[node]
    if g.leaf:
        return g.min_member
    mins = sorted(min_pods(gang, c) for c in g.children if gang.nodes[c].counted)
    return max(sum(mins[: gang.required(node)]), g.min_member)


def attach_gang(job, tasks: Sequence[TaskInfo]) -> None:
    """Give *job* (a JobInfo whose task list is final) its gang; a subgroup job's min_available becomes the
    fewest pods that satisfy every required subgroup."""
    if not job.podgroup.sub_groups:
        job.gang = _flat(job.podgroup, job.tasks)  # the job's own (final) task list
        return
    gang = build_gang(job.podgroup, [tasks[t] for t in job.tasks])
    job.gang = gang
    if not gang.flat:
        job.min_available = gang.min_pods


def counts(gang: Gang, status: Sequence[TaskStatus], states: Collection[TaskStatus]) -> list[int]:
    """Per node, how many of its pods (a set: of its subtree's pods) have a status in *states*."""
    out = [0] * len(gang.nodes)
    for i in range(len(gang.nodes) - 1, -1, -1):  # children come after parents: sum bottom-up
        g = gang.nodes[i]
        if g.leaf:
            out[i] = sum(1 for t in g.tasks if status[t] in states)
        if g.parent >= 0:
            out[g.parent] += out[i]
    return out


def node_satisfied(gang: Gang, node: int, count: Sequence[int]) -> bool:
    g = gang.nodes[node]
    if g.leaf:
        return count[node] >= g.min_member
    ok = sum(1 for c in g.children if gang.nodes[c].counted and node_satisfied(gang, c, count))
    return ok >= gang.required(node) and count[node] >= g.min_member


def first_unsatisfied(gang: Gang, count: Sequence[int], node: int = 0) -> int | None:
    """The deepest node that keeps the tree unsatisfied (a leaf below its minMember if there is one)."""
    if node_satisfied(gang, node, count):
        return None
    for c in gang.nodes[node].children:
        if gang.nodes[c].counted:
            hit = first_unsatisfied(gang, count, c)
            if hit is not None:
                return hit
    return node


def satisfied(gang: Gang, status: Sequence[TaskStatus], states: Collection[TaskStatus]) -> bool:
    return node_satisfied(gang, 0, counts(gang, status, states))


def surplus_task(gang: Gang, active: Sequence[int], min_available: int) -> int | None:
    """Position in *active* (a job's evictable tasks, in task order) of the last task whose loss keeps the
    gang satisfied, or None when every one is part of the core. Flat gangs: the last one above minMember."""
    if gang.flat:
        return len(active) - 1 if len(active) > min_available else None
    count = [0] * len(gang.nodes)
    for t in active:
        for n in gang.path(gang.leaf(t)):
            count[n] += 1
    if not node_satisfied(gang, 0, count):
        return None
    for pos in range(len(active) - 1, -1, -1):
        path = gang.path(gang.leaf(active[pos]))
        for n in path:
            count[n] -= 1
        ok = node_satisfied(gang, 0, count)
        for n in path:
            count[n] += 1
        if ok:
            return pos
    return None


def pending_of(gang: Gang, node: int, status: Sequence[TaskStatus]) -> list[int]:
    return [t for t in gang.nodes[node].tasks if status[t] == TaskStatus.PENDING]
