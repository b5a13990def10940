"""KAI's reclaim rules (kai.scheduler.reclaimable; docs/reference/kai-behaviour.md §4.4.4), case by case.

Each case is a small cluster of real manifests opened as a Session (tests.unit.builders). Quotas are set with
over-quota weight 0 where a test needs fair shares it can state (then a queue's fair share is
min(quota, request)); every test first asserts the fair shares it relies on, so a change in the division shows
up as a broken premise, not as a puzzling rule failure. The last tests run the reclaim action through the cycle.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai.scheduler.capacity import job_request
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.model import MILLI
from kai.scheduler.reclaimable import ReclaimRules, leveled_queues
from kai.scheduler.session import Session
from tests.unit.builders import job, job_docs, node, pod, podgroup, qi, queue, session_of, snapshot_of

G = MILLI  # one GPU in queue base units


def fair(ssn: Session, name: str) -> float:
    return float(ssn.queues.fair_share[qi(ssn.snap, name)][0]) / G


def alloc(ssn: Session, name: str) -> float:
    return ssn.queues.alloc[qi(ssn.snap, name)][0] / G


def req_of(ssn: Session, name: str) -> tuple[int, int, int]:
    return job_request(ssn.pending_tasks(job(ssn.snap, name)))


# --- leveled queues: the two children of the lowest common ancestor ----------------------------------------

TREE = [
    queue("dept-1"),
    queue("team-a", "dept-1"),
    queue("team-b", "dept-1"),
    queue("dept-2"),
    queue("team-c", "dept-2"),
    queue("group-c", "team-c"),
    queue("solo"),
]


@pytest.mark.parametrize(
    ("reclaimer", "victim", "want"),
    [
        ("team-a", "team-b", ("team-a", "team-b")),  # siblings: themselves
        ("team-a", "team-c", ("dept-1", "dept-2")),  # across departments: the departments
        ("team-a", "group-c", ("dept-1", "dept-2")),  # different depths: still the departments
        ("group-c", "team-b", ("dept-2", "dept-1")),  # the reclaimer's side first
        ("team-a", "solo", ("dept-1", "solo")),  # a top-level leaf against a department
        ("solo", "group-c", ("solo", "dept-2")),
        ("team-a", "team-a", ("team-a", "team-a")),  # one queue: itself on both sides
    ],
)
def test_leveled_queues(reclaimer: str, victim: str, want: tuple[str, str]) -> None:
    ssn = session_of([node("n0"), *TREE])
    snap = ssn.snap
    got = leveled_queues(ssn, qi(snap, reclaimer), qi(snap, victim))
    assert tuple(snap.queues[q].name for q in got) == want


# --- the gate: the reclaimer's leaf queue stays within its fair share --------------------------------------


@pytest.mark.parametrize(
    ("running", "pending", "message"),
    [
        (1, 1, None),  # 1 + 1 <= fair share 2: may reclaim
        (0, 2, None),  # exactly the fair share
        (
            1,
            2,
            "queue team-a would exceed its fair share of GPU: 1 GPU allocated + 2 GPUs requested > fair share 2 GPUs",
        ),
        (
            2,
            1,
            "queue team-a would exceed its fair share of GPU: 2 GPUs allocated + 1 GPU requested > fair share 2 GPUs",
        ),
    ],
)
def test_reclaimer_stays_within_its_fair_share(running: int, pending: int, message: str | None) -> None:
    docs = [
        node("n0", gpu=8),
        queue("dept"),
        queue("team-a", "dept", gpu=(2, -1, 0)),
        queue("team-b", "dept", gpu=(6, -1, 0)),
        *job_docs("a-run", "team-a", running, on="n0"),
        *job_docs("a-new", "team-a", 1, gpu=pending),
        *job_docs("b-run", "team-b", 8 - running, on="n0", min_member=1),
    ]
    ssn = session_of(docs)
    assert fair(ssn, "team-a") == 2
    assert ReclaimRules(ssn).cannot_reclaim(job(ssn.snap, "a-new"), req_of(ssn, "a-new")) == message


def test_gate_reads_only_the_requested_resources() -> None:
    """A CPU-only reclaimer is not held back by its queue's GPU use above fair share."""
    docs = [
        node("n0", gpu=4),
        queue("dept"),
        queue("team-a", "dept", gpu=(1, -1, 0)),
        queue("team-b", "dept"),
        *job_docs("a-run", "team-a", 1, on="n0", gpu=3, min_member=1),
        *job_docs("a-cpu", "team-a", 1, gpu=0),
    ]
    ssn = session_of(docs)
    assert alloc(ssn, "team-a") > fair(ssn, "team-a") == 1
    assert ReclaimRules(ssn).cannot_reclaim(job(ssn.snap, "a-cpu"), req_of(ssn, "a-cpu")) is None


# --- the victim filter ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a_quota", "b_quota", "b_running", "allowed"),
    [
        # the reclaimer within its quota (0 + 1 <= 2): the victim must be above its quota, or at it
        (2, 2, 3, True),  # above its quota
        (2, 3, 3, True),  # exactly at it: not below it on any requested resource
        (2, 4, 3, False),  # below its quota: never a victim while the reclaimer is within quota
        (2, -1, 3, True),  # an unlimited quota is no floor to be below
        # the reclaimer above its quota (0 + 1 > 0): the victim must be above max(quota, fair share)
        (0, 1, 3, True),  # quota 1, fair share 1 (weight 0), uses 3
        (0, 3, 3, False),  # at its quota, which is its fair share
    ],
)
def test_victim_filter(a_quota: int, b_quota: int, b_running: int, allowed: bool) -> None:
    docs = [
        node("n0", gpu=b_running),
        queue("dept"),
        queue("team-a", "dept", gpu=(a_quota, -1, 1)),  # weight 1: a reclaimer above quota still has a fair share
        queue("team-b", "dept", gpu=(b_quota, -1, 0)),
        *job_docs("a-new", "team-a", 1),
        *job_docs("b-run", "team-b", b_running, on="n0", min_member=1),
    ]
    ssn = session_of(docs)
    a, b = job(ssn.snap, "a-new"), job(ssn.snap, "b-run")
    assert ReclaimRules(ssn).victim_allowed(a, req_of(ssn, "a-new"), b) is allowed


def test_victim_filter_compares_departments_not_teams() -> None:
    """team-a (dept-1) against team-c (dept-2) is judged as dept-1 against dept-2: team-c far above its own
    quota is no victim while dept-2 is below its quota; team-d, under its own quota in a department above
    its quota, is one."""
    docs = [
        node("n0", gpu=8),
        queue("dept-1", gpu=(4, -1, 0)),
        queue("team-a", "dept-1", gpu=(4, -1, 0)),
        queue("dept-2", gpu=(5, -1, 0)),
        queue("team-c", "dept-2", gpu=(0, -1, 0)),
        queue("dept-3", gpu=(0, -1, 0)),
        queue("team-d", "dept-3", gpu=(4, -1, 0)),
        *job_docs("a-new", "team-a", 1),
        *job_docs("c-run", "team-c", 4, on="n0", min_member=1),
        *job_docs("d-run", "team-d", 4, on="n0", min_member=1),
    ]
    ssn = session_of(docs)
    rules = ReclaimRules(ssn)
    a = job(ssn.snap, "a-new")
    req = req_of(ssn, "a-new")
    assert alloc(ssn, "team-c") == 4 and ssn.snap.queues[qi(ssn.snap, "team-c")].deserved[0] == 0
    assert not rules.victim_allowed(a, req, job(ssn.snap, "c-run"))  # dept-2: 4 used, quota 5
    assert rules.victim_allowed(a, req, job(ssn.snap, "d-run"))  # dept-3: 4 used, quota 0


# --- the scenario validator: MaintainFairShare or GuaranteeDeservedQuota, per victim --------------------------


def _reject(ssn: Session, reclaimer: str, victims: list[str], m: float = 1.0) -> str | None:
    """Run the validator on the scenario "evict *victims* (pods, one unit each), pipeline the reclaimer's pending
    pods to n0", made with a real Statement (rolled back afterwards)."""
    snap = ssn.snap
    rjob = job(snap, reclaimer)
    pending = ssn.pending_tasks(rjob)[:]
    rules = ReclaimRules(ssn, m)
    before = [row[:] for row in ssn.queues.alloc]
    stmt = ssn.statement()
    units = []
    for name in victims:
        t = next(t for t in snap.tasks if t.name == name)
        stmt.evict(t)
        units.append((snap.jobs[t.job].queue, t.qreq))
    for t in pending:
        stmt.pipeline(t, 0)
    try:
        return rules.reject(rjob, job_request(pending), units, before)
    finally:
        stmt.rollback()


def _two_teams(
    a: tuple[int, int], b: tuple[int, int], b_running: int, gpus: int, a_jobs: int = 1
) -> list[dict[str, Any]]:
    """team-a (quota, weight) reclaims from team-b (quota, weight), which runs *b_running* one-GPU pods on a
    node of *gpus* GPUs; team-a has *a_jobs* pending jobs a-1, a-2, ... of that many one-GPU pods each."""
    docs = [
        node("n0", gpu=gpus),
        queue("dept"),
        queue("team-a", "dept", gpu=(a[0], -1, a[1])),
        queue("team-b", "dept", gpu=(b[0], -1, b[1])),
        *job_docs("b-run", "team-b", b_running, on="n0", min_member=1),
    ]
    for k in range(1, a_jobs + 1):
        docs += job_docs(f"a-{k}", "team-a", k)
    return docs


def test_maintain_fair_share_victim_above_its_share() -> None:
    ssn = session_of(_two_teams(a=(2, 0), b=(1, 0), b_running=4, gpus=4, a_jobs=2))
    assert (fair(ssn, "team-a"), fair(ssn, "team-b")) == (2, 1)
    assert _reject(ssn, "a-2", ["b-run-3", "b-run-2"]) is None


def test_each_victim_is_judged_on_what_its_queue_has_left() -> None:
    """team-b (fair share 3) uses 4: the first pod taken leaves it at 4 > 3 (fine); a second would be judged at 3,
    its fair share, and team-a going above its quota 1 cannot claim GuaranteeDeservedQuota."""
    ssn = session_of(_two_teams(a=(1, 1), b=(3, 0), b_running=4, gpus=4, a_jobs=2))
    assert (fair(ssn, "team-a"), fair(ssn, "team-b")) == (1, 3)
    assert _reject(ssn, "a-1", ["b-run-3"]) is None
    assert _reject(ssn, "a-2", ["b-run-3", "b-run-2"]) == (
        "queue team-b is not above its fair share: it uses 3 GPUs with fair share 3 GPUs and quota 3 GPUs"
    )


@pytest.mark.parametrize("a_quota", [2, 1])  # within its quota after the reclaim, or exactly at it
def test_guarantee_deserved_quota_victim_at_its_share_but_above_quota(a_quota: int) -> None:
    """team-b uses exactly its fair share 3 (MaintainFairShare fails) but more than its quota 1, and team-a stays
    within its quota: GuaranteeDeservedQuota holds."""
    ssn = session_of(_two_teams(a=(a_quota, 0), b=(1, 1), b_running=3, gpus=4))
    assert (fair(ssn, "team-a"), fair(ssn, "team-b")) == (1, 3)
    assert _reject(ssn, "a-1", ["b-run-2"]) is None


def test_neither_strategy_reclaimer_above_quota_victim_at_share() -> None:
    """The same victim, but the reclaimer's quota is 0: it would go above its quota, so only MaintainFairShare
    could allow the eviction, and team-b is not above its share."""
    ssn = session_of(_two_teams(a=(0, 1), b=(1, 1), b_running=3, gpus=4))
    assert (fair(ssn, "team-a"), fair(ssn, "team-b")) == (1, 3)
    assert _reject(ssn, "a-1", ["b-run-2"]) == (
        "queue team-b is not above its fair share: it uses 3 GPUs with fair share 3 GPUs and quota 1 GPU"
    )


def test_strategies_use_the_leveled_queues() -> None:
    """Across departments the victim's side is its department: team-c is far above its own quota 0, but dept-2
    holds no more than its fair share, so the eviction is refused, naming dept-2."""
    docs = [
        node("n0", gpu=4),
        queue("dept-1", gpu=(0, -1, 0)),
        queue("team-a", "dept-1", gpu=(1, -1, 0)),
        queue("dept-2", gpu=(4, -1, 0)),
        queue("team-c", "dept-2", gpu=(0, -1, 1)),
        *job_docs("a-new", "team-a", 1),
        *job_docs("c-run", "team-c", 4, on="n0", min_member=1),
    ]
    ssn = session_of(docs)
    assert fair(ssn, "dept-2") == 4 and fair(ssn, "team-c") == 4
    why = _reject(ssn, "a-new", ["c-run-3"])
    assert why is not None and why.startswith("queue dept-2 is not above its fair share: it uses 4 GPUs")


def test_non_preemptible_reclaimer_keeps_within_quota_at_every_level() -> None:
    """A non-preemptible reclaimer may take only what its queues' quotas cover: team-a's quota is unlimited but
    dept-1's is 1, which a running non-preemptible pod already fills."""
    docs = [
        node("n0", gpu=4),
        queue("dept-1", gpu=(1, -1, 1)),
        queue("team-a", "dept-1", gpu=(-1, -1, 1)),
        queue("dept-2", gpu=(0, -1, 1)),
        queue("team-b", "dept-2", gpu=(0, -1, 1)),
        *job_docs("a-steady", "team-a", 1, on="n0", priority_class="build"),
        *job_docs("a-new", "team-a", 1, priority_class="inference"),
        *job_docs("b-run", "team-b", 3, on="n0", min_member=1),
    ]
    ssn = session_of(docs)
    assert not job(ssn.snap, "a-new").preemptible
    assert _reject(ssn, "a-new", ["b-run-2"]) == "queue dept-1 would hold more non-preemptible GPU than its quota"


# --- the reclaimer stays less saturated than the siblings it takes from (the multiplier) ----------------------


def _saturation_cluster(x_running: int = 4) -> list[dict[str, Any]]:
    """dept-1, dept-2 and dept-3 have quota 4 and no over-quota weight, so each has fair share 4 (dept-3 asks for
    4 with a pod no node can take). dept-1 uses 4 (*x_running*), dept-2 uses 8, on a node they fill; team-a
    (dept-1) asks for 1 within its own fair share. After reclaiming one GPU from dept-2, dept-1 would be at
    5/4 = 1.25x its fair share and dept-2 at 7/4 = 1.75x."""
    unplaceable = pod("d-job-0", "d-job", gpu=4)
    unplaceable["spec"]["nodeSelector"] = {"pool": "nowhere"}
    return [
        node("n0", gpu=x_running + 8, cpu="64"),
        queue("dept-1", gpu=(4, -1, 0)),
        queue("dept-2", gpu=(4, -1, 0)),
        queue("dept-3", gpu=(4, -1, 0)),
        queue("team-a", "dept-1", gpu=(1, -1, 0)),
        queue("team-x", "dept-1", gpu=(3, -1, 0)),
        queue("team-c", "dept-2", gpu=(4, -1, 0)),
        queue("team-d", "dept-3", gpu=(4, -1, 0)),
        *job_docs("x-run", "team-x", x_running, on="n0", min_member=1),
        *job_docs("a-new", "team-a", 1),
        *job_docs("c-run", "team-c", 8, on="n0", min_member=1),
        podgroup("d-job", "team-d"),
        unplaceable,
    ]


@pytest.mark.parametrize(
    ("key", "m", "reclaims"),
    [
        (None, None, True),  # default 1: 1.25 < 1.75
        ("relcaimerSaturationMultiplier", 1.0, True),
        ("relcaimerSaturationMultiplier", 1.3, True),  # 1.625 < 1.75
        ("relcaimerSaturationMultiplier", 1.4, False),  # 1.75 >= 1.75: refused at the boundary
        ("reclaimerSaturationMultiplier", 1.4, False),  # the corrected spellings mean the same
        ("reclaimerUtilizationMultiplier", 2.0, False),
        ("reclaimerUtilizationMultiplier", 1.3, True),
    ],
)
def test_saturation_multiplier(key: str | None, m: float | None, reclaims: bool) -> None:
    conf = SchedulerConf(actions=("reclaim",))
    if key is not None:
        conf = conf.with_plugin("proportion", **{key: m})
    snap = snapshot_of(_saturation_cluster(), conf=conf)
    ssn = session_of(_saturation_cluster(), conf)
    assert [fair(ssn, d) for d in ("dept-1", "dept-2", "dept-3")] == [4, 4, 4]
    result = run_cycle(snap, conf)
    assert [str(p.pod) for p in result.pipelines] == (["default/a-new-0"] if reclaims else [])
    assert len(result.evictions) == (1 if reclaims else 0)
    if not reclaims:
        message = next(c.message for pg in result.podgroups if pg.name == "a-new" for c in pg.conditions)
        assert m is not None
        times = f"{1.25 * m:.2f}x with the saturation multiplier {m:g}"
        assert f"queue dept-1 would use 1.25x its fair share of GPU ({times}), not less than dept-2 (1.75x)" in message


def test_saturation_is_not_checked_for_a_reclaimer_within_its_fair_share() -> None:
    """ratio <= 1 never fails, whatever the multiplier: here dept-1 uses 3 and ends at exactly its fair share 4."""
    docs = _saturation_cluster(x_running=3)
    conf = SchedulerConf(actions=("reclaim",)).with_plugin("proportion", relcaimerSaturationMultiplier=100.0)
    result = run_cycle(snapshot_of(docs, conf=conf), conf)
    assert [str(p.pod) for p in result.pipelines] == ["default/a-new-0"]


# --- KAI's words for a queue in the eviction message -----------------------------------------------------------


def test_describe_a_queue() -> None:
    docs = [
        node("n0", gpu=6),
        queue("dept"),
        queue("team-a", "dept", gpu=(2, -1, 1), priority=150),
        queue("team-b", "dept", gpu=(-1, -1, 1)),
        *job_docs("a-run", "team-a", 6, on="n0", min_member=1),
    ]
    ssn = session_of(docs)
    rules = ReclaimRules(ssn)
    a = qi(ssn.snap, "team-a")
    assert rules.describe(a, ssn.queues.alloc[a]) == (
        "team-a uses 6 GPUs with a quota of 2 GPUs, fair-share of 6 GPUs and queue priority of 150."
    )
    b = qi(ssn.snap, "team-b")
    assert rules.describe(b, [500, 0, 0]).startswith("team-b uses 0.5 GPUs with a quota of unlimited")
