"""allocate: place pending jobs on free (or releasing) resources, gangs all-or-nothing. Never evicts.

For each job in queue order (KAI's allocate.go): check the queue's limit and
non-preemptible quota; take the tasks to allocate (the missing gang members, or
one elastic task); place each on its best node inside a Statement, on idle
resources if they fit now, else pipelined onto resources being released. If
any task is pipelined while the gang is below its minimum, the whole gang is
pipelined. Commit on success, roll back on failure. A job with more pending
tasks goes back into the queue so elastic pods interleave across queues.

A job with subgroups or a topology constraint goes through
``actions.gang``: its plan (every unsatisfied required subgroup's missing pods,
or one elastic pod) is placed domain by domain, each domain tried from a
Statement checkpoint; a constraint naming a missing Topology or level fails
the job with that reason and touches nothing else.

Fast path: capacity only shrinks during allocate, so once k tasks of one
(signature, request) could not all be placed, no later attempt needing >= k of
them can succeed; such jobs fail without a search, with the same reason.
"""

from __future__ import annotations

from kai.scheduler.actions.common import pipeline_whole_gang_if_needed
from kai.scheduler.actions.gang import JobPlacement, is_simple, job_constraints, plan_for
from kai.scheduler.explain import explain_no_node, gang_message
from kai.scheduler.gpusharing import NOW
from kai.scheduler.model import JobInfo, TaskInfo, TaskStatus
from kai.scheduler.ordering import JobQueue
from kai.scheduler.session import Session, Statement
from kai.scheduler.topology import TopologyError


class Allocate:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        candidates = ssn.ready_jobs()
        # nominations are rare (room an eviction made in an earlier cycle): one pass over the tasks rules them out
        # instead of a generator per candidate job
        nominations = ssn.hooks.enabled("nominatednode") and _any_nominated(ssn)
        nominated = [job for job in candidates if _nominated(ssn, job)] if nominations else []
        if nominated:
            _honor_nominations(ssn, nominated)
            candidates = [job for job in candidates if job.index not in ssn.job_errors and ssn.pending_tasks(job)]
        queue = JobQueue(ssn, candidates, ssn.conf.queue_depth(self.name))
        impossible: dict[tuple[int, bytes], tuple[int, str]] = {}  # (sig, request) -> (min count that failed, why)
        journal = ssn.journal
        while (job := queue.pop()) is not None:
            journal.clear()  # Session.begin_job, inlined: a new job's attempt (10,000 of them in a big cycle)
            try:
                again = _allocate_gang(ssn, job) if not is_simple(job) else _allocate_job(ssn, job, impossible)
            except Exception as e:  # one job's failure costs only that job (Session.drop_job)
                ssn.drop_job(job, self.name, e, 0)
                continue
            if again:
                queue.push(job)


def _allocate_job(ssn: Session, job: JobInfo, impossible: dict[tuple[int, bytes], tuple[int, str]]) -> bool:
    """One attempt of a plain job (no subgroups, no topology): its missing gang members, or one elastic pod,
    inside a Statement. True when it was placed and has more pending pods (the caller queues it again)."""
    pending = ssn.pending_tasks(job)
    tasks = ssn.tasks_to_allocate(job, pending)
    if not tasks:
        return False
    failure = ssn.hooks.job_over_capacity(ssn, job, tasks)
    if failure is not None:
        ssn.failures[job.index] = failure
        return False
    shape = uniform_shape(tasks, ssn)
    if shape is not None and ssn.hooks.has_node_filter and not _fails_for_good(ssn, tasks):
        shape = None
    known = impossible.get(shape) if shape is not None else None
    if known is not None and len(tasks) >= known[0]:
        ssn.fail(job, "Unschedulable", known[1])
        return False
    # placing *tasks* takes exactly them out of PENDING, so what is left is known before placing
    more_pending = len(pending) > len(tasks)
    stmt = ssn.statement()
    placed, why = _place(ssn, stmt, tasks)
    if placed == len(tasks):
        pipeline_whole_gang_if_needed(ssn, stmt, job)
        stmt.commit()
        ssn.failures.pop(job.index, None)
        return more_pending
    stmt.rollback()
    missing = job.min_available - ssn.job_allocated[job.index]
    message = gang_message(placed, max(missing, 1), why) if missing > 0 else why
    ssn.fail(job, "Unschedulable", message)
    if shape is not None:
        prev = impossible.get(shape)
        if prev is None or len(tasks) < prev[0]:
            impossible[shape] = (len(tasks), message)
    return False


def _allocate_gang(ssn: Session, job: JobInfo) -> bool:
    """Subgroups or a topology constraint: one attempt of the job's plan (kai.scheduler.actions.gang), inside a
    Statement. True when it was placed and has more pending pods (the caller queues it again)."""
    try:
        constraints = job_constraints(ssn, job)
    except TopologyError as e:
        ssn.fail(job, "Unschedulable", str(e))
        return False
    assert job.gang is not None
    plan = plan_for(ssn, job)
    tasks = plan.tasks(job.gang)
    if not tasks and not plan.leaf_tasks:
        return False
    failure = ssn.hooks.job_over_capacity(ssn, job, tasks)
    if failure is not None:
        ssn.failures[job.index] = failure
        return False
    stmt = ssn.statement()
    placement = JobPlacement(ssn, stmt, job, constraints)
    if placement.run(plan):
        pipeline_whole_gang_if_needed(ssn, stmt, job)
        stmt.commit()
        ssn.failures.pop(job.index, None)
        return bool(ssn.pending_tasks(job))
    stmt.rollback()
    why = placement.why or "no node can take the pods"
    ssn.fail(job, "Unschedulable", gang_message(placement.max_placed, len(tasks), why) if plan.gang_phase else why)
    return False


def _any_nominated(ssn: Session) -> bool:
    return any(t.nominated >= 0 for t in ssn.snap.tasks)


def _nominated(ssn: Session, job: JobInfo) -> bool:
    tasks, status, pending = ssn.snap.tasks, ssn.status, TaskStatus.PENDING  # asked of every candidate job
    return any(tasks[t].nominated >= 0 for t in job.tasks if status[t] == pending)


def _honor_nominations(ssn: Session, jobs: list[JobInfo]) -> None:
    """Place first the jobs that an eviction made room for in an earlier cycle, on the nodes it chose.

    kai, beyond KAI: without this, the pods a reclaim or preemption evicted come
    back as pending and may win the freed resources in queue order, and the next
    cycle evicts again (ping-pong). Like kube-scheduler's nominated pods, a
    nomination is honored only where the pod fits on idle resources now, whole
    gangs at a time; anything else goes through the normal order.
    """
    queue = JobQueue(ssn, jobs, ssn.conf.queue_depth(Allocate.name))
    while (job := queue.pop()) is not None:
        mark = ssn.begin_job()
        try:
            _honor_nomination(ssn, job)
        except Exception as e:  # one job's failure costs only that job (Session.drop_job)
            ssn.drop_job(job, Allocate.name, e, mark)


def _honor_nomination(ssn: Session, job: JobInfo) -> None:
    todo = ssn.tasks_to_allocate(job)
    if not todo or any(t.nominated < 0 for t in todo) or ssn.hooks.job_over_capacity(ssn, job, todo) is not None:
        return
    stmt = ssn.statement()
    for task in todo:
        node = task.nominated
        if not (ssn.static_fit(task).mask[node] and ssn.fit_on(task, node) == NOW):
            stmt.rollback()
            return
        stmt.allocate(task, node)
    stmt.commit()


def uniform_shape(tasks: list[TaskInfo], ssn: Session | None = None) -> tuple | None:
    """(signature, request[, rules]) shared by all *tasks*, or None. With *ssn*, the tasks' stateful rules
    (inter-pod affinity, spread, ports, volumes) are part of the shape: tasks of one signature can differ there."""
    first = tasks[0]
    key: tuple = (first.signature, first.request.tobytes())
    if len(tasks) > 1 and not all(t.signature == key[0] and t.request.tobytes() == key[1] for t in tasks[1:]):
        return None
    if ssn is not None and ssn.hooks.has_node_filter:  # (most cycles: no stateful rule, the plain key)
        rules = [tuple(map(id, ssn.hooks.node_rules(ssn, t).rules)) for t in tasks]
        if any(r != rules[0] for r in rules[1:]):
            return None
        if rules[0]:
            key = (*key, rules[0])
    return key


def _fails_for_good(ssn: Session, tasks: list[TaskInfo]) -> bool:
    """Whether a failure of *tasks* stays a failure while allocate only places (the shortcut's premise): false
    when a stateful rule of theirs may loosen as pods are placed (inter-pod affinity, spread)."""
    return not ssn.hooks.has_node_filter or not ssn.hooks.node_rules(ssn, tasks[0]).loosens


def _place(ssn: Session, stmt: Statement, tasks: list[TaskInfo]) -> tuple[int, str]:
    """Place *tasks* in order; returns (how many were placed, why the next one could not be)."""
    placer = ssn.placer
    for i, task in enumerate(tasks):
        choice = placer.best_node(task)
        if choice is None:
            return i, explain_no_node(ssn, task)
        node, now, gpus = choice  # unpacked: cheaper than three attribute reads, 40,000 times a cycle
        if now:
            stmt.allocate(task, node, gpus)
        else:
            stmt.pipeline(task, node, gpus)
    return len(tasks), ""
