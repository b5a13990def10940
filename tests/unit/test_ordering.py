"""JobQueue within one leaf queue: every pop returns the best job queued at that moment, in job order;
and across queues: every pop is the job a from-scratch walk of the queue tree would choose.

The queue keeps the jobs it starts with in a list sorted once and the jobs pushed later in a heap
(``JobQueue.__init__``); these tests check that interleaved pops and pushes still come out exactly
as one ordered collection would give them: the smallest (job order key, job index) among the queued.
Sessions come from the real embedded cluster (manifests -> EmbeddedCluster -> Snapshot -> Session).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.scheduler.capacity import job_request
from kai.scheduler.model import JobInfo
from kai.scheduler.ordering import (
    INF,
    JobQueue,
    ProportionQueueOrder,
    plain_queue_order_key,
    queue_order_key,
    share_divisors,
)
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
    return (ssn.hooks.job_order(ssn, job), job.index)


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


# --- across queues: the ranked choice between sibling queues ------------------------------------------------

# two departments with leaves under them, and a top-level leaf queue: several roots, several levels
TREE = [("dept-a", None), ("team-a1", "dept-a"), ("team-a2", "dept-a"), ("dept-b", None), ("team-b1", "dept-b")]
TREE += [("team-b2", "dept-b"), ("solo", None)]
LEAVES = ["team-a1", "team-a2", "team-b1", "team-b2", "solo"]


def _tree_session(spec: list[tuple[int, int, int]]) -> Session:
    """Jobs (leaf index, priority index, GPUs) of one pod each in the tree above, on nodes with room for all."""
    docs: list[dict[str, Any]] = [node(f"node{i}", cpu="64", gpu=8) for i in range(4)]
    for i, (name, parent) in enumerate(TREE):  # the later in TREE the older: ties between queues show
        q = queue(name, parent)
        q["metadata"]["creationTimestamp"] = f"2025-12-31T{20 - i:02d}:00:00Z"
        docs.append(q)
    for i, (leaf, p, gpus) in enumerate(spec):
        docs += [
            podgroup(f"job-{i:02d}", LEAVES[leaf], priority_class=PRIORITY_CLASSES[p]),
            pod(f"job-{i:02d}-0", f"job-{i:02d}", gpu=gpus),
        ]
    return session_from(docs)


def _expected_pop(ssn: Session, jq: JobQueue, queued: dict[int, tuple]) -> int:
    """The job a walk from the roots picks, every key computed afresh: at each level the child whose best job
    gives the smallest queue order key (rules 1-6), ties to the smaller allocatable share, then the older queue."""
    queues = ssn.snap.queues
    order = ProportionQueueOrder(ssn)

    def best_job(qi: int) -> int:
        if queues[qi].is_leaf:
            return min((j for j in queued if ssn.snap.jobs[j].queue == qi), key=queued.__getitem__)
        return best_job(choose(queues[qi].children))

    def has_jobs(qi: int) -> bool:
        return any(qi in ssn.queues.ancestors[ssn.snap.jobs[j].queue] for j in queued)

    def choose(candidates: list[int]) -> int:
        live = [c for c in candidates if has_jobs(c)]
        keys = {c: jq.queue_key(c, job_request(ssn.tasks_to_allocate(ssn.snap.jobs[best_job(c)]))) for c in live}
        low = min(keys.values())
        tied = sorted((c for c in live if keys[c] == low), key=lambda c: (queues[c].creation, queues[c].uid))
        best = tied[0]
        for c in tied[1:]:
            a, b = order._allocatable_share[c], order._allocatable_share[best]
            if all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b)):
                best = c
        return best

    return best_job(choose([q.index for q in queues if q.parent < 0]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(data=st.data(), n=st.integers(1, 14))
def test_pops_across_queues_follow_the_queue_order_as_allocations_change(data: st.DataObject, n: int) -> None:
    """Popped jobs are placed (their queues' allocation grows, so the order between queues moves) or pushed
    back; every pop is the job a from-scratch walk of the queue tree would choose."""
    spec = data.draw(
        st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), st.integers(1, 3)), min_size=n, max_size=n)
    )
    ssn = _tree_session(spec)
    jq = JobQueue(ssn, list(ssn.snap.jobs))
    queued = {job.index: _entry(ssn, job) for job in ssn.snap.jobs}
    waiting: list[JobInfo] = []  # popped, not placed: may be pushed back
    nodes = iter(range(4 * 8))
    for step in range(4 * n):  # then placing everything left: no more pushes
        draining = step >= 3 * n
        if not queued and (draining or not waiting):
            break
        if waiting and not draining and (not queued or data.draw(st.booleans())):
            job = waiting.pop(data.draw(st.integers(0, len(waiting) - 1)))
            jq.push(job)
            queued[job.index] = _entry(ssn, job)
            continue
        expected = _expected_pop(ssn, jq, queued)
        job = jq.pop()
        assert job is not None and job.index == expected, (job and job.name, ssn.snap.jobs[expected].name)
        del queued[job.index]
        if draining or data.draw(st.booleans()):
            stmt = ssn.statement()
            stmt.allocate(ssn.snap.tasks[job.tasks[0]], next(nodes) // 8)
            stmt.commit()
        else:
            waiting.append(job)
    if not queued:
        assert jq.pop() is None


_offset = st.sampled_from([-1.0, 0.0, 1.0])  # fair share and quota at, just below or just above the boundary


@st.composite
def _queue_state(draw: st.DrawFn) -> tuple:
    """One queue's inputs to the order key: (alloc, req, fair, deserved, allocatable, total) over three
    resources, with the fair share and the quota often exactly at the allocation (with the job)."""
    alloc = draw(st.lists(st.integers(0, 10**6), min_size=3, max_size=3))
    req = draw(st.lists(st.integers(0, 10**4), min_size=3, max_size=3))
    fair = [max(a + draw(_offset), 0.0) for a in alloc]
    deserved = [draw(st.one_of(st.just(INF), _offset.map(lambda o, t=a + x: t + o))) for a, x in zip(alloc, req)]
    allocatable = draw(st.lists(st.one_of(st.just(INF), st.floats(1.0, 1e7)), min_size=3, max_size=3))
    total = draw(st.lists(st.floats(1.0, 1e7), min_size=3, max_size=3))
    return alloc, req, fair, deserved, allocatable, total


@given(state=_queue_state(), neg_priority=st.integers(-200, 0))
def test_plain_queue_order_key_equals_the_general_one(state: tuple, neg_priority: int) -> None:
    alloc, req, fair, deserved, allocatable, total = state
    divisors = share_divisors(allocatable, total)
    assert divisors is not None  # positive allocatable shares or none, positive totals: every resource has one
    general = queue_order_key(alloc, req, fair, deserved, allocatable, total, neg_priority)
    assert plain_queue_order_key(alloc, req, fair, deserved, divisors, neg_priority) == general


def test_share_divisors_leave_the_other_cases_to_the_general_key() -> None:
    assert share_divisors([0.0, INF, 5.0], [10.0, 10.0, 10.0]) is None  # a share of 0: the penalty rule
    assert share_divisors([INF, INF, INF], [10.0, 0.0, 10.0]) is None  # nothing of a resource in the cluster
    assert share_divisors([2.0, INF, 5.0], [10.0, 20.0, 10.0]) == (2.0, 20.0, 5.0)


def test_a_queue_without_siblings_with_jobs_is_taken_without_its_key() -> None:
    """Every pop from one leaf (its parents have no other child with jobs) asks for no queue key: ranking a
    single child was a key per pop, about a fifth of a first cycle's allocate over 4,000 one-pod jobs. Once a
    sibling has jobs too, the keys decide again."""
    ssn = _tree_session([(0, 0, 1)] * 4)
    jq = JobQueue(ssn, list(ssn.snap.jobs))
    asked: list[int] = []
    key = jq.queue_key
    jq.queue_key = lambda qi, req: (asked.append(qi), key(qi, req))[1]  # type: ignore[method-assign]
    assert [jq.pop().name for _ in range(3)] == ["job-00", "job-01", "job-02"]  # type: ignore[union-attr]
    assert asked == []
    other = _tree_session([(0, 0, 1), (1, 0, 1)])
    jq = JobQueue(other, list(other.snap.jobs))
    key = jq.queue_key
    jq.queue_key = lambda qi, req: (asked.append(qi), key(qi, req))[1]  # type: ignore[method-assign]
    assert jq.pop() is not None and asked


class _RerankEveryPop(JobQueue):
    """The JobQueue as it was before ``_recheck`` kept keys: every pop's path is ranked again at the next choice."""

    def pop(self) -> JobInfo | None:
        job = super().pop()
        if job is not None:
            self._unrank(self.ssn.queues.ancestors[job.queue])
        return job


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(data=st.data(), n=st.integers(1, 14))
def test_keys_kept_after_a_pop_give_the_pops_of_a_queue_that_ranks_every_path_again(
    data: st.DataObject, n: int
) -> None:
    """After a pop, its path keeps its keys when neither its queues' allocations nor the leaf's best request
    moved. Both queues run on one Session through the same steps: pops (each popped job is placed, left
    waiting, or placed and rolled back, so allocations change, change and change back, or stay), pushes back,
    and waiting jobs placed later, which changes the allocation of queues off the last pop's path (where
    neither queue ranks again: KAI's queue heap does not either). Every pop is the same job in both."""
    spec = data.draw(
        st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), st.integers(1, 2)), min_size=n, max_size=n)
    )
    ssn = _tree_session(spec)
    kept, every = JobQueue(ssn, list(ssn.snap.jobs)), _RerankEveryPop(ssn, list(ssn.snap.jobs))
    waiting: list[JobInfo] = []
    nodes = iter(range(4 * 8))
    for _ in range(4 * n):
        step = data.draw(st.sampled_from(["pop", "pop", "pop", "push", "place"]))
        if step == "push" and waiting:
            job = waiting.pop(data.draw(st.integers(0, len(waiting) - 1)))
            kept.push(job)
            every.push(job)
        elif step == "place" and waiting:
            job = waiting.pop(data.draw(st.integers(0, len(waiting) - 1)))
            stmt = ssn.statement()
            stmt.allocate(ssn.snap.tasks[job.tasks[0]], next(nodes) // 8)
            stmt.commit()
        else:
            job = kept.pop()
            other = every.pop()
            assert (job and job.name) == (other and other.name)
            if job is None:
                break
            outcome = data.draw(st.sampled_from(["placed", "waiting", "rolled back"]))
            if outcome == "waiting":
                waiting.append(job)
                continue
            stmt = ssn.statement()
            stmt.allocate(ssn.snap.tasks[job.tasks[0]], next(nodes) // 8)
            (stmt.commit if outcome == "placed" else stmt.rollback)()
            if outcome == "rolled back":
                waiting.append(job)


def test_a_failed_attempt_keeps_the_path_keys() -> None:
    """Pops whose attempts allocate nothing, from a leaf whose jobs all ask for one GPU, ask for no key after the
    first choice (re-ranking every path was a seventh of a saturated cycle); a placement ranks the path again."""
    ssn = _tree_session([(0, 0, 1)] * 3 + [(2, 0, 1)] * 3)
    jq = JobQueue(ssn, list(ssn.snap.jobs))
    asked: list[int] = []
    key = jq.queue_key
    jq.queue_key = lambda qi, req: (asked.append(qi), key(qi, req))[1]  # type: ignore[method-assign]
    first = jq.pop()
    assert first is not None and asked
    asked.clear()
    second = jq.pop()
    assert second is not None and second.queue == first.queue and asked == []
    stmt = ssn.statement()
    stmt.allocate(ssn.snap.tasks[second.tasks[0]], 0)
    stmt.commit()
    assert jq.pop() is not None and asked  # the allocation moved: the path is ranked again
