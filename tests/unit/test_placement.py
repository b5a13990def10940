"""The session's Placer stays equal to a Placer built from scratch, whatever Statements did in between.

The Placer keeps scores per (signature, request) and catches up lazily on the
Session's node log, row by row in Python or in one vectorized pass. Both paths
must give exactly the scores a fresh full scoring gives, after allocations,
pipelines, evictions and rollbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.scheduler import placement
from kai.scheduler.cycle import open_session
from kai.scheduler.model import ACTIVE_ALLOCATED, TaskInfo, TaskStatus
from kai.scheduler.placement import Placer
from kai.scheduler.session import Session, Statement
from tests.unit.test_statement import clusters, node, pod, podgroup, queue, session_from


def assert_placer_current(ssn: Session) -> None:
    fresh = Placer(ssn)
    for t in ssn.snap.tasks:
        if ssn.status[t.index] != TaskStatus.PENDING:
            continue
        kept = ssn.placer._candidates(t)
        new = fresh._candidates(t)
        assert np.array_equal(kept.score, new.score), t.name
        assert ssn.placer.best_node(t) == fresh.best_node(t), t.name


def _placed(ssn: Session) -> list[TaskInfo]:
    return [t for t in ssn.snap.tasks if ssn.status[t.index] in ACTIVE_ALLOCATED and ssn.node[t.index] >= 0]


def play_statement_ops(
    ssn: Session,
    stmt: Statement,
    data: st.DataObject,
    *,
    max_ops: int,
    victims: Callable[[Session], list[TaskInfo]],
    check: Callable[[bool], None],
) -> None:
    """Drive *stmt* through random steps: place a pending task where the Placer says (allocate when it
    fits now, else pipeline), evict one of *victims*, take a checkpoint, roll back to the last one.
    After each step ``check(last_fit_now)`` (False once any placement was pipelined)."""
    marks: list[int] = []
    all_now = True
    for _ in range(data.draw(st.integers(1, max_ops), label="n_ops")):
        op = data.draw(st.sampled_from(["place", "evict", "mark", "rollback"]), label="op")
        if op == "place":
            pending = [t for t in ssn.snap.tasks if ssn.status[t.index] == TaskStatus.PENDING]
            if pending:
                t = data.draw(st.sampled_from(pending), label="task")
                choice = ssn.placer.best_node(t)
                if choice is not None:
                    all_now &= choice.now
                    (stmt.allocate if choice.now else stmt.pipeline)(t, choice.node, choice.gpus)
        elif op == "evict":
            candidates = victims(ssn)
            if candidates:
                stmt.evict(data.draw(st.sampled_from(candidates), label="victim"))
        elif op == "mark":
            marks.append(stmt.checkpoint())
        elif marks:
            stmt.rollback(marks.pop())
        check(all_now)


@pytest.mark.parametrize("scalar_rows", [0, 10_000], ids=["vectorized-catch-up", "row-by-row-catch-up"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(docs=clusters(), data=st.data())
def test_placer_follows_statements(
    docs: list[dict[str, Any]], data: st.DataObject, scalar_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(placement, "_SCALAR_ROWS", scalar_rows)
    ssn = session_from(docs)
    assert_placer_current(ssn)  # fills the cache before any change
    stmt = ssn.statement()
    play_statement_ops(ssn, stmt, data, max_ops=10, victims=_placed, check=lambda now: assert_placer_current(ssn))
    stmt.rollback()
    assert_placer_current(ssn)


def test_binpack_fills_the_fullest_node_and_spread_the_emptiest() -> None:
    docs = [
        node("a", gpu=8),
        node("b", gpu=8),
        queue("root"),
        queue("team", "root"),
        podgroup("busy", "team"),
        pod("busy-0", "busy", gpu=5, node_name="b"),
        podgroup("new", "team"),
        pod("new-0", "new", gpu=1),
    ]
    ssn = session_from(docs)
    t = next(t for t in ssn.snap.tasks if t.name == "new-0")
    assert ssn.snap.nodes.names[ssn.placer.best_node(t)[0]] == "b"  # binpack: 3 free beats 8 free

    spread = open_session(ssn.snap, ssn.conf.with_placement(gpu="spread"))
    assert spread.snap.nodes.names[spread.placer.best_node(t)[0]] == "a"


@pytest.mark.parametrize("placement_gpu", ["binpack", "spread"])
def test_best_node_stays_current_as_fractions_fill_gpus(placement_gpu: str) -> None:
    """Fractions of three sizes placed one at a time on small nodes: groups fill up, nodes stop fitting now and
    the best node moves (the Placer keeps its best row through row rescoring only while that row did not lose
    ground); a rollback gives a node back what it had, so it may tie the best one on a lower row. After every
    placement and rollback, each pending pod's best node is a fresh Placer's."""
    docs: list[dict[str, Any]] = [node(f"n{i}", cpu="8", gpu=2) for i in range(3)]
    docs += [queue("root"), queue("team", "root")]
    for j, fraction in enumerate(["0.5", "0.3", "0.7"] * 5):
        docs.append(podgroup(f"f{j:02d}", "team"))
        doc = pod(f"f{j:02d}-0", f"f{j:02d}", cpu="500m", gpu=0)
        doc["metadata"]["annotations"]["gpu-fraction"] = fraction
        docs.append(doc)
    plain = session_from(docs)
    ssn = open_session(plain.snap, plain.conf.with_placement(gpu=placement_gpu))
    stmt = ssn.statement()
    placed = 0
    for t in ssn.snap.tasks:
        choice = ssn.placer.best_node(t)
        if choice is None:
            continue
        for keep in (False, True):  # placed, rolled back (its node regains what it had), placed again
            mark = stmt.checkpoint()
            (stmt.allocate if choice.now else stmt.pipeline)(t, choice.node, choice.gpus)
            assert_placer_current(ssn)
            if not keep:
                stmt.rollback(mark)
                assert_placer_current(ssn)
        placed += 1
    assert 0 < placed < len(ssn.snap.tasks)  # the GPUs ran out on the way: some nodes stopped fitting
    stmt.rollback()
    assert_placer_current(ssn)
