"""Queue capacity checks before placing a job: limits and non-preemptible quota (KAI's proportion).

* OverLimit: for the job's queue or any ancestor, allocated + request > limit on a
  requested resource whose limit is not -1. An unset limit is 0, a hard cap (KAI's code).
* NonPreemptibleOverQuota: a non-preemptible job needs allocatedNonPreemptible +
  request <= quota (quota -1 = unlimited) for its queue and every ancestor.
"""

from __future__ import annotations

from kai.scheduler.explain import fmt_amount, qres_name
from kai.scheduler.model import QRES_INDEXES, JobFailure, JobInfo, TaskInfo
from kai.scheduler.session import Session


def job_request(tasks: list[TaskInfo]) -> tuple[int, int, int]:
    """QRES request of *tasks* in base units (plain ints: three numbers do not pay NumPy's call overhead)."""
    if len(tasks) == 1:  # a single-pod job (the JobQueue asks for every job it holds)
        return tasks[0].qreq
    gpu = cpu = mem = 0
    for t in tasks:
        g, c, m = t.qreq
        gpu += g
        cpu += c
        mem += m
    return gpu, cpu, mem


def _unbounded(ssn: Session) -> tuple[list[bool], list[bool]]:
    """Per queue: no limit on it or any ancestor; no quota (deserved -1) on it or any ancestor.
    Such a job's checks cannot fail, and allocate checks every job it pops (computed once per session)."""
    got = ssn.cache.get("capacity_unbounded")
    if got is None:
        chains = ssn.queues.ancestors
        no_limit = [all(v == -1 for a in chains[q] for v in ssn.queue_limits[a]) for q in range(len(chains))]
        no_quota = [all(v == -1 for a in chains[q] for v in ssn.queue_quotas[a]) for q in range(len(chains))]
        got = ssn.cache["capacity_unbounded"] = (no_limit, no_quota)
    return got


def check_capacity(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> JobFailure | None:
    no_limit, no_quota = _unbounded(ssn)
    if no_limit[job.queue] and (job.preemptible or no_quota[job.queue]):
        return None
    req = job_request(tasks)
    requested = [r for r in QRES_INDEXES if req[r] > 0]
    qs = ssn.queues
    for qi in qs.ancestors[job.queue]:
        q = ssn.snap.queues[qi]
        limits = ssn.queue_limits[qi]
        alloc = qs.alloc[qi]
        for r in requested:
            limit = limits[r]
            if limit != -1 and alloc[r] + req[r] > limit:
                what = qres_name(r)
                unset = " (limit 0 or unset is a hard cap of 0; use -1 for no limit)" if limit == 0 else ""
                return JobFailure(
                    "OverLimit",
                    f"queue {q.name} is at its {what} limit{unset}: {fmt_amount(r, alloc[r])} of "
                    f"{fmt_amount(r, limit)} allocated, job needs {fmt_amount(r, req[r])}",
                    qi,
                )
        if not job.preemptible:
            quotas = ssn.queue_quotas[qi]
            alloc_np = qs.alloc_np[qi]
            for r in requested:
                quota = quotas[r]
                if quota != -1 and alloc_np[r] + req[r] > quota:
                    return JobFailure(
                        "NonPreemptibleOverQuota",
                        f"Non-preemptible workload is over quota. Workload requested {fmt_amount(r, req[r])}, "
                        f"but {q.name} quota is {fmt_amount(r, quota)}, while {fmt_amount(r, alloc_np[r])} "
                        "are already allocated for non-preemptible pods. "
                        "Use a preemptible workload to go over quota.",
                    )
    return None
