"""VictimsFirst (kai.scheduler.actions.victims_first): a victims-first simulation known to fail is skipped, and
the cycle decides exactly as the full simulation does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from kai.scheduler.actions.consolidation import Consolidation
from kai.scheduler.actions.solver import Budget, Scenario, Solver, SolveResult
from kai.scheduler.actions.victims_first import VictimsFirst
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_session
from kai.scheduler.session import Session
from kai.scheduler.victims import VictimUnit
from tests.unit.builders import job, job_docs, node, queue, session_of, snapshot_of, task
from tests.unit.test_policy_engine import conf_of, shard

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
def _answers(cls: type, method: str) -> Iterator[list[Any]]:
    """Every answer *cls*'s *method* gave while inside."""
    answers: list[Any] = []
    real = getattr(cls, method)

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        answers.append(real(self, *args, **kwargs))
        return answers[-1]

    with mock.patch.object(cls, method, spy):
        yield answers


def _counted() -> Any:
    """Every answer ``VictimsFirst.restores`` gave while inside."""
    return _answers(VictimsFirst, "restores")


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


@contextmanager
def _sets() -> Iterator[list[tuple[list[str], dict[str, int], bool]]]:
    """Every ``VictimsFirst.restores`` answer while inside: the victim pods, their nodes, the answer."""
    seen: list[tuple[list[str], dict[str, int], bool]] = []
    real = VictimsFirst.restores

    def spy(self: VictimsFirst, units: list[VictimUnit], home: dict) -> bool:
        answer = real(self, units, home)
        tasks = self._ssn.snap.tasks
        nodes = {tasks[t].name: n for t, (n, _) in home.items()}
        seen.append(([tasks[t].name for u in units for t in u.tasks], nodes, answer))
        return answer

    with mock.patch.object(VictimsFirst, "restores", spy):
        yield seen


def test_a_victim_its_node_no_longer_takes_is_simulated_in_full() -> None:
    """b8 runs on n1 with a node selector n1 no longer matches (a label removed after it started): evicted, it
    cannot come back, and a-small fits in the GPU it held. The set {b8} is not a known failure."""
    docs = _saturated()
    b8 = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "b8-0")
    b8["spec"]["nodeSelector"] = {"pool": "retired"}
    with _sets() as seen:
        decided, ssn = _decide(docs)
    full, full_ssn = _decide(docs, known=False)
    assert decided == full
    small = job(ssn.snap, "a-small").index
    assert ssn.notes.get(small) == full_ssn.notes.get(small)  # the same tries and reasons
    assert (["b8-0"], {"b8-0": 1}, False) in seen
    assert not any(answer for names, _, answer in seen if "b8-0" in names)
    assert [str(e[0]) for e in decided[2]] == ["default/b8-0"]  # reclaimed: a-small takes its GPU on n1


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


# --- consolidation's move cap (Solver._must_move) ---------------------------------------------------------------


def _crowded() -> list[dict[str, Any]]:
    """Two 8-GPU nodes: six single-GPU pods on n0 (2 GPUs free), four on n1 (4 free). A pending 6-GPU pod fits
    only where pods move away: 2 of them off n1 (onto n0), or 4 off n0 (onto n1)."""
    docs = [node("n0", gpu=8, cpu="32"), node("n1", gpu=8, cpu="32"), queue("team")]
    for k in range(10):
        docs += job_docs(f"small{k}", "team", 1, on="n0" if k < 6 else "n1", gpu=1)
    docs += job_docs("wide", "team", 1, gpu=6)
    return docs


def _consolidate(cap: int, *, bound: bool = True) -> tuple[tuple, Session, list[int]]:
    """The cycle's decisions with consolidation's cap *cap*, the Session, and every bound ``_must_move`` gave
    (with *bound* False, every simulation puts its victims back in full)."""
    conf = SchedulerConf(actions=("allocate", "consolidation"), max_consolidation_preemptees=cap)
    with _answers(Solver, "_must_move") as bounds:
        if bound:
            ssn, result = run_session(snapshot_of(_crowded()), conf)
        else:  # no cap for the solver: every pass runs in full, and only the validator counts moves
            with mock.patch.object(Consolidation, "move_cap", lambda self, ssn: -1):
                ssn, result = run_session(snapshot_of(_crowded()), conf)
    decisions = (sorted((p.pod, p.node) for p in result.pipelines), sorted(e.pod for e in result.evictions))
    return decisions, ssn, bounds


def test_a_consolidation_that_must_move_more_than_the_cap_stops_before_putting_victims_back() -> None:
    decided, ssn, bounds = _consolidate(1)
    full, full_ssn, _ = _consolidate(1, bound=False)
    assert bounds and min(bounds) == 2  # at best 2 pods leave n1, more than the cap of 1
    assert decided == full == ([], [])
    wide = job(ssn.snap, "wide").index
    assert any("it would move at least 2 pods, more than max-consolidation-preemptees 1" in n for n in ssn.notes[wide])
    assert any("it would move 2 pods" in n for n in full_ssn.notes[wide])  # the full simulation counts them


def test_the_bound_never_rejects_a_scenario_the_cap_allows() -> None:
    decided, _, bounds = _consolidate(2)
    assert min(bounds) == 2
    assert decided == _consolidate(2, bound=False)[0]
    assert len(decided[1]) == 2  # two pods moved off n1 to n0, and wide waits there for them


def _four_nodes() -> list[dict[str, Any]]:
    """A pending gang of two 4-GPU pods (created first), and four 8-GPU nodes with six single-GPU pods each."""
    docs = [*(node(f"n{i}", gpu=8, cpu="32") for i in range(4)), queue("team")]
    docs += job_docs("gang", "team", 2, gpu=4)
    for i in range(4):
        for k in range(6):
            docs += job_docs(f"s{i}{k}", "team", 1, on=f"n{i}", gpu=1)
    return docs


def _try_set(cap: int) -> tuple[Scenario | None, list[int]]:
    """One consolidation simulation of the gang with two victims on each node:
    the scenario, and the pods each put-back pass moved."""
    ssn = session_of(_four_nodes())
    gang = job(ssn.snap, "gang")
    units = [
        VictimUnit(job(ssn.snap, f"s{i}{k}").index, (task(ssn.snap, f"s{i}{k}-0").index,), True)
        for i, k in ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1))
    ]
    solver = Solver(ssn, validator=Consolidation().validate, all_must_move=True, budget=Budget(9, 9), move_cap=cap)
    result = SolveResult(None)
    with _answers(Solver, "_put_back") as answers:
        solver._free0 = ssn.idle + ssn.releasing
        solver._try(gang, ssn.pending_tasks(gang), units, result)
    return result.scenario, [len(moved) for _, moved in answers]


def test_a_put_back_pass_over_the_cap_stops_and_the_other_pass_decides() -> None:
    """Pass one packs the victims of n2 and n3 onto other nodes too: over the cap of 4, it stops at the fifth
    move. Pass two keeps them home and moves four pods, which the cap allows: the same scenario as with
    no cap on the solver (the validator alone counting the moves)."""
    capped, passes = _try_set(4)
    assert passes == [5, 4]  # pass one stopped at its fifth move
    full, full_passes = _try_set(-1)
    assert full_passes[0] > 5  # in full, pass one moves more
    assert capped is not None and full is not None
    assert capped.moved == full.moved and len(capped.moved) == 4


def test_no_shortcut_under_a_gpu_policy_whose_draws_follow_every_placement() -> None:
    """The random GPU policy draws from its generator at each placement: a skipped placement would change the
    draws after it, so neither shortcut applies under a node_choice plugin."""
    conf = conf_of(shard("random"))
    ssn = session_of(_saturated(), conf)
    assert ssn.hooks.has_node_choice
    small = job(ssn.snap, "a-small")
    assert VictimsFirst.of(ssn, small, ssn.pending_tasks(small), ssn.idle + ssn.releasing) is None
    solver = Solver(ssn, validator=Consolidation().validate, all_must_move=True, budget=Budget(1, 1), move_cap=16)
    assert solver.move_cap == -1
