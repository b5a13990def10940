"""Consolidation, preempt and reclaim move only pods that come back (kai.scheduler.actions.solver.can_move).

A move evicts the pod and waits for its controller to make it again. On a real cluster a pod that no
controller owns is gone once evicted, so there (``bare_pods_return=False``) consolidation leaves such pods
where they are, and preempt and reclaim put such a victim back only on its own node or evict it (its whole
gang with it); the embedded cluster makes them again, so ``kai sim`` moves them as KAI does. The CI chaos
suite found both cases: a gang of bare pods lost one member to a move (consolidation's first, later a
preemptor's) and stayed bound in part.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai.explain._engine import dry_run
from kai.explain._job import CONSOLIDATION as CONSOLIDATION_NOTE
from kai.explain._job import NOT_MOVED, evictable_by
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.snapshot import Snapshot
from tests.unit.builders import job_docs, node, queue, snapshot_of

CONSOLIDATION = SchedulerConf(actions=("allocate", "consolidation"))
OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "mover", "uid": "u-mover", "controller": True}


def _docs(owned: bool) -> list[dict[str, Any]]:
    """Two 4-GPU nodes with 2 GPUs used on each: a pending 4-GPU pod fits only once a 2-GPU pod moves."""
    docs = [
        node("n0", gpu=4),
        node("n1", gpu=4),
        queue("team"),
        *job_docs("mover", "team", 1, on="n0", gpu=2),
        *job_docs("stays", "team", 1, on="n1", gpu=2, priority_class="build"),  # not preemptible: never moved
        *job_docs("big", "team", 1, gpu=4),
    ]
    if owned:
        next(d for d in docs if d["metadata"]["name"] == "mover-0")["metadata"]["ownerReferences"] = [OWNER]
    return docs


def _moved(snap: Snapshot) -> list[str]:
    return [e.pod.name for e in run_cycle(snap, CONSOLIDATION).evictions]


@pytest.mark.parametrize("owned", [False, True], ids=["bare", "owned"])
def test_the_embedded_cluster_moves_every_pod(owned: bool) -> None:
    assert _moved(snapshot_of(_docs(owned))) == ["mover-0"]


@pytest.mark.parametrize(("owned", "moved"), [(False, []), (True, ["mover-0"])], ids=["bare", "owned"])
def test_a_real_cluster_moves_only_pods_a_controller_makes_again(owned: bool, moved: list[str]) -> None:
    snap = snapshot_of(_docs(owned), bare_pods_return=False)
    assert snap.bare_pods_return is False
    assert _moved(snap) == moved


@pytest.mark.parametrize(("owned", "moves"), [(False, False), (True, True)], ids=["bare", "owned"])
def test_kai_explain_on_a_real_cluster_says_whether_consolidation_moves_it(owned: bool, moves: bool) -> None:
    snap = snapshot_of(_docs(owned), bare_pods_return=False)
    dry = dry_run(snap, CONSOLIDATION)
    note = evictable_by(dry, next(j for j in snap.jobs if j.name == "mover"))["consolidation"]
    assert note == (CONSOLIDATION_NOTE if moves else NOT_MOVED)


def _split_gang_docs(action: str, owned: bool) -> list[dict[str, Any]]:
    """A 2-pod preemptible gang on n0 (5 GPUs, 2 held by a pod that is not preemptible, 1 idle) and n1 (1 idle):
    a 2-GPU pod fits on n0 once the gang is evicted, and then the gang fits back only split, one pod at home and
    one on n1: a move. For preempt the 2-GPU pod is an inference pod of the gang's queue; for reclaim a pod of
    team-under (quota 4, nothing running), and the gang runs in team-over (quota 0), the rest in team-fixed,
    within its quota."""
    preempt = action == "preempt"
    fixed, over, under = ("team", "team", "team") if preempt else ("team-fixed", "team-over", "team-under")
    queues = [queue("team")] if preempt else [
        queue("dept"),
        queue("team-fixed", "dept", gpu=(5, -1, 0)),
        queue("team-under", "dept", gpu=(4, -1, 0)),
        queue("team-over", "dept", gpu=(0, -1, 0)),
    ]  # fmt: skip
    docs = [
        node("n0", gpu=5),
        node("n1", gpu=4),
        *queues,
        *job_docs("stays", fixed, 1, on="n0", gpu=2, priority_class="build"),
        *job_docs("busy", fixed, 1, on="n1", gpu=3, priority_class="build"),
        *job_docs("gang", over, 2, on="n0", gpu=1),
        *job_docs("wants", under, 1, gpu=2, priority_class="inference" if preempt else "train"),
    ]
    if owned:
        for d in docs:
            if d["metadata"]["name"].startswith("gang-"):
                d["metadata"]["ownerReferences"] = [OWNER]
    return docs


@pytest.mark.parametrize("action", ["preempt", "reclaim"])
@pytest.mark.parametrize(
    ("bare_pods_return", "owned", "evicted", "moved"),
    [
        (True, False, ["gang-1"], ["gang-1"]),  # kai sim: the evicted pod comes back, pipelined to n1
        (False, True, ["gang-1"], ["gang-1"]),  # a controller makes it again
        (False, False, ["gang-0", "gang-1"], []),  # nobody would: the gang is evicted whole, not split
    ],
    ids=["embedded", "owned", "bare"],
)
def test_a_victim_moves_only_if_it_comes_back(
    action: str, bare_pods_return: bool, owned: bool, evicted: list[str], moved: list[str]
) -> None:
    snap = snapshot_of(_split_gang_docs(action, owned), bare_pods_return=bare_pods_return)
    result = run_cycle(snap, SchedulerConf(actions=("allocate", action)))
    pipelined = sorted(p.pod.name for p in result.pipelines)
    assert "wants-0" in pipelined
    assert {e.action for e in result.evictions} == {action}
    assert sorted(e.pod.name for e in result.evictions) == evicted
    assert [n for n in pipelined if n.startswith("gang-")] == moved
