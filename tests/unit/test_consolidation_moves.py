"""Consolidation moves only pods that come back (kai.scheduler.actions.consolidation).

A move evicts the pod and waits for its controller to make it again. On a real cluster a pod that no
controller owns is gone once evicted, so there (``bare_pods_return=False``) consolidation leaves such pods
where they are; the embedded cluster makes them again, so ``kai sim`` moves them as KAI does. The CI chaos
suite found the case: a gang of bare pods lost one member to a move and stayed bound in part for good.
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
