"""Steps shared by the actions that place pods."""

from __future__ import annotations

from kai.scheduler.model import JobInfo, TaskStatus
from kai.scheduler.session import Session, Statement

_NOT_PIPELINED = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})


def pipeline_whole_gang_if_needed(ssn: Session, stmt: Statement, job: JobInfo) -> None:
    """KAI allocate step 3: a gang below its minimum with any pipelined pod waits as a whole.

    Binding some pods now while the rest wait for releases would hold GPUs idle
    in a gang that cannot start.
    """
    if job.min_available <= 1:  # nothing to hold back: one placed pod, allocated or pipelined, meets the minimum
        return
    status = ssn.status
    if not any(status[t] == TaskStatus.PIPELINED for t in job.tasks):
        return
    placed_now = sum(1 for t in job.tasks if status[t] in _NOT_PIPELINED)
    if placed_now >= job.min_available:
        return
    for t in job.tasks:
        if status[t] == TaskStatus.ALLOCATED:
            stmt.convert_to_pipelined(ssn.snap.tasks[t])
