"""The few things ``kai explain`` reads from the engine, in one place.

Rules: every read of a Session (or Snapshot) attribute that ``kai explain`` makes goes through a function
here, so the engine's middle can change with one module to keep in step. Nothing here changes the
Session; a dry run is ``kai.scheduler.cycle.run_session``, the very function ``run_cycle`` is.

Session attributes read: ``snap``, ``queues.alloc``, ``queues.req``, ``queues.fair_share``, ``failures``
(JobFailure ``.reason``/``.message``), ``notes``, ``status``, ``node``, ``idle``, ``releasing``; methods
``job_ready``, ``static_fit`` (StaticFit ``.mask``/``.failures``), ``free_gpu_milli``, ``pending_tasks``,
``tasks_to_allocate``, ``hooks.job_order``; ``open_session(snap, conf)`` (the order at the start of a cycle).
Engine functions called with a Session: ``kai.scheduler.cycle.run_session``, ``JobQueue(ssn, []).queue_key``,
``kai.scheduler.plugins.proportion.reclaim_rules`` (``victim_allowed``, ``cannot_reclaim``),
``kai.scheduler.plugins.minruntime.preempt_min_runtime`` / ``reclaim_min_runtime``,
``kai.scheduler.capacity.job_request``. Snapshot fields read: ``nodes`` (names, labels, allocatable),
``tasks`` (index, job, pod, status, node, request, signature, share, gpu_slots, qreq), ``jobs``,
``queues``, ``queue_index``, ``resources``, ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

import numpy as np

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session, run_session
from kai.scheduler.decisions import CycleResult
from kai.scheduler.model import ACTIVE_ALLOCATED, JobInfo, TaskInfo, TaskStatus
from kai.scheduler.session import Session
from kai.scheduler.snapshot import Snapshot


@dataclass(slots=True)
class DryRun:
    """One cycle run on a snapshot without applying anything: what the scheduler would decide now."""

    snap: Snapshot
    conf: SchedulerConf
    ssn: Session  # closed: its state is the cycle's end state
    result: CycleResult
    seconds: float  # snapshot + cycle, wall time
    _opening: Session | None = None

    @property
    def opening(self) -> Session:
        """A Session opened on the same snapshot with no action run: the order as the cycle started."""
        if self._opening is None:
            self._opening = open_session(self.snap, self.conf)
        return self._opening


def dry_run(snap: Snapshot, conf: SchedulerConf, build_s: float = 0.0) -> DryRun:
    t0 = perf_counter()
    ssn, result = run_session(snap, conf)
    return DryRun(snap, conf, ssn, result, build_s + perf_counter() - t0)


# --- per job -------------------------------------------------------------------------------------------


def condition_message(dry: DryRun, job: JobInfo) -> tuple[str, str] | None:
    """(reason, message) of the job's Unschedulable condition or Warning event after the cycle."""
    for st in dry.result.podgroups:
        if st.namespace == job.namespace and st.name == job.name and st.conditions:
            c = st.conditions[0]
            return c.reason, c.message
    obj = f"PodGroup/{job.ref}"
    for e in dry.result.events:
        if e.object == obj and e.type == "Warning":
            return e.reason, e.message
    return None


def failure(ssn: Session, job: JobInfo) -> tuple[str, str] | None:
    """(KAI reason, message) of why *job* got nothing (or less than it needs) this cycle."""
    f = ssn.failures.get(job.index)
    return None if f is None else (f.reason, f.message)


def notes(ssn: Session, job: JobInfo) -> dict[str, str]:
    """What each eviction action said about *job* ('reclaim' -> 'no other queue is above ...')."""
    out: dict[str, str] = {}
    for note in ssn.notes.get(job.index, []):
        action, _, text = note.partition(": ")
        out[action] = text
    return out


def ready(ssn: Session, job: JobInfo) -> bool:
    return ssn.job_ready(job)


def task_state(ssn: Session, task: TaskInfo) -> tuple[TaskStatus, int]:
    """(status, node row) of *task* at the end of the cycle."""
    return ssn.status[task.index], ssn.node[task.index]


def task_states(ssn: Session) -> tuple[list[TaskStatus], list[int]]:
    """Every task's (status, node row) at the end of the cycle, by task index. Read only."""
    return ssn.status, ssn.node


def placed_count(ssn: Session, job: JobInfo) -> int:
    return sum(1 for t in job.tasks if ssn.status[t] in ACTIVE_ALLOCATED)


def pending_tasks(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    return list(ssn.pending_tasks(job))


def to_allocate(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    return list(ssn.tasks_to_allocate(job))


def static_fit(ssn: Session, task: TaskInfo) -> tuple[np.ndarray, list[tuple[str, np.ndarray]]]:
    """(nodes the task's predicates allow, [(reason, nodes failing it), ...]) over all node rows."""
    sf = ssn.static_fit(task)
    return sf.mask, list(sf.failures)


def job_order_key(ssn: Session, job: JobInfo) -> tuple:
    """The job's place in its leaf queue (the job-order plugins' tiers, then age and UID)."""
    return ssn.hooks.job_order(ssn, job)


# --- nodes -------------------------------------------------------------------------------------------


def free_now_and_later(ssn: Session) -> tuple[np.ndarray, np.ndarray]:
    """(idle, idle + releasing) per node row and resource column, after the cycle."""
    return ssn.idle, ssn.idle + ssn.releasing


def free_gpu_milli(ssn: Session) -> np.ndarray:
    """Milli-GPUs free or being released per node: whole GPUs plus room on shared ones."""
    return ssn.free_gpu_milli()


# --- queues ------------------------------------------------------------------------------------------


def queue_alloc(ssn: Session, qi: int) -> list[int]:
    return list(ssn.queues.alloc[qi])


def queue_requested(ssn: Session, qi: int) -> list[int]:
    return list(ssn.queues.req[qi])


def queue_fair_share(ssn: Session, qi: int) -> list[float]:
    return [float(x) for x in ssn.queues.fair_share[qi]]
