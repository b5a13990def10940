"""One scheduling cycle: Snapshot in, Decisions out.

``run_cycle`` opens a Session, runs the configured actions in order and closes
the Session into a CycleResult. It is a pure function of its arguments: no
network, files, threads, wall clock or global random state (a test checks the
imports of this package).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter

from kai.api.objects import object_ref
from kai.scheduler.actions import ACTIONS
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import (
    Bind,
    Condition,
    CycleResult,
    Event,
    Evict,
    JobError,
    Pipeline,
    PodGroupStatus,
    PodRef,
    QueueStatus,
)
from kai.scheduler.memo import CycleMemo, remember, repeat
from kai.scheduler.model import ACTIVE_ALLOCATED, MILLI, QRES, TaskStatus
from kai.scheduler.placement import Placer
from kai.scheduler.plugins import build_hooks
from kai.scheduler.session import Session
from kai.scheduler.snapshot import INVALID_GPU_REQUEST, Snapshot

UNSCHEDULABLE_CONDITION = "UnschedulableOnNodePool"
NODE_POOL = "default"  # the node pool a scheduler serves, as KAI names it (one pool per SchedulingShard)
SCHEDULING_ERROR = "SchedulingError"  # Warning event on a PodGroup left out of a cycle (Session.drop_job)


def run_cycle(
    snap: Snapshot, conf: SchedulerConf, memo: CycleMemo | None = None, *, keep_memo: bool = False
) -> CycleResult:
    """Run *conf*'s actions on *snap*; returns what to bind, pipeline and evict, and why the rest waits.

    *keep_memo*: set ``CycleResult.memo`` (this cycle's input and result) for the caller to hand to the next
    cycle as *memo*. A cycle on the same input as *memo*'s (the clock aside, where no answer reads it
    differently) decides what that cycle decided, so its result is handed back without running the actions
    again (kai.scheduler.memo). The decisions are the same with or without a memo."""
    again = repeat(memo, snap, conf)
    if again is not None:
        return again
    with collector_paused():
        ssn, result = _run_actions(snap, conf)
        if keep_memo:  # (a stale stamp is the Session's ``now``: such a cycle is not repeated)
            result.memo = remember(snap, conf, result, any(v is not None for v in ssn.stale_since.values()))
        ssn.dissolve()  # freed now by reference counting, not left for the collector (see _run_actions)
        del ssn
    return result


def run_session(snap: Snapshot, conf: SchedulerConf) -> tuple[Session, CycleResult]:
    """``run_cycle``, also handing back the closed Session: ``kai explain`` reads its final state (queue
    accounting, failures, the eviction actions' notes) to say why a job waits. Nothing more is computed."""
    with collector_paused():
        return _run_actions(snap, conf)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic collector for a cycle (or anything that builds a snapshot and runs one, as ``kai
    explain`` does): such work makes many short-lived objects and no cycles worth collecting, and the collector
    would otherwise rescan every object of the cluster (50,000 pods) several times."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run_actions(snap: Snapshot, conf: SchedulerConf) -> tuple[Session, CycleResult]:
    """Open a Session, run the actions, close it; the caller pauses the cyclic collector around it.

    Why paused: a cycle makes many short-lived objects and no reference cycles worth collecting, and the
    collector would otherwise rescan the whole snapshot (50k pods) several times per cycle. The Session
    itself is a cycle (its Placer and plugins point back at it), so ``run_cycle`` dissolves it before the
    collector resumes: its undo journal and per-task lists are then freed at once, and the collection that
    follows the cycle only walks what the cycle returns."""
    t0 = perf_counter()  # durations only: measuring is not reading the scheduling clock
    ssn = open_session(snap, conf)
    stats = {"open_session_s": perf_counter() - t0}
    action_errors = []
    for name in conf.actions:
        t = perf_counter()
        mark = len(ssn.journal)  # (begin_job empties it: then nothing before the failure is undone)
        try:
            ACTIONS[name].execute(ssn)
        except Exception as e:  # not one job's (those are isolated inside the action): the action stops;
            ssn.undo_to(mark)  # what its finished jobs committed stands, anything half-done is undone
            ssn.settled += 1
            action_errors.append((name, f"{type(e).__name__}: {e}"))
        stats[f"action_{name}_s"] = perf_counter() - t
    result = close_session(ssn)
    result.action_errors = action_errors
    stats["cycle_s"] = perf_counter() - t0
    result.stats = stats
    return ssn, result


def open_session(snap: Snapshot, conf: SchedulerConf) -> Session:
    """A Session on *snap* with *conf*'s plugins (made anew: they keep state for this Session only) and the
    Placer that answers where each task goes."""
    ssn = Session(snap, conf, build_hooks(conf))
    ssn.placer = Placer(ssn)
    return ssn


def _api_units(v) -> dict[str, float]:
    gpu, cpu, mem = (float(x) for x in v)
    return {"gpu": gpu / MILLI if gpu != -1 else -1.0, "cpu": cpu, "memory": mem}


def close_session(ssn: Session) -> CycleResult:
    """The difference between the snapshot and the session's final state, as Decisions."""
    snap = ssn.snap
    res = CycleResult()
    names = snap.nodes.names
    allocated, pipelined, releasing = TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RELEASING
    tasks, jobs, status_of, node_of, gpus_of = snap.tasks, snap.jobs, ssn.status, ssn.node, ssn.gpus
    volumes, claims = ssn.volume_bindings, ssn.claim_allocations
    binds, events = res.binds, res.events
    # The records are NamedTuples; a NamedTuple's generated __new__ is a Python function that calls tuple.__new__
    # with the fields, so calling that directly (every field given, in order) builds the same tuple for less:
    # a big cycle makes three records for each of 40,000 binds.
    new_tuple = tuple.__new__
    for ti in sorted(ssn.changed):
        t = tasks[ti]
        new, old = status_of[ti], t.status
        if new == old and node_of[ti] == t.node and gpus_of[ti] == t.gpu_slots:
            continue
        job = jobs[t.job]
        meta = t.pod.meta  # TaskInfo.namespace / .name, without two property calls per pod
        ns = meta.namespace or ""
        ref = new_tuple(PodRef, (ns, meta.name))
        ref_s = f"{ns}/{meta.name}"  # str(ref), formatted once per pod rather than once per message
        pod_obj = f"Pod/{ref_s}"
        if new == allocated:
            node = names[node_of[ti]]
            groups = ssn.gpu_group_names(t) if t.share is not None else ()
            vols = volumes.get(ti, ()) if volumes else ()
            claimed = claims.get(ti, ()) if claims else ()
            binds.append(new_tuple(Bind, (ref, node, job.name, groups, vols, claimed)))
            message = f"Successfully assigned pod {ref_s} to node {node}"
            events.append(new_tuple(Event, (pod_obj, "Normal", "Scheduled", message)))
        elif new == pipelined:
            node = names[node_of[ti]]
            if old in ACTIVE_ALLOCATED and t.index in ssn.eviction_reasons:  # moved: evicted here, waits there
                action, message = ssn.eviction_reasons[t.index]
                res.evictions.append(Evict(ref, job.name, action, message))
                res.events.append(Event(f"PodGroup/{job.ref}", "Normal", "Evict", message))
            res.pipelines.append(
                Pipeline(ref, node, job.name, ssn.gpu_group_names(t), nominated=t.index in ssn.nominations)
            )
            res.events.append(Event(pod_obj, "Normal", "Pipelined", f"Pod {ref_s} was pipelined to node {node}"))
        elif new == releasing and old in ACTIVE_ALLOCATED:
            action, message = ssn.eviction_reasons.get(t.index, ("unknown", "evicted"))
            res.evictions.append(Evict(ref, job.name, action, message))
            res.events.append(Event(f"PodGroup/{job.ref}", "Normal", "Evict", message))

    for ti in sorted(ssn.invalid):  # bad GPU-sharing annotations: the pod says why it is never placed
        t = snap.tasks[ti]
        if ssn.status[ti] == TaskStatus.PENDING:
            ref = object_ref("Pod", t.namespace, t.name)
            res.events.append(Event(ref, "Warning", t.spec_error_reason, t.spec_error))

    status, pending_status, any_invalid = ssn.status, TaskStatus.PENDING, bool(ssn.invalid)
    failures, stale_since, eviction_notes, job_errors = ssn.failures, ssn.stale_since, ssn.notes, ssn.job_errors
    statuses, job_ready = res.podgroups, ssn.job_ready
    for job in snap.jobs:
        # Nothing to say of most jobs of a big cycle: what the branches below end in for such a job, without them.
        ji = job.index
        unremarked = not (any_invalid or job.unschedulable_reason or ji in failures or ji in eviction_notes)
        if unremarked and ji not in job_errors and ji not in stale_since and job_ready(job):
            pg, meta = job.podgroup, job.podgroup.meta
            statuses.append(new_tuple(PodGroupStatus, (meta.namespace or "", meta.name, (), pg.stale_since, False)))
            continue
        conditions: tuple[Condition, ...] = ()
        failure = failures.get(job.index)
        # Whether the job has a pending pod matters below only with one of these three; without them (most
        # jobs of a big cycle) the branches do not read it, so its statuses are not scanned.
        if job.unschedulable_reason or not ssn.job_ready(job) or job.index in eviction_notes or job.index in job_errors:
            pending = pending_status in [status[ti] for ti in job.tasks]
        else:
            pending = False
        invalid = [ti for ti in job.tasks if ti in ssn.invalid and status[ti] == pending_status] if any_invalid else []
        if invalid and not ssn.job_ready(job):
            bad = snap.tasks[invalid[0]]
            what = "GPU request" if bad.spec_error_reason == INVALID_GPU_REQUEST else "request"
            message = f"Pod {bad.namespace}/{bad.name} has an invalid {what}: {bad.spec_error}"
            if len(invalid) > 1:
                message += f" (and {len(invalid) - 1} more pods)"
            conditions = (Condition(UNSCHEDULABLE_CONDITION, "True", "Unschedulable", message),)
            res.events.append(Event(f"PodGroup/{job.ref}", "Warning", "Unschedulable", message))
        elif job.unschedulable_reason and pending:
            reason = "QueueDoesNotExist"
            conditions = (Condition(UNSCHEDULABLE_CONDITION, "True", reason, job.unschedulable_reason),)
            res.events.append(Event(f"PodGroup/{job.ref}", "Warning", "Unschedulable", job.unschedulable_reason))
        elif pending and not ssn.job_ready(job):
            alive = sum(
                1
                for ti in job.tasks
                if snap.tasks[ti].status != TaskStatus.GATED
                and ssn.status[ti] in (TaskStatus.PENDING, *ACTIVE_ALLOCATED)
            )
            gated = sum(1 for ti in job.tasks if snap.tasks[ti].status == TaskStatus.GATED)
            message = (
                f"Job is not ready for scheduling. Waiting for {job.min_available} pods, "
                f"currently {alive} exist, {gated} are gated"
            )
            conditions = (Condition(UNSCHEDULABLE_CONDITION, "True", "NotReady", message),)
            res.events.append(Event(f"PodGroup/{job.ref}", "Normal", "NotReady", message))
        elif job.index in job_errors:
            if pending:
                action, error = job_errors[job.index]
                message = f"kai could not schedule this workload this cycle: {action} failed on it ({error})"
                conditions = (Condition(UNSCHEDULABLE_CONDITION, "True", SCHEDULING_ERROR, message),)
        elif failure is not None or (pending and job.index in ssn.notes):
            reason, message = (failure.reason, failure.message) if failure is not None else ("Unschedulable", "")
            notes = ssn.notes.get(job.index)
            if notes:  # what the eviction actions tried, so the message answers "why is my job pending?"
                message = ". ".join([message.rstrip("."), *notes]) if message else ". ".join(notes)
            if ssn.job_allocated[job.index] == 0:
                conditions = (Condition(UNSCHEDULABLE_CONDITION, "True", reason, message),)
            res.events.append(Event(f"PodGroup/{job.ref}", "Warning", "Unschedulable", message))
        pg = job.podgroup
        if conditions and pg.scheduling_backoff == 1:  # KAI's node-pool prefix (one pool per scheduler here)
            conditions = tuple(
                Condition(c.type, c.status, c.reason, f"Node-Pool '{NODE_POOL}': {c.message}") for c in conditions
            )
        if job.index in stale_since:
            stale, stale_changed = stale_since[job.index], True
        else:
            stale, stale_changed = pg.stale_since, False
        res.podgroups.append(PodGroupStatus(pg.meta.namespace or "", pg.meta.name, conditions, stale, stale_changed))

    for ji, (action, error) in sorted(ssn.job_errors.items()):
        job = jobs[ji]
        message = (
            f"kai left this workload out of the scheduling cycle: {action} failed on it ({error}); "
            "every other workload was scheduled. Please report this as a kai bug."
        )
        res.job_errors.append(JobError(job.ref, action, error))
        res.events.append(Event(f"PodGroup/{job.ref}", "Warning", SCHEDULING_ERROR, message))

    for obj, type_, reason, message in ssn.events:
        res.events.append(Event(obj, type_, reason, message))

    qs = ssn.queues
    for q in snap.queues:
        res.queues.append(
            QueueStatus(
                name=q.name,
                parent=snap.queues[q.parent].name if q.parent >= 0 else "",
                fair_share=_api_units(qs.fair_share[q.index]),
                allocated=_api_units(qs.alloc[q.index]),
                allocated_non_preemptible=_api_units(qs.alloc_np[q.index]),
                requested=_api_units(qs.req[q.index]),
                deserved=_api_units(q.deserved),
                limit=_api_units(q.limit),
                display_name=q.display_name,
            )
        )
    assert tuple(QRES) == ("gpu", "cpu", "memory")
    return res
