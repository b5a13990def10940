"""Evictions on random clusters: no ping-pong, no eviction without a beneficiary, same input same output.

Clusters are random mixes of nodes, two or three team queues under a department
(with random quotas and weights), running jobs of random priorities and sizes,
and pending jobs. They run on the real embedded cluster with all five actions.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import CycleResult
from kai.sim.cluster import EmbeddedCluster
from tests.property.manifests import NOW, PRIORITIES, queue_doc

STARTED = "2025-12-31T23:00:00Z"


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    n_nodes = draw(st.integers(1, 4))
    gpus = [draw(st.sampled_from([1, 2, 4, 8])) for _ in range(n_nodes)]
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"node{i}"},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(g)}},
        }
        for i, g in enumerate(gpus)
    ]
    docs.append(queue_doc("dept", None, -1, 1))
    teams = [f"team-{c}" for c in "abc"[: draw(st.integers(2, 3))]]
    for t in teams:
        docs.append(queue_doc(t, "dept", draw(st.integers(0, 4)), draw(st.integers(0, 3))))
    free = list(gpus)
    for j in range(draw(st.integers(1, 7))):
        running = draw(st.booleans())
        size = draw(st.integers(1, 3))
        per_pod = draw(st.integers(1, 2))
        min_member = draw(st.integers(1, size))
        name = f"job{j}"
        docs.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": name, "creationTimestamp": f"2025-12-31T20:{j:02d}:00Z"},
                "spec": {
                    "minMember": min_member,
                    "queue": draw(st.sampled_from(teams)),
                    "priorityClassName": draw(st.sampled_from(PRIORITIES)),
                },
            }
        )
        for k in range(size):
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{k}", "annotations": {"pod-group-name": name}},
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": per_pod}}}],
                },
            }
            if running:
                spots = [i for i, f in enumerate(free) if f >= per_pod]
                if spots:
                    i = draw(st.sampled_from(spots))
                    free[i] -= per_pod
                    pod["spec"]["nodeName"] = f"node{i}"
                    pod["status"] = {"phase": "Running", "startTime": STARTED}
            docs.append(pod)
    return docs


def _cluster(docs: list[dict[str, Any]]) -> EmbeddedCluster:
    objects, _ = load_manifests([("cluster.yaml", yaml.safe_dump_all(docs, sort_keys=False))])
    now = parse_time(NOW, "now")
    assert now is not None
    cluster = EmbeddedCluster(now=now)
    cluster.apply(objects)
    return cluster


def _decisions(result: CycleResult) -> tuple:
    return (
        sorted((str(b.pod), b.node) for b in result.binds),
        sorted((str(p.pod), p.node) for p in result.pipelines),
        sorted((str(e.pod), e.action, e.reason) for e in result.evictions),
    )


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CYCLES = 12


@SETTINGS
@given(docs=clusters())
def test_cycles_reach_a_fixed_point(docs: list[dict[str, Any]]) -> None:
    """With no arrivals, a few cycles settle: the last cycles neither bind, pipeline nor evict."""
    cluster = _cluster(docs)
    conf = SchedulerConf()
    history = [_decisions(cluster.run_cycle(conf)) for _ in range(CYCLES)]
    quiet = ([], [], [])
    assert history[-1] == quiet and history[-2] == quiet, history


@SETTINGS
@given(docs=clusters())
def test_every_eviction_has_a_beneficiary(docs: list[dict[str, Any]]) -> None:
    """In every cycle, if reclaim/preempt/consolidation evicted a pod, some pod was placed or pipelined."""
    cluster = _cluster(docs)
    conf = SchedulerConf()
    for _ in range(6):
        result = cluster.run_cycle(conf)
        evictions = [e for e in result.evictions if e.action != "stalegangeviction"]
        if evictions:
            assert result.binds or result.pipelines, evictions
        moved = {str(e.pod) for e in evictions if e.action == "consolidation"}
        assert moved <= {str(p.pod) for p in result.pipelines}  # consolidation kills nobody


@SETTINGS
@given(docs=clusters())
def test_same_input_same_decisions(docs: list[dict[str, Any]]) -> None:
    conf = SchedulerConf()
    a, b = _cluster(docs), _cluster(docs)
    for _ in range(3):
        assert _decisions(a.run_cycle(conf)) == _decisions(b.run_cycle(conf))
