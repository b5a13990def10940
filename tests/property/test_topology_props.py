"""Topology on random clusters: a required level is never broken, and a gang that fits some domain is placed.

Clusters: 2 blocks x up to 3 racks x up to 3 nodes of random GPU counts, some already partly used, and
one pending gang of 1-GPU (or 2-GPU) pods that requires one rack (or one block), optionally preferring a
lower level. With only whole-GPU requests and no predicates, a domain "has room" exactly when allocate can
place the gang there, so the test also checks that allocate finds a domain whenever one exists.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.scheduler.conf import SchedulerConf
from kai.sim.cluster import EmbeddedCluster

NOW = "2026-01-01T00:00:00Z"
BLOCK, RACK = "example.com/block", "example.com/rack"
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def _pod(name: str, pg: str, gpus: int, node: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"pod-group-name": pg}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}]},
    }
    if node:
        doc["spec"]["nodeName"] = node
        doc["status"] = {"phase": "Running", "startTime": "2025-12-31T23:00:00Z"}
    return doc


def _pg(name: str, min_member: int, constraint: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "q0", "priorityClassName": "train"}
    if constraint:
        spec["topologyConstraint"] = {"topology": "t", **constraint}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]], dict[str, int], int, int, str]:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": BLOCK, "alias": "block"}, {"nodeLabel": RACK, "alias": "rack"}]},
        },
        {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q0"},
         "spec": {"resources": {r: UNLIMITED for r in ("gpu", "cpu", "memory")}}},
    ]
    where: dict[str, tuple[str, str]] = {}
    free: dict[str, int] = {}
    k = 0
    for b in range(2):
        for r in range(draw(st.integers(1, 3))):
            for _ in range(draw(st.integers(1, 3))):
                name = f"n{k}"
                k += 1
                gpus = draw(st.sampled_from([1, 2, 4, 8]))
                where[name] = (f"b{b}", f"b{b}/r{r}")
                docs.append({"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": name, "labels": {BLOCK: f"b{b}", RACK: f"r{r}"}},
                             "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpus)}}})
                used = draw(st.integers(0, gpus))
                free[name] = gpus - used
                if used:
                    docs.append(_pg(f"busy-{name}", 1))
                    docs.append(_pod(f"busy-{name}-0", f"busy-{name}", used, node=name))
    size = draw(st.integers(1, 12))
    per_pod = draw(st.sampled_from([1, 2]))
    level = draw(st.sampled_from(["rack", "block"]))
    constraint = {"requiredTopologyLevel": level}
    if level == "block" and draw(st.booleans()):
        constraint["preferredTopologyLevel"] = "rack"
    docs.append(_pg("gang", size, constraint))
    docs += [_pod(f"gang-{i}", "gang", per_pod) for i in range(size)]
    return docs, where, free, size, per_pod, level


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_required_level_holds_and_a_fitting_domain_is_found(
    case: tuple[list[dict[str, Any]], dict[str, tuple[str, str]], dict[str, int], int, int, str],
) -> None:
    docs, where, free, size, per_pod, level = case
    objects, _ = load_manifests([("cluster.yaml", yaml.safe_dump_all(docs, sort_keys=False))])
    cluster = EmbeddedCluster(now=parse_time(NOW, "now"))
    cluster.apply(objects)
    result = cluster.run_cycle(SchedulerConf(actions=("allocate",)))
    nodes = [b.node for b in result.binds if b.pod.name.startswith("gang-")]
    pick = 0 if level == "block" else 1
    room: dict[str, int] = {}
    for name, f in free.items():
        room[where[name][pick]] = room.get(where[name][pick], 0) + f // per_pod
    if nodes:
        assert len(nodes) == size  # all or nothing
        assert len({where[n][pick] for n in nodes}) == 1, nodes  # one domain of the required level
    else:
        assert max(room.values()) < size, (room, size)  # nothing placed only when no domain has room
