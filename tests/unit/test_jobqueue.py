"""JobQueue within one leaf queue: every pop returns the best job queued at that moment, in job order.

The queue keeps the jobs it starts with in a list sorted once and the jobs pushed later in a heap
(``JobQueue.__init__``); these tests check that interleaved pops and pushes still come out exactly
as one ordered collection would give them: the smallest (job order key, job index) among the queued.
Sessions come from the real embedded cluster (manifests -> EmbeddedCluster -> Snapshot -> Session).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.scheduler.model import JobInfo
from kai.scheduler.ordering import JobQueue, job_order_key
from kai.scheduler.session import Session
from tests.unit.test_statement import node, pod, podgroup, queue, session_from

PRIORITY_CLASSES = ["train", "build", "inference"]


def _session(priorities: list[int], ages: list[int]) -> Session:
    docs: list[dict[str, Any]] = [node("node0"), queue("dept"), queue("team-a", "dept")]
    for i, (p, age) in enumerate(zip(priorities, ages, strict=True)):
        pg = podgroup(f"job-{i:02d}", "team-a", priority_class=PRIORITY_CLASSES[p])
        pg["metadata"]["creationTimestamp"] = f"2025-12-31T2{age}:00:00Z"  # few values: ties go to the UID
        docs += [pg, pod(f"job-{i:02d}-0", f"job-{i:02d}")]
    return session_from(docs)


def _entry(ssn: Session, job: JobInfo) -> tuple:
    return (job_order_key(ssn, job), job.index)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    n=st.integers(1, 10),
)
def test_pops_follow_job_order_with_pushes_in_between(data: st.DataObject, n: int) -> None:
    priorities = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    ages = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    ssn = _session(priorities, ages)
    jobs = data.draw(st.permutations(list(ssn.snap.jobs)))
    jq = JobQueue(ssn, jobs)
    queued = {job.index: _entry(ssn, job) for job in jobs}
    popped: list[JobInfo] = []
    for _ in range(3 * n):
        if popped and data.draw(st.booleans()):  # push a popped job back (an elastic job with more pods does)
            job = popped.pop(data.draw(st.integers(0, len(popped) - 1)))
            jq.push(job)
            queued[job.index] = _entry(ssn, job)
            continue
        job = jq.pop()
        if not queued:
            assert job is None
            continue
        best = min(queued, key=queued.__getitem__)
        assert job is not None and job.index == best, (job and job.name, ssn.snap.jobs[best].name)
        del queued[best]
        popped.append(job)
    while queued:  # drain: the rest in order, then nothing
        best = min(queued, key=queued.__getitem__)
        job = jq.pop()
        assert job is not None and job.index == best
        del queued[best]
    assert jq.pop() is None
    assert len(jq) == 0


def test_priority_then_age_then_uid() -> None:
    """The order itself on a fixed example: higher priority first, then older, then the lower UID."""
    ssn = _session([0, 2, 2, 1, 2], [1, 3, 0, 0, 0])
    jq = JobQueue(ssn, list(ssn.snap.jobs))
    names = []
    while (job := jq.pop()) is not None:
        names.append(job.name)
    by_name = {j.name: j for j in ssn.snap.jobs}
    inference = sorted(["job-02", "job-04"], key=lambda n: by_name[n].uid)  # same priority, same age
    assert names == [*inference, "job-01", "job-03", "job-00"]
