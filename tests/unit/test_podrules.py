"""kai's pod rules (kai.scheduler.podrules) against an independent reference (tests/podrules_reference.py),
through random Statement sequences: placements, pipelining, evictions and rollbacks.

After every step, for every pending task, the masks of its rules (kept current row by row as pods move) must
equal what the reference computes from scratch over the Session's state: with only the pods that stay
(``mask``: where the task may be pipelined) and with the terminating ones too (``now_mask``: where it may be
placed now; for required positive affinity kai counts only pods that stay, a documented difference). The
Placer's rule-applied answers must equal a fresh Placer's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session
from kai.scheduler.model import ACTIVE_ALLOCATED, TaskInfo, TaskStatus
from kai.scheduler.placement import Placer
from kai.scheduler.session import Session
from tests.podrules_reference import RNode, RPod, World, inter_pod_affinity_ok, ports_ok, spread_ok
from tests.unit.test_isolation import cluster
from tests.unit.test_placement import play_statement_ops
from tests.unit.test_statement import podgroup, queue

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def _node(i: int) -> dict[str, Any]:
    name = f"n{i}"
    labels = {HOST: name, ZONE: f"z{i % 2}"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "64Gi"}}}  # fmt: skip


@st.composite
def rule_pods(draw: st.DrawFn, name: str, group: str, node: str | None) -> dict[str, Any]:
    app = draw(st.sampled_from(["a", "b"]))
    key = draw(st.sampled_from([HOST, ZONE]))
    other = draw(st.sampled_from(["a", "b"]))
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }
    kind = draw(st.sampled_from(["none", "anti", "affinity", "spread", "soft", "ports", "preferred"]))
    term = {"labelSelector": {"matchLabels": {"app": other}}, "topologyKey": key}
    if kind == "anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind == "affinity":
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind in ("spread", "soft"):
        when = "DoNotSchedule" if kind == "spread" else "ScheduleAnyway"
        spec["topologySpreadConstraints"] = [
            {"maxSkew": draw(st.integers(1, 2)), "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": other}}}
        ]  # fmt: skip
    elif kind == "ports":
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from([8080, 9090]))}]
    elif kind == "preferred":
        weighted = {"weight": draw(st.integers(1, 100)), "podAffinityTerm": term}
        spec["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}}
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": {"pod-group-name": group}},
        "spec": spec,
    }
    if node is not None:
        spec["nodeName"] = node
        doc["status"] = {"phase": "Running", "startTime": "2025-12-31T00:00:00Z"}
    return doc


@st.composite
def worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    n_nodes = draw(st.integers(2, 5))
    docs = [_node(i) for i in range(n_nodes)] + [queue("root"), queue("team", "root")]
    for i in range(draw(st.integers(0, 5))):
        docs.append(podgroup(f"run-{i}", "team"))
        docs.append(draw(rule_pods(f"run-{i}-0", f"run-{i}", f"n{draw(st.integers(0, n_nodes - 1))}")))
    for i in range(draw(st.integers(1, 6))):
        docs.append(podgroup(f"new-{i}", "team"))
        docs.append(draw(rule_pods(f"new-{i}-0", f"new-{i}", None)))
    return docs


def _world(ssn: Session, with_releasing: bool) -> World:
    nodes = ssn.snap.nodes
    placed = []
    for t in ssn.snap.tasks:
        node, status = ssn.node[t.index], ssn.status[t.index]
        if node < 0:
            continue
        if status in ACTIVE_ALLOCATED or (with_releasing and status == TaskStatus.RELEASING):
            placed.append(RPod(t.pod, nodes.names[node], status == TaskStatus.RELEASING))
    rnodes = [RNode(name, dict(labels)) for name, labels in zip(nodes.names, nodes.labels, strict=True)]
    return World(rnodes, placed)


def _reference(world: World, task: TaskInfo) -> np.ndarray:
    pod = task.pod
    return np.array(
        [
            inter_pod_affinity_ok(world, n, pod) and spread_ok(world, n, pod) and ports_ok(world, n, pod)
            for n in world.nodes
        ]
    )


def _check_rules(ssn: Session) -> None:
    later_world, now_world = _world(ssn, False), _world(ssn, True)
    for t in ssn.snap.tasks:
        if ssn.status[t.index] != TaskStatus.PENDING:
            continue
        rules = ssn.hooks.node_rules(ssn, t)
        mask = rules.mask()
        kai_later = np.ones(ssn.snap.nodes.n, dtype=bool) if mask is None else mask
        assert np.array_equal(kai_later, _reference(later_world, t)), (t.name, kai_later, _reference(later_world, t))
        aff = t.pod.pod_affinity
        if aff is None or not aff.required:  # kai counts only pods that stay for a required affinity
            now = rules.now_mask()
            kai_now = kai_later if now is None else kai_later & now
            assert np.array_equal(kai_now, _reference(now_world, t)), (t.name, kai_now, _reference(now_world, t))
        assert ssn.placer.best_node(t) == Placer(ssn).best_node(t), t.name


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(docs=worlds(), data=st.data())
def test_rules_follow_the_session_and_equal_the_reference(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    ssn = open_session(cluster(docs).snapshot(), SchedulerConf())
    _check_rules(ssn)
    stmt = ssn.statement()

    def victims(s: Session) -> list[TaskInfo]:
        return [t for t in s.snap.tasks if s.status[t.index] == TaskStatus.RUNNING]

    play_statement_ops(ssn, stmt, data, max_ops=12, victims=victims, check=lambda _: _check_rules(ssn))
    stmt.rollback()
    _check_rules(ssn)
