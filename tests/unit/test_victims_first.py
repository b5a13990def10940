"""VictimsFirst (kai.scheduler.actions.victims_first): a victims-first simulation known to fail is skipped, and
the cycle decides exactly as the full simulation does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from kai.scheduler.actions.victims_first import VictimsFirst
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_session
from kai.scheduler.session import Session
from tests.unit.builders import job, job_docs, node, queue, session_of, snapshot_of

TEAMS = [queue("dept"), queue("team-a", "dept", gpu=(8, -1, 1)), queue("team-b", "dept", gpu=(8, -1, 1))]


def _saturated(spare_node: bool = False) -> list[dict[str, Any]]:
    """Two full 8-GPU nodes. team-a runs 7 GPUs and waits with an older 4-GPU job and a 1-GPU one (4 CPUs);
    team-b, over its fair share, runs 9 single-GPU jobs (one beside team-a on n1). Evicting any of them puts
    team-b ahead of team-a ranked with its older 4-GPU job, so team-b's victim is re-allocated first and takes
    its GPU back. *spare_node*: a third node with a free GPU and 2 CPUs: room for a victim, not for a-small."""
    docs = [node("n0", gpu=8, cpu="32"), node("n1", gpu=8, cpu="32"), *TEAMS]
    if spare_node:
        docs.append(node("n2", gpu=1, cpu="2"))
    docs += job_docs("a-running", "team-a", 7, on="n1", gpu=1)
    for k in range(8):
        docs += job_docs(f"b{k}", "team-b", 1, on="n0", gpu=1)
    docs += job_docs("b8", "team-b", 1, on="n1", gpu=1)
    docs += job_docs("a-big", "team-a", 1, gpu=4)
    docs += job_docs("a-small", "team-a", 1, gpu=1, cpu="4")
    return docs


@contextmanager
def _counted() -> Iterator[list[bool]]:
    """Every answer ``VictimsFirst.restores`` gave while inside."""
    answers: list[bool] = []
    real = VictimsFirst.restores

    def spy(self: VictimsFirst, *args: Any) -> bool:
        answers.append(real(self, *args))
        return answers[-1]

    with mock.patch.object(VictimsFirst, "restores", spy):
        yield answers


def _decide(docs: list[dict[str, Any]], *, known: bool = True) -> tuple[tuple, Session]:
    conf = SchedulerConf()
    snap = snapshot_of(docs)
    if known:
        ssn, result = run_session(snap, conf)
    else:
        with mock.patch.object(VictimsFirst, "of", classmethod(lambda cls, *a: None)):
            ssn, result = run_session(snap, conf)
    decisions = (
        sorted((b.pod, b.node) for b in result.binds),
        sorted((p.pod, p.node) for p in result.pipelines),
        sorted((e.pod, e.action, e.reason) for e in result.evictions),
    )
    return decisions, ssn


def test_a_simulation_whose_victims_all_go_home_first_is_known_to_fail_and_decides_the_same() -> None:
    docs = _saturated()
    with _counted() as answers:
        decided, ssn = _decide(docs)
    full, full_ssn = _decide(docs, known=False)
    assert any(answers), "no simulation was known to fail: the scenario no longer exercises the check"
    assert decided == full
    assert decided[2] == []  # nothing evicted: every victim took its GPU back
    small = job(ssn.snap, "a-small").index
    assert ssn.notes[small] == full_ssn.notes[small]  # the same tries and reasons, counted the same
    assert any("victim sets tried" in n for n in ssn.notes[small]), ssn.notes[small]


def test_a_victim_that_could_go_elsewhere_is_simulated_in_full() -> None:
    """With room for one single-GPU pod on n2, a victim need not go back home: no shortcut, same decisions."""
    docs = _saturated(spare_node=True)
    with _counted() as answers:
        decided, _ = _decide(docs)
    assert answers and not any(answers)
    assert decided == _decide(docs, known=False)[0]


def _check_of(docs: list[dict[str, Any]], any_groups: bool = False) -> VictimsFirst | None:
    """``VictimsFirst.of`` for a-small's search, on the Session before any action ran."""
    ssn = session_of(docs)
    ssn.any_groups = any_groups
    small = job(ssn.snap, "a-small")
    return VictimsFirst.of(ssn, small, ssn.pending_tasks(small), ssn.idle + ssn.releasing)


def test_no_check_where_the_preemptor_fits_now_or_gpus_are_shared() -> None:
    assert _check_of(_saturated()) is not None
    # a GPU group exists: a shared victim's GPUs are chosen anew, the node rows do not tell where it goes
    assert _check_of(_saturated(), any_groups=True) is None
    assert _check_of([*_saturated(), node("n3", gpu=1)]) is None  # a-small fits n3 without any eviction
