"""Queue capacity before placing a job (kai.scheduler.capacity; docs/reference/kai-behaviour.md §4.2, allocate step 1).

A table of clusters: a department ``dept`` with two teams; team-a's pending job ``new`` is checked against the
limits of team-a and dept (OverLimit) and, when it is non-preemptible, against their quotas for
non-preemptible pods (NonPreemptibleOverQuota). Every case states the full answer, message included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kai.scheduler.capacity import check_capacity, job_request
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.model import JobFailure
from tests.unit.builders import UNLIMITED, Bounds, job, job_docs, node, queue, session_of, snapshot_of

UNSET_LIMIT = (-1, None, 1)  # quota unlimited, no limit field: a hard cap of 0


@dataclass
class Case:
    id: str
    new: dict[str, Any]  # job_docs fields of team-a's pending job "new" (1 pod unless "pods" says otherwise)
    want: JobFailure | None
    team_a: dict[str, Bounds] = field(default_factory=dict)  # queue() resource bounds
    dept: dict[str, Bounds] = field(default_factory=dict)
    running: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (name, team, job_docs fields)


def over_limit(message: str) -> JobFailure:
    return JobFailure("OverLimit", message)


def np_over_quota(requested: str, queue_name: str, quota: str, allocated: str) -> JobFailure:
    return JobFailure(
        "NonPreemptibleOverQuota",
        f"Non-preemptible workload is over quota. Workload requested {requested}, but {queue_name} quota is {quota}, "
        f"while {allocated} are already allocated for non-preemptible pods. "
        "Use a preemptible workload to go over quota.",
    )


INFERENCE = {"priority_class": "inference"}  # non-preemptible (priority 125)

CASES = [
    # --- OverLimit ---------------------------------------------------------------------------------------------
    Case("no bounds anywhere", {"gpu": 8, **INFERENCE}, None),
    Case("below the limit", {"gpu": 1}, None, team_a={"gpu": (-1, 4, 1)}, running=[("r", "team-a", {"pods": 2})]),
    Case("exactly at the limit", {"gpu": 2}, None, team_a={"gpu": (-1, 4, 1)}, running=[("r", "team-a", {"pods": 2})]),
    Case(
        "one GPU over the limit",
        {"gpu": 3},
        over_limit("queue team-a is at its GPU limit: 2 GPUs of 4 GPUs allocated, job needs 3 GPUs"),
        team_a={"gpu": (-1, 4, 1)},
        running=[("r", "team-a", {"pods": 2})],
    ),
    Case(
        "an unset limit is a hard cap of 0",
        {"gpu": 1},
        over_limit(
            "queue team-a is at its GPU limit (limit 0 or unset is a hard cap of 0; use -1 for no limit): "
            "0 GPUs of 0 GPUs allocated, job needs 1 GPU"
        ),
        team_a={"gpu": UNSET_LIMIT},
    ),
    Case("a limit binds only the resources the job requests", {"gpu": 0}, None, team_a={"gpu": UNSET_LIMIT}),
    Case(
        "the department's limit binds its teams",
        {"gpu": 2},
        over_limit("queue dept is at its GPU limit: 3 GPUs of 4 GPUs allocated, job needs 2 GPUs"),
        dept={"gpu": (-1, 4, 1)},
        running=[("r", "team-b", {"pods": 3})],
    ),
    Case(
        "the leaf is checked before its department",
        {"gpu": 2},
        over_limit("queue team-a is at its GPU limit: 1 GPU of 2 GPUs allocated, job needs 2 GPUs"),
        team_a={"gpu": (-1, 2, 1)},
        dept={"gpu": (-1, 2, 1)},
        running=[("r", "team-a", {"pods": 1})],
    ),
    Case(
        "CPU limit in millicores",
        {"gpu": 0, "cpu": "1"},
        over_limit("queue team-a is at its CPU limit: 1.5 CPU cores of 2 CPU cores allocated, job needs 1 CPU core"),
        team_a={"cpu": (-1, 2000, 1)},
        running=[("r", "team-a", {"gpu": 0, "cpu": "1500m"})],
    ),
    Case(
        "memory limit in MB",
        {"gpu": 0, "memory": "600M"},
        over_limit(  # 10^6-byte MB in the Queue, binary units in messages
            "queue team-a is at its memory limit: 476.8Mi memory of 953.7Mi memory allocated, job needs 572.2Mi memory"
        ),
        team_a={"memory": (-1, 1000, 1)},
        running=[("r", "team-a", {"gpu": 0, "memory": "500M"})],
    ),
    Case(
        "a gang's request is all its pods",
        {"gpu": 1, "pods": 3},
        over_limit("queue team-a is at its GPU limit: 0 GPUs of 2 GPUs allocated, job needs 3 GPUs"),
        team_a={"gpu": (-1, 2, 1)},
    ),
    # GPU fractions count as fractions of a GPU, on every device they take
    Case(
        "a fraction fits beside a running fraction",
        {"fraction": "0.5"},
        None,
        team_a={"gpu": (-1, 1, 1)},
        running=[("r", "team-a", {"fraction": "0.5"})],
    ),
    Case(
        "a fraction over the limit",
        {"fraction": "0.6"},
        over_limit("queue team-a is at its GPU limit: 0.5 GPUs of 1 GPU allocated, job needs 0.6 GPUs"),
        team_a={"gpu": (-1, 1, 1)},
        running=[("r", "team-a", {"fraction": "0.5"})],
    ),
    Case(
        "a multi-device fraction counts on each device",
        {"fraction": "0.3", "devices": 2},
        over_limit("queue team-a is at its GPU limit: 0.5 GPUs of 1 GPU allocated, job needs 0.6 GPUs"),
        team_a={"gpu": (-1, 1, 1)},
        running=[("r", "team-a", {"fraction": "0.5"})],
    ),
    Case(
        "gpu-memory is charged as its share of the node's GPU, rounded up to 0.01",
        {"gpu_memory": 30001},  # of 80000 MiB: 0.37500125 -> 0.38
        over_limit("queue team-a is at its GPU limit: 0.75 GPUs of 1 GPU allocated, job needs 0.38 GPUs"),
        team_a={"gpu": (-1, 1, 1)},
        running=[("r", "team-a", {"fraction": "0.75"})],
    ),
    # --- NonPreemptibleOverQuota ------------------------------------------------------------------------------
    Case(
        "non-preemptible within quota",
        {"gpu": 1, **INFERENCE},
        None,
        team_a={"gpu": (2, -1, 1)},
        running=[("r", "team-a", {"pods": 1, **INFERENCE})],
    ),
    Case(
        "non-preemptible over quota",
        {"gpu": 2, **INFERENCE},
        np_over_quota("2 GPUs", "team-a", "2 GPUs", "1 GPU"),
        team_a={"gpu": (2, -1, 1)},
        running=[("r", "team-a", {"pods": 1, **INFERENCE})],
    ),
    Case(
        "a preemptible job may go over quota",
        {"gpu": 2},
        None,
        team_a={"gpu": (2, -1, 1)},
        running=[("r", "team-a", {"pods": 1, **INFERENCE})],
    ),
    Case(
        "preemptible pods do not use the non-preemptible quota",
        {"gpu": 2, **INFERENCE},
        None,
        team_a={"gpu": (2, -1, 1)},
        running=[("r", "team-a", {"pods": 2})],
    ),
    Case(
        "the department's quota binds non-preemptible pods of all its teams",
        {"gpu": 1, **INFERENCE},
        np_over_quota("1 GPU", "dept", "2 GPUs", "2 GPUs"),
        dept={"gpu": (2, -1, 1)},
        running=[("r", "team-b", {"pods": 2, **INFERENCE})],
    ),
    Case(
        "a quota of 0 admits no non-preemptible pod",
        {"gpu": 1, "priority_class": "build"},
        np_over_quota("1 GPU", "team-a", "0 GPUs", "0 GPUs"),
        team_a={"gpu": (0, -1, 1)},
    ),
    Case(
        "a limit fails before the quota",
        {"gpu": 3, **INFERENCE},
        over_limit("queue team-a is at its GPU limit: 0 GPUs of 2 GPUs allocated, job needs 3 GPUs"),
        team_a={"gpu": (1, 2, 1)},
    ),
]


def _docs(case: Case) -> list[dict[str, Any]]:
    docs = [
        node("n0", gpu=8, cpu="16", labels={"nvidia.com/gpu.memory": "80000"}),
        queue("dept", **case.dept),
        queue("team-a", "dept", **case.team_a),
        queue("team-b", "dept"),
    ]
    for name, team, fields in case.running:
        fields = dict(fields)
        docs += job_docs(name, team, fields.pop("pods", 1), on="n0", **fields)
    fields = dict(case.new)
    docs += job_docs("new", "team-a", fields.pop("pods", 1), **fields)
    return docs


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_check_capacity(case: Case) -> None:
    ssn = session_of(_docs(case))
    new = job(ssn.snap, "new")
    got = check_capacity(ssn, new, ssn.pending_tasks(new))
    if got is None or case.want is None:
        assert got == case.want
        return
    assert (got.reason, got.message) == (case.want.reason, case.want.message)
    if got.reason == "OverLimit":  # the queue whose limit binds: evicting pods under it may make room
        assert got.message.startswith(f"queue {ssn.snap.queues[got.queue].name} is at its ")
    else:
        assert got.queue == -1


def test_allocate_leaves_an_over_limit_job_pending_with_the_reason() -> None:
    """Through the cycle: the job is not placed although the node has room, and its PodGroup says why."""
    case = next(c for c in CASES if c.id == "one GPU over the limit")
    result = run_cycle(snapshot_of(_docs(case)), SchedulerConf(actions=("allocate",)))
    assert [b.pod.name for b in result.binds] == []
    (status,) = [s for s in result.podgroups if s.name == "new"]
    (condition,) = status.conditions
    assert (condition.reason, condition.message) == (case.want.reason, case.want.message)  # type: ignore[union-attr]


def test_the_unbounded_shortcut_still_sees_an_ancestor_limit() -> None:
    """A leaf with no limit and no quota under a department with a limit is not unbounded: checked every time,
    including after the session's cached answer for the leaf exists."""
    docs = [
        node("n0", gpu=8),
        queue("dept", gpu=(-1, 2, 1)),
        queue("team-a", "dept"),
        queue("team-b", "dept"),
        *job_docs("small", "team-a", 1, gpu=1),
        *job_docs("big", "team-a", 1, gpu=3),
    ]
    ssn = session_of(docs)
    small, big = job(ssn.snap, "small"), job(ssn.snap, "big")
    assert check_capacity(ssn, small, ssn.pending_tasks(small)) is None
    failure = check_capacity(ssn, big, ssn.pending_tasks(big))
    assert failure is not None and failure.reason == "OverLimit" and "queue dept" in failure.message


def test_job_request_sums_pods_in_queue_units() -> None:
    docs = [
        node("n0"),
        queue("dept"),
        queue("team-a", "dept", gpu=UNLIMITED),
        *job_docs("mixed", "team-a", 2, gpu=2, cpu="250m", memory="1M"),
    ]
    ssn = session_of(docs)
    tasks = ssn.pending_tasks(job(ssn.snap, "mixed"))
    assert job_request(tasks) == (4000, 500, 2_000_000)
    assert job_request(tasks[:1]) == (2000, 250, 1_000_000)
