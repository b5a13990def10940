"""Why a job waits (or why it runs, and what could evict it), as data.

Rules: pure functions of a dry run (``_engine.DryRun``). The reason is the engine's own (the same text
as the PodGroup condition and event); the rest adds what the engine knows around it: the job's place in
the queue order, its queue's numbers, what the best node of each class has free, what each eviction
action said, and who could evict a running job. Amounts in the data are in the API's units (GPUs,
millicores, bytes), as ``kai sim -o json``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kai.explain import _engine as E
from kai.explain._nodes import missing_per_class
from kai.explain._order import QueueOrder
from kai.explain._queue import queue_numbers
from kai.scheduler.actions.solver import can_move
from kai.scheduler.model import ACTIVE_ALLOCATED, MILLI, JobInfo, TaskStatus
from kai.scheduler.plugins.minruntime import preempt_min_runtime, reclaim_min_runtime
from kai.scheduler.plugins.proportion import reclaim_rules
from kai.scheduler.snapshot import Snapshot

EVICTING_ACTIONS = ("consolidation", "reclaim", "preempt")
_STATUS_WORDS = {
    TaskStatus.PENDING: "Pending",
    TaskStatus.GATED: "Gated",
    TaskStatus.ALLOCATED: "Binding",
    TaskStatus.PIPELINED: "Pipelined",
    TaskStatus.BINDING: "Binding",
    TaskStatus.BOUND: "Bound",
    TaskStatus.RUNNING: "Running",
    TaskStatus.RELEASING: "Releasing",
    TaskStatus.STUCK_IN_RELEASING: "StuckInReleasing",
    TaskStatus.SUCCEEDED: "Succeeded",
    TaskStatus.FAILED: "Failed",
}


CONSOLIDATION = "consolidation may move its pods to other nodes (they restart there); it never evicts them"
NOT_MOVED = "consolidation does not move it: a pod of it has no controller to make it again on another node"


def pods_of(dry: E.DryRun, job: JobInfo) -> list[dict[str, Any]]:
    snap, ssn = dry.snap, dry.ssn
    out = []
    for ti in job.tasks:
        t = snap.tasks[ti]
        status, node = E.task_state(ssn, t)
        before = t.status
        word = _STATUS_WORDS[status]
        if status in ACTIVE_ALLOCATED and before == status and status != TaskStatus.PIPELINED:
            word = _STATUS_WORDS[before]
        out.append(
            {
                "namespace": t.namespace,
                "name": t.name,
                "status": word,
                "node": snap.nodes.names[node] if node >= 0 else None,
            }
        )
    return out


def explain_job(dry: E.DryRun, job: JobInfo, order: QueueOrder | None = None) -> dict[str, Any]:
    """The whole story of one PodGroup: ``state`` is pending, partly placed, placed or running."""
    ssn, snap = dry.ssn, dry.snap
    placed = E.placed_count(ssn, job)
    pending = E.pending_tasks(ssn, job)
    running_before = sum(1 for t in job.tasks if snap.tasks[t].status in ACTIVE_ALLOCATED)
    doc: dict[str, Any] = {
        "kind": "PodGroup",
        "namespace": job.namespace,
        "name": job.name,
        "queue": job.queue_name,
        "priority": job.priority,
        "preemptible": job.preemptible,
        "minMember": job.min_available,
        "pods": pods_of(dry, job),
        "placed": placed,
    }
    if placed >= job.min_available:
        doc["state"] = "running" if running_before >= job.min_available else "placed"  # placed: bound this cycle
    else:
        doc["state"] = "pending"
    if job.queue >= 0:
        doc["queueNumbers"] = queue_numbers(dry, job.queue)
    if doc["state"] == "pending":
        doc.update(_pending(dry, job, order or QueueOrder(dry.opening)))
    else:
        doc["evictableBy"] = evictable_by(dry, job)
        decided = [d for d in (*dry.result.binds, *dry.result.pipelines) if d.podgroup == job.name]
        if decided:
            doc["decided"] = [{"pod": str(d.pod), "node": d.node} for d in decided]
        if pending:
            doc.update(_pending(dry, job, order or QueueOrder(dry.opening)))
    return doc


def _pending(dry: E.DryRun, job: JobInfo, order: QueueOrder) -> dict[str, Any]:
    ssn = dry.ssn
    out: dict[str, Any] = {}
    cond = E.condition_message(dry, job)
    f = E.failure(ssn, job)
    if job.unschedulable_reason:
        out["reason"] = {"code": "QueueDoesNotExist", "message": job.unschedulable_reason}
    elif cond is not None:
        out["reason"] = {"code": cond[0], "message": cond[1]}
    elif f is not None:
        out["reason"] = {"code": f[0], "message": f[1]}
    else:
        out["reason"] = {"code": "NotConsidered", "message": "the cycle did not try it (no pending pod it may place)"}
    if f is not None:
        out["allocate"] = f[1]
    said = E.notes(ssn, job)
    actions = {}
    for action in EVICTING_ACTIONS:
        if action not in dry.conf.actions:
            actions[action] = "not enabled in this scheduler's configuration"
        elif action in said:
            actions[action] = said[action]
    if actions:
        out["actions"] = actions
    position = order.position(job) if job.queue >= 0 else None
    if position is not None:
        out["position"] = position
    tasks = E.to_allocate(ssn, job) if E.ready(ssn, job) else E.pending_tasks(ssn, job)
    if tasks:
        out["missing"] = missing_per_class(dry, tasks)
        out["podsNeeded"] = len(tasks)
    return out


def evictable_by(dry: E.DryRun, job: JobInfo) -> dict[str, Any]:
    """Who could evict the running *job*: preempt (higher priority, same queue), reclaim (which queues),
    consolidation (moves only), and until when min runtime protects it."""
    ssn, snap = dry.ssn, dry.snap
    now = snap.now
    out: dict[str, Any] = {"preemptible": job.preemptible}
    if not job.preemptible:
        out["text"] = (
            f"non-preemptible (priority {job.priority}): neither reclaim nor preempt evicts it, and "
            "consolidation does not move it"
        )
        return out
    if job.queue < 0:
        return out
    mr = preempt_min_runtime(ssn, job)
    protected_until = job.last_start + mr if job.last_start is not None and mr > 0 else None
    higher = [
        j.ref for j in snap.jobs if j.queue == job.queue and j.priority > job.priority and E.pending_tasks(ssn, j)
    ]
    out["preempt"] = {
        "by": f"jobs of priority above {job.priority} in queue {job.queue_name}",
        "pendingNow": higher[:20],
        "protectedUntil": protected_until if protected_until is not None and protected_until > now else None,
    }
    rules = reclaim_rules(ssn)
    if rules is None:
        out["reclaim"] = []
        out["reclaimNote"] = "no queue may reclaim it: the proportion plugin, which decides reclaims, is disabled"
        out["consolidation"] = _consolidation(snap, job)
        return out
    # the probe: a one-GPU job (a job of the victim's pod size if it holds no GPU), the smallest reclaimer
    first = snap.tasks[job.tasks[0]] if job.tasks else None
    held = first.qreq if first is not None else (0, 0, 0)
    probe = (MILLI, 0, 0) if held[0] > 0 else held
    reclaimers = []
    for q in snap.queues:
        if not q.is_leaf or q.index == job.queue:
            continue
        stand_in = dataclasses.replace(job, queue=q.index, tasks=[])
        if not rules.victim_allowed(stand_in, probe, job):
            continue
        rmr = reclaim_min_runtime(ssn, stand_in, job)
        until = job.last_start + rmr if job.last_start is not None and rmr > 0 else None
        gate = rules.cannot_reclaim(stand_in, probe)
        reclaimers.append(
            {
                "queue": q.name,
                "now": gate is None,
                "why": gate or f"queue {q.name} has room under its fair share for a job like that",
                "protectedUntil": until if until is not None and until > now else None,
            }
        )
    out["reclaim"] = reclaimers
    if not reclaimers:
        others = any(q.is_leaf and q.index != job.queue for q in snap.queues)
        out["reclaimNote"] = (
            "no other queue may reclaim it: KAI's reclaim rules protect it (its side of the queue tree is "
            "within its quota, or within its fair share for a reclaimer over quota)"
            if others
            else "no other queue may reclaim it: there is no other queue"
        )
    out["consolidation"] = _consolidation(snap, job)
    return out


def _consolidation(snap: Snapshot, job: JobInfo) -> str:
    """What consolidation may do to the running *job*: move it, unless a pod of it would be lost."""
    return CONSOLIDATION if can_move(snap, job.tasks) else NOT_MOVED
