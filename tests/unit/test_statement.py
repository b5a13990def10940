"""Statement: every change to a Session is undone exactly by ``rollback``.

Sessions are built from the real embedded cluster (manifests -> EmbeddedCluster -> Snapshot -> Session),
never mocked, so the tests cover the accounting the actions rely on: node idle/releasing arrays, task
status and node, per-job allocated counts and per-queue allocated / allocated_non_preemptible vectors
(propagated to ancestors).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.manifests import load_manifests
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session
from kai.scheduler.model import ACTIVE_ALLOCATED, CPU, GPU, MILLI, QRES_COLUMNS, TaskInfo, TaskStatus
from kai.scheduler.session import Session
from kai.sim.cluster import EmbeddedCluster
from tests.unit import builders as B

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
RUNNING_SINCE = "2025-12-31T23:00:00Z"
DELETED_AT = "2025-12-31T23:59:30Z"


# ---------------------------------------------------------------------------------------------
# Building sessions from manifests
# ---------------------------------------------------------------------------------------------


def node(name: str, cpu: str = "8", gpu: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "nvidia.com/gpu": str(gpu)}},
    }


def queue(name: str, parent: str | None = None) -> dict[str, Any]:
    res = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"gpu": dict(res), "cpu": dict(res), "memory": dict(res)}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def podgroup(name: str, queue_name: str, min_member: int = 1, priority_class: str = "train") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": queue_name, "priorityClassName": priority_class},
    }


def pod(
    name: str,
    group: str,
    *,
    cpu: str = "1",
    gpu: int = 1,
    node_name: str | None = None,
    releasing: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": {"pod-group-name": group}}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi", "nvidia.com/gpu": gpu}}}]
    }
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if node_name is not None:
        spec["nodeName"] = node_name
        doc["status"] = {"phase": "Running", "startTime": RUNNING_SINCE}
        if releasing:
            meta["deletionTimestamp"] = DELETED_AT  # terminating, not yet StuckInReleasing (2m)
    return doc


def session_from(docs: list[dict[str, Any]]) -> Session:
    text = yaml.safe_dump_all(docs, sort_keys=False)
    objects, _ = load_manifests([("cluster.yaml", text)])
    cluster = EmbeddedCluster(now=NOW)
    cluster.apply(objects)
    return open_session(cluster.snapshot(), SchedulerConf())


def base_docs() -> list[dict[str, Any]]:
    return [
        node("node0"),
        node("node1"),
        queue("dept"),
        queue("team-a", "dept"),
        queue("team-b", "dept"),
        # non-preemptible (build = 100) job running on both nodes
        podgroup("steady", "team-a", min_member=2, priority_class="build"),
        pod("steady-0", "steady", node_name="node0"),
        pod("steady-1", "steady", node_name="node1"),
        # a preemptible job already terminating on node1
        podgroup("leaving", "team-b"),
        pod("leaving-0", "leaving", gpu=2, cpu="2", node_name="node1", releasing=True),
        # a pending gang of three
        podgroup("gang", "team-b", min_member=3),
        pod("gang-0", "gang"),
        pod("gang-1", "gang"),
        pod("gang-2", "gang", gpu=2),
        # a pending non-preemptible job
        podgroup("solo", "team-a", priority_class="inference"),
        pod("solo-0", "solo", cpu="500m", gpu=1),
    ]


@pytest.fixture
def ssn() -> Session:
    return session_from(base_docs())


def task(ssn: Session, name: str) -> TaskInfo:
    return next(t for t in ssn.snap.tasks if t.name == name)


def row(ssn: Session, node_name: str) -> int:
    return ssn.snap.nodes.names.index(node_name)


def qidx(ssn: Session, name: str) -> int:
    return ssn.snap.queue_index[name]


def capture(ssn: Session) -> dict[str, Any]:
    return {
        "idle": ssn.idle.copy(),
        "releasing": ssn.releasing.copy(),
        "status": list(ssn.status),
        "node": list(ssn.node),
        "job_allocated": list(ssn.job_allocated),
        "allocated": ssn.queues.allocated.copy(),
        "allocated_non_preemptible": ssn.queues.allocated_non_preemptible.copy(),
        "requested": ssn.queues.requested.copy(),
    }


def assert_same(ssn: Session, before: dict[str, Any]) -> None:
    after = capture(ssn)
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            assert after[key].dtype == value.dtype, key
            assert np.array_equal(after[key], value), f"{key} differs:\n{after[key]}\n!=\n{value}"
        else:
            assert after[key] == value, f"{key} differs"


# ---------------------------------------------------------------------------------------------
# The fixture is what the tests think it is
# ---------------------------------------------------------------------------------------------


def test_fixture_state(ssn: Session) -> None:
    assert ssn.status[task(ssn, "steady-0").index] == TaskStatus.RUNNING
    assert ssn.status[task(ssn, "leaving-0").index] == TaskStatus.RELEASING
    assert ssn.status[task(ssn, "gang-0").index] == TaskStatus.PENDING
    n1 = row(ssn, "node1")
    assert ssn.releasing[n1][GPU] == 2 * MILLI
    assert ssn.releasing[row(ssn, "node0")].sum() == 0
    a = qidx(ssn, "team-a")
    assert ssn.queues.allocated[a][0] == 2 * MILLI  # QRES column 0 is GPU
    assert ssn.queues.allocated_non_preemptible[a][0] == 2 * MILLI
    assert ssn.queues.allocated[qidx(ssn, "dept")][0] == 2 * MILLI


# ---------------------------------------------------------------------------------------------
# Each operation, then rollback
# ---------------------------------------------------------------------------------------------


def test_allocate_changes_then_rollback_restores(ssn: Session) -> None:
    before = capture(ssn)
    t = task(ssn, "gang-2")
    n0 = row(ssn, "node0")
    stmt = ssn.statement()
    stmt.allocate(t, n0)

    assert ssn.status[t.index] == TaskStatus.ALLOCATED
    assert ssn.node[t.index] == n0
    assert np.array_equal(ssn.idle[n0], before["idle"][n0] - t.request)
    assert ssn.job_allocated[t.job] == before["job_allocated"][t.job] + 1
    for q in ("team-b", "dept"):
        assert np.array_equal(
            ssn.queues.allocated[qidx(ssn, q)], before["allocated"][qidx(ssn, q)] + t.request[QRES_COLUMNS]
        )
    # gang is preemptible (train): the non-preemptible accounting does not move
    assert np.array_equal(ssn.queues.allocated_non_preemptible, before["allocated_non_preemptible"])
    assert stmt.tasks_touched == [t.index]

    stmt.rollback()
    assert_same(ssn, before)
    assert stmt.tasks_touched == []


def test_allocate_non_preemptible_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    t = task(ssn, "solo-0")
    stmt = ssn.statement()
    stmt.allocate(t, row(ssn, "node1"))
    a = qidx(ssn, "team-a")
    assert np.array_equal(
        ssn.queues.allocated_non_preemptible[a], before["allocated_non_preemptible"][a] + t.request[QRES_COLUMNS]
    )
    stmt.rollback()
    assert_same(ssn, before)


def test_pipeline_takes_releasing_first_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    t = task(ssn, "gang-2")  # 2 GPUs, 1 cpu; node1 releases 2 GPUs and 2 cpus
    n1 = row(ssn, "node1")
    stmt = ssn.statement()
    stmt.pipeline(t, n1)

    assert ssn.status[t.index] == TaskStatus.PIPELINED
    assert ssn.node[t.index] == n1
    assert ssn.releasing[n1][GPU] == 0
    assert ssn.releasing[n1][CPU] == before["releasing"][n1][CPU] - t.request[CPU]
    assert ssn.idle[n1][GPU] == before["idle"][n1][GPU]  # all of it came from releasing
    assert ssn.job_allocated[t.job] == before["job_allocated"][t.job] + 1

    stmt.rollback()
    assert_same(ssn, before)


def test_pipeline_beyond_releasing_takes_idle_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    n1 = row(ssn, "node1")
    stmt = ssn.statement()
    stmt.pipeline(task(ssn, "gang-2"), n1)  # uses the 2 releasing GPUs
    stmt.pipeline(task(ssn, "gang-0"), n1)  # 1 GPU: nothing left releasing, so from idle
    assert ssn.releasing[n1][GPU] == 0
    assert ssn.idle[n1][GPU] == before["idle"][n1][GPU] - MILLI
    stmt.rollback()
    assert_same(ssn, before)


def test_pipeline_on_node_without_releasing_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    stmt = ssn.statement()
    stmt.pipeline(task(ssn, "gang-0"), row(ssn, "node0"))
    stmt.rollback()
    assert_same(ssn, before)


def test_evicting_a_pod_on_a_node_the_snapshot_lacks_changes_only_its_status() -> None:
    """A Running pod bound to a node kai has not listed (deleted, or a typo in hand-written input) holds nothing
    on kai's nodes: evicting it (a stale gang's pods all go) touches no node row, and its undo neither."""
    docs = [B.node("n0", gpu=2), B.queue("team-a"), *B.job_docs("lost", "team-a", 2, on=["n0", "gone"])]
    ssn = B.session_of(docs)
    before = capture(ssn)
    lost = next(t for t in ssn.snap.tasks if t.name == "lost-1")
    assert ssn.node[lost.index] == -1 and ssn.status[lost.index] == TaskStatus.RUNNING
    stmt = ssn.statement()
    stmt.evict(lost)
    assert ssn.status[lost.index] == TaskStatus.RELEASING
    assert np.array_equal(ssn.releasing, before["releasing"]) and np.array_equal(ssn.idle, before["idle"])
    assert -1 not in ssn.node_log
    stmt.rollback()
    assert_same(ssn, before)
    assert -1 not in ssn.node_log


def test_evict_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    t = task(ssn, "steady-0")
    n0 = row(ssn, "node0")
    stmt = ssn.statement()
    stmt.evict(t)

    assert ssn.status[t.index] == TaskStatus.RELEASING
    assert ssn.node[t.index] == n0
    assert np.array_equal(ssn.releasing[n0], before["releasing"][n0] + t.request)
    assert np.array_equal(ssn.idle, before["idle"])
    assert ssn.job_allocated[t.job] == before["job_allocated"][t.job] - 1
    a = qidx(ssn, "team-a")
    assert np.array_equal(ssn.queues.allocated[a], before["allocated"][a] - t.request[QRES_COLUMNS])
    assert np.array_equal(
        ssn.queues.allocated_non_preemptible[a], before["allocated_non_preemptible"][a] - t.request[QRES_COLUMNS]
    )

    stmt.rollback()
    assert_same(ssn, before)


def test_convert_to_pipelined_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    t = task(ssn, "gang-0")
    stmt = ssn.statement()
    stmt.allocate(t, row(ssn, "node0"))
    after_allocate = capture(ssn)
    stmt.convert_to_pipelined(t)
    assert ssn.status[t.index] == TaskStatus.PIPELINED
    # a status change only: resources and accounting stay as allocated
    for key in ("idle", "releasing", "job_allocated", "allocated", "allocated_non_preemptible", "node"):
        a, b = capture(ssn)[key], after_allocate[key]
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, key
    stmt.rollback()
    assert_same(ssn, before)


def test_mixed_sequence_then_rollback(ssn: Session) -> None:
    before = capture(ssn)
    n0, n1 = row(ssn, "node0"), row(ssn, "node1")
    stmt = ssn.statement()
    stmt.evict(task(ssn, "steady-1"))
    stmt.pipeline(task(ssn, "gang-2"), n1)
    stmt.allocate(task(ssn, "gang-0"), n0)
    stmt.allocate(task(ssn, "gang-1"), n0)
    stmt.convert_to_pipelined(task(ssn, "gang-0"))
    stmt.convert_to_pipelined(task(ssn, "gang-1"))
    stmt.allocate(task(ssn, "solo-0"), n1)
    stmt.evict(task(ssn, "solo-0"))  # evicting what this statement allocated
    stmt.rollback()
    assert_same(ssn, before)


def test_checkpoint_and_partial_rollback(ssn: Session) -> None:
    before = capture(ssn)
    n0, n1 = row(ssn, "node0"), row(ssn, "node1")
    stmt = ssn.statement()
    assert stmt.checkpoint() == 0
    stmt.allocate(task(ssn, "gang-0"), n0)
    stmt.evict(task(ssn, "steady-0"))
    cp = stmt.checkpoint()
    assert cp == 2
    middle = capture(ssn)

    stmt.pipeline(task(ssn, "gang-2"), n1)
    stmt.allocate(task(ssn, "gang-1"), n0)
    stmt.convert_to_pipelined(task(ssn, "gang-1"))
    stmt.evict(task(ssn, "steady-1"))

    stmt.rollback(cp)
    assert_same(ssn, middle)
    assert stmt.checkpoint() == cp
    assert stmt.tasks_touched == [task(ssn, "gang-0").index, task(ssn, "steady-0").index]

    # rolling back to the same checkpoint again is a no-op
    stmt.rollback(cp)
    assert_same(ssn, middle)

    stmt.rollback()
    assert_same(ssn, before)


def test_nested_checkpoints(ssn: Session) -> None:
    n0 = row(ssn, "node0")
    stmt = ssn.statement()
    states, cps = [capture(ssn)], [stmt.checkpoint()]
    for name in ("gang-0", "gang-1", "gang-2", "solo-0"):
        stmt.allocate(task(ssn, name), n0)
        states.append(capture(ssn))
        cps.append(stmt.checkpoint())
    for cp, state in reversed(list(zip(cps, states))):
        stmt.rollback(cp)
        assert_same(ssn, state)


def test_commit_keeps_changes(ssn: Session) -> None:
    t = task(ssn, "gang-0")
    stmt = ssn.statement()
    stmt.allocate(t, row(ssn, "node0"))
    after = capture(ssn)
    stmt.commit()
    assert stmt.tasks_touched == []
    stmt.rollback()  # nothing left to undo
    assert_same(ssn, after)
    assert ssn.status[t.index] == TaskStatus.ALLOCATED


def test_two_statements_one_after_another(ssn: Session) -> None:
    before = capture(ssn)
    first = ssn.statement()
    first.allocate(task(ssn, "gang-0"), row(ssn, "node0"))
    first.commit()
    committed = capture(ssn)
    second = ssn.statement()
    second.allocate(task(ssn, "gang-1"), row(ssn, "node1"))
    second.evict(task(ssn, "gang-0"))
    second.rollback()
    assert_same(ssn, committed)
    assert not np.array_equal(committed["idle"], before["idle"])


# ---------------------------------------------------------------------------------------------
# Property: any sequence of operations on any small cluster rolls back exactly
# ---------------------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    n_nodes = draw(st.integers(1, 3))
    names = [f"n{i}" for i in range(n_nodes)]
    docs: list[dict[str, Any]] = [
        node(n, cpu=draw(st.sampled_from(["2", "4", "8", "1500m"])), gpu=draw(st.integers(0, 4))) for n in names
    ]
    n_leaves = draw(st.integers(1, 3))
    docs.append(queue("root"))
    leaves = [f"q{i}" for i in range(n_leaves)]
    docs.extend(queue(q, "root") for q in leaves)
    for j in range(draw(st.integers(1, 4))):
        n_pods = draw(st.integers(1, 4))
        group = f"job{j}"
        docs.append(
            podgroup(
                group,
                draw(st.sampled_from(leaves)),
                min_member=draw(st.integers(1, n_pods)),
                priority_class=draw(st.sampled_from(["train", "build-preemptible", "build", "inference"])),
            )
        )
        for k in range(n_pods):
            state = draw(st.sampled_from(["pending", "running", "releasing"]))
            docs.append(
                pod(
                    f"{group}-{k}",
                    group,
                    cpu=draw(st.sampled_from(["100m", "500m", "1", "2"])),
                    gpu=draw(st.integers(0, 2)),
                    node_name=None if state == "pending" else draw(st.sampled_from(names)),
                    releasing=state == "releasing",
                )
            )
    return docs


def assert_accounting_consistent(ssn: Session) -> None:
    """job_allocated and queue allocated vectors agree with the task statuses (recomputed from scratch)."""
    alloc = np.zeros_like(ssn.queues.allocated)
    alloc_np = np.zeros_like(ssn.queues.allocated_non_preemptible)
    for job in ssn.snap.jobs:
        active = [i for i in job.tasks if ssn.status[i] in ACTIVE_ALLOCATED]
        assert ssn.job_allocated[job.index] == len(active)
        if job.queue < 0:
            continue
        for i in active:
            for a in ssn.queues.ancestors[job.queue]:
                alloc[a] += ssn.snap.tasks[i].request[QRES_COLUMNS]
                if not job.preemptible:
                    alloc_np[a] += ssn.snap.tasks[i].request[QRES_COLUMNS]
    assert np.array_equal(ssn.queues.allocated, alloc)
    assert np.array_equal(ssn.queues.allocated_non_preemptible, alloc_np)


OPS = ("allocate", "pipeline", "evict", "convert", "checkpoint")


def _eligible(ssn: Session, op: str) -> list[int]:
    if op in ("allocate", "pipeline"):
        return [i for i, s in enumerate(ssn.status) if s == TaskStatus.PENDING]
    if op == "evict":
        return [i for i, s in enumerate(ssn.status) if s in ACTIVE_ALLOCATED and ssn.node[i] >= 0]
    if op == "convert":
        return [i for i, s in enumerate(ssn.status) if s == TaskStatus.ALLOCATED]
    return []


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=clusters(), data=st.data())
def test_rollback_restores_everything(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    ssn = session_from(docs)
    assert_accounting_consistent(ssn)
    before = capture(ssn)
    stmt = ssn.statement()
    checkpoint: tuple[int, dict[str, Any]] | None = None
    for _ in range(data.draw(st.integers(0, 12), label="n_ops")):
        op = data.draw(st.sampled_from(OPS), label="op")
        if op == "checkpoint":
            checkpoint = (stmt.checkpoint(), capture(ssn))
            continue
        eligible = _eligible(ssn, op)
        if not eligible:
            continue
        t = ssn.snap.tasks[data.draw(st.sampled_from(eligible), label="task")]
        if op in ("allocate", "pipeline"):
            n = data.draw(st.integers(0, ssn.snap.nodes.n - 1), label="node")
            getattr(stmt, op)(t, n)
        elif op == "evict":
            stmt.evict(t)
        else:
            stmt.convert_to_pipelined(t)
        assert_accounting_consistent(ssn)
    if checkpoint is not None:
        stmt.rollback(checkpoint[0])
        assert_same(ssn, checkpoint[1])
    stmt.rollback()
    assert_same(ssn, before)
