"""Queue capacity checks before placing a job: limits and non-preemptible quota (KAI's proportion).

* OverLimit: for the job's queue or any ancestor, allocated + request > limit on a
  requested resource whose limit is not -1. An unset limit is 0, a hard cap (KAI's code).
* NonPreemptibleOverQuota: a non-preemptible job needs allocatedNonPreemptible +
  request <= quota (quota -1 = unlimited) for its queue and every ancestor.
"""

from __future__ import annotations

import numpy as np

from kai.scheduler.explain import fmt_amount, qres_name
from kai.scheduler.model import QRES_COLUMNS, JobInfo, TaskInfo
from kai.scheduler.session import JobFailure, Session


def job_request(tasks: list[TaskInfo]) -> np.ndarray:
    """(3,) QRES request of *tasks* in base units."""
    if not tasks:
        return np.zeros(3, dtype=np.int64)
    return np.sum([t.request[QRES_COLUMNS] for t in tasks], axis=0)


def check_capacity(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> JobFailure | None:
    req = job_request(tasks)
    qs = ssn.queues
    for qi in qs.ancestors[job.queue]:
        q = ssn.snap.queues[qi]
        for r in np.flatnonzero(req > 0):
            limit = q.limit[r]
            alloc = qs.allocated[qi, r]
            if limit != -1 and alloc + req[r] > limit:
                what = qres_name(r)
                unset = " (limit 0 or unset is a hard cap of 0; use -1 for no limit)" if limit == 0 else ""
                return JobFailure(
                    "OverLimit",
                    f"queue {q.name} is at its {what} limit{unset}: {fmt_amount(r, alloc)} of "
                    f"{fmt_amount(r, limit)} allocated, job needs {fmt_amount(r, req[r])}",
                )
        if not job.preemptible:
            for r in np.flatnonzero(req > 0):
                quota = q.deserved[r]
                alloc_np = qs.allocated_non_preemptible[qi, r]
                if quota != -1 and alloc_np + req[r] > quota:
                    return JobFailure(
                        "NonPreemptibleOverQuota",
                        f"Non-preemptible workload is over quota. Workload requested {fmt_amount(r, req[r])}, "
                        f"but {q.name} quota is {fmt_amount(r, quota)}, while {fmt_amount(r, alloc_np)} "
                        "are already allocated for non-preemptible pods. "
                        "Use a preemptible workload to go over quota.",
                    )
    return None
