"""Victim order (kai.scheduler.victims; KAI's VictimQueue, docs/reference/kai-behaviour.md §4.3).

Each test lists the whole order ``VictimOrder`` yields for a small cluster of real manifests, as
(job, pods, core) units: which queue gives first, which job inside it, surplus pods before a core, and when a
core may not go at all. The last test checks the order reaches the reclaim action's evictions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.model import JobInfo
from kai.scheduler.session import Session
from kai.scheduler.victims import VictimOrder
from tests.unit.builders import job, job_docs, node, pod, podgroup, queue, session_of, snapshot_of, task

Unit = tuple[str, tuple[str, ...], bool]


def order(
    ssn: Session, core_allowed: Callable[[JobInfo], bool] = lambda j: True, jobs: list[JobInfo] | None = None
) -> list[Unit]:
    snap = ssn.snap
    units = VictimOrder(ssn, snap.jobs if jobs is None else jobs, core_allowed)
    return [(snap.jobs[u.job].name, tuple(snap.tasks[t].name for t in u.tasks), u.core) for u in units]


def one_queue(*jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    docs = [node("n0", gpu=16, cpu="32"), queue("dept"), queue("team", "dept")]
    for j in jobs:
        docs += j
    return docs


# --- inside one queue -------------------------------------------------------------------------------------------


def test_lowest_priority_gives_first_then_the_newest() -> None:
    ssn = session_of(
        one_queue(
            job_docs("old-train", "team", 1, on="n0"),
            job_docs("build", "team", 1, on="n0", priority_class="build-preemptible"),
            job_docs("new-train", "team", 1, on="n0"),
        )
    )
    assert order(ssn) == [
        ("new-train", ("new-train-0",), True),
        ("old-train", ("old-train-0",), True),
        ("build", ("build-0",), True),
    ]


def test_surplus_pods_go_one_by_one_last_first_then_the_core_whole() -> None:
    ssn = session_of(one_queue(job_docs("elastic", "team", 4, on="n0", min_member=2)))
    assert order(ssn) == [
        ("elastic", ("elastic-3",), False),
        ("elastic", ("elastic-2",), False),
        ("elastic", ("elastic-0", "elastic-1"), True),
    ]


def test_a_job_above_its_minimum_gives_before_a_job_at_it() -> None:
    """Same priority: the elastic job's surplus goes first although it is older; then, both at their minimum,
    the newer gang's core goes first."""
    ssn = session_of(
        one_queue(
            job_docs("elastic", "team", 3, on="n0", min_member=1),
            job_docs("gang", "team", 2, on="n0"),
        )
    )
    assert order(ssn) == [
        ("elastic", ("elastic-2",), False),
        ("elastic", ("elastic-1",), False),
        ("gang", ("gang-0", "gang-1"), True),
        ("elastic", ("elastic-0",), True),
    ]


def test_min_member_zero_gives_every_pod_alone_and_no_empty_unit() -> None:
    ssn = session_of(one_queue(job_docs("any", "team", 3, on="n0", min_member=0)))
    assert order(ssn) == [
        ("any", ("any-2",), False),
        ("any", ("any-1",), False),
        ("any", ("any-0",), False),
    ]


def test_a_protected_core_is_never_offered_but_its_surplus_is() -> None:
    ssn = session_of(
        one_queue(
            job_docs("protected", "team", 3, on="n0", min_member=2),
            job_docs("free", "team", 1, on="n0"),
        )
    )
    assert order(ssn, core_allowed=lambda j: j.name != "protected") == [
        ("protected", ("protected-2",), False),
        ("free", ("free-0",), True),
    ]


def test_subgroups_keep_every_required_subgroup_at_its_minimum() -> None:
    """Subgroup a needs 1 of its 2 pods, b needs both of its 2: the only surplus pod is a-1, although b-1 is last in
    task order (a flat gang of minMember 3 would give b-1); then the core goes whole."""
    subgroups = [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 2}]
    docs = one_queue([podgroup("sg", "team", min_member=3, subgroups=subgroups)])
    for name in ("a-0", "a-1", "b-0", "b-1"):
        docs.append(pod(name, "sg", node_name="n0", labels={"kai.scheduler/subgroup-name": name[0]}))
    ssn = session_of(docs)
    assert order(ssn) == [
        ("sg", ("a-1",), False),
        ("sg", ("a-0", "b-0", "b-1"), True),
    ]


def test_only_pods_placed_before_the_cycle_are_victims() -> None:
    """A pod allocated earlier in this cycle was never bound (evicting it frees nothing); a job with no running pod
    and a job outside any queue offer nothing."""
    docs = one_queue(
        job_docs("running", "team", 2, on="n0", min_member=1),
        job_docs("pending", "team", 1),
        job_docs("lost", "no-such-queue", 1, on="n0"),
    )
    ssn = session_of(docs)
    stmt = ssn.statement()
    stmt.allocate(task(ssn.snap, "pending-0"), 0)
    assert order(ssn) == [("running", ("running-1",), False), ("running", ("running-0",), True)]
    stmt.rollback()


def test_only_the_jobs_given_are_ordered() -> None:
    ssn = session_of(one_queue(job_docs("a", "team", 1, on="n0"), job_docs("b", "team", 1, on="n0")))
    assert order(ssn, jobs=[job(ssn.snap, "a")]) == [("a", ("a-0",), True)]


# --- across queues ----------------------------------------------------------------------------------------------


def two_teams(a_priority: int | None = None, b_priority: int | None = None) -> list[dict[str, Any]]:
    """team-a (quota 1) runs four one-pod jobs, team-b (quota 1) two; no over-quota weight, so the fair shares
    are the quotas and the allocatable shares 1 GPU each: dominant shares 4 and 2."""
    docs = [
        node("n0", gpu=6, cpu="32"),
        queue("dept"),
        queue("team-a", "dept", gpu=(1, -1, 0), priority=a_priority),
        queue("team-b", "dept", gpu=(1, -1, 0), priority=b_priority),
    ]
    for k in range(4):
        docs += job_docs(f"a{k}", "team-a", 1, on="n0")
    for k in range(2):
        docs += job_docs(f"b{k}", "team-b", 1, on="n0")
    return docs


def test_the_queue_furthest_above_its_share_gives_until_it_is_no_longer_the_worst() -> None:
    """Dominant shares on what each queue has left: a 4 > b 2, a 3 > 2, then a tie at 2 goes to the newer queue
    (team-b: the whole order is reversed, age included), a 2 > 1, tie at 1 (b), then a's last. Inside each
    queue the newest job first."""
    ssn = session_of(two_teams())
    assert [name for name, _, _ in order(ssn)] == ["a3", "a2", "b1", "a1", "b0", "a0"]


def test_queue_priority_decides_between_queues_on_the_same_side_of_their_quota() -> None:
    """team-a has the higher priority: team-b gives first while both are above their quota (b1); then team-b is at
    its quota and team-a above it, which comes before priority (a3, a2, a1); at their quotas both, priority
    again (b0), then a0."""
    ssn = session_of(two_teams(a_priority=200))
    assert [name for name, _, _ in order(ssn)] == ["b1", "a3", "a2", "a1", "b0", "a0"]


def test_departments_are_chosen_first_then_their_teams() -> None:
    """dept-1 (quota 1) uses 3 through two teams, dept-2 (quota 2) uses 2: dept-1 gives while its dominant share is
    the larger (3/1, 2/1 against 2/2), inside it the team with the larger share first."""
    docs = [
        node("n0", gpu=5, cpu="32"),
        queue("dept-1", gpu=(1, -1, 0)),
        queue("team-a", "dept-1", gpu=(1, -1, 0)),
        queue("team-b", "dept-1", gpu=(0, -1, 0)),
        queue("dept-2", gpu=(2, -1, 0)),
        queue("team-c", "dept-2", gpu=(2, -1, 0)),
        *job_docs("a0", "team-a", 1, on="n0"),
        *job_docs("b0", "team-b", 1, on="n0"),
        *job_docs("b1", "team-b", 1, on="n0"),
        *job_docs("c0", "team-c", 1, on="n0"),
        *job_docs("c1", "team-c", 1, on="n0"),
    ]
    ssn = session_of(docs)
    names = [name for name, _, _ in order(ssn)]
    assert names[:2] == ["b1", "b0"]  # dept-1 at 3/1, then 2/1: team-b (share 0) before team-a
    assert names == ["b1", "b0", "c1", "a0", "c0"]


# --- through the reclaim action -----------------------------------------------------------------------------------


def test_reclaim_evicts_in_victim_order() -> None:
    """team-c asks for 2 GPUs on a full node: reclaim takes them from team-a, the queue furthest above its share,
    surplus pods first (the last in task order), never touching team-b's gang."""
    docs = [
        node("n0", gpu=6, cpu="32"),
        queue("dept"),
        queue("team-a", "dept", gpu=(1, -1, 0)),
        queue("team-b", "dept", gpu=(2, -1, 0)),
        queue("team-c", "dept", gpu=(2, -1, 0)),
        *job_docs("a", "team-a", 4, on="n0", min_member=1),
        *job_docs("b", "team-b", 2, on="n0"),
        *job_docs("c", "team-c", 2),
    ]
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("reclaim",)))
    assert sorted(e.pod.name for e in result.evictions) == ["a-2", "a-3"]
    assert sorted(p.pod.name for p in result.pipelines) == ["c-0", "c-1"]
