"""Topology on random clusters: a required level is never broken, and a gang that fits some domain is placed.

Clusters: 2 blocks x up to 3 racks x up to 3 nodes of random GPU counts and GPU memory, some already partly
used by whole-GPU and shared pods (on consistent GPU groups, tests.property.manifests), and one pending gang
that requires one rack (or one block), optionally preferring a lower level; its pods ask for 1 or 2 whole
GPUs, a GPU fraction or GPU memory (one device). With identical requests and no predicates, a domain "has
room" exactly when allocate can place the gang there (whole GPUs; or, for portions, what each GPU group and
each free GPU holds of them), so the test also checks that allocate finds a domain whenever one exists.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api import constants as C
from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.scheduler.conf import SchedulerConf
from kai.sim.cluster import EmbeddedCluster
from tests.property.manifests import (
    GPU_MEMORY_LABELS,
    NOW,
    GpuBook,
    GpuRequest,
    NodeGpus,
    gpu_pod,
    gpu_requests,
    node_doc,
)

BLOCK, RACK = "example.com/block", "example.com/rack"
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def _pg(name: str, min_member: int, constraint: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "q0", "priorityClassName": "train"}
    if constraint:
        spec["topologyConstraint"] = {"topology": "t", **constraint}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]], dict[str, int], int, str]:
    """(manifests, node -> (block, rack), node -> gang pods it has room for, gang size, required level)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": BLOCK, "alias": "block"}, {"nodeLabel": RACK, "alias": "rack"}]},
        },
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "q0"},
            "spec": {"resources": {r: UNLIMITED for r in ("gpu", "cpu", "memory")}},
        },
    ]
    where: dict[str, tuple[str, str]] = {}
    shape = []
    for b in range(2):
        for r in range(draw(st.integers(1, 3))):
            for _ in range(draw(st.integers(1, 3))):
                name = f"n{len(shape)}"
                gpus = draw(st.sampled_from([1, 2, 4, 8]))
                memory = draw(st.sampled_from(GPU_MEMORY_LABELS))
                where[name] = (f"b{b}", f"b{b}/r{r}")
                shape.append((name, gpus, memory))
                docs.append(node_doc(name, gpus, memory, {BLOCK: f"b{b}", RACK: f"r{r}"}))
    book = GpuBook.of(shape)
    max_memory = max((m or C.DEFAULT_GPU_MEMORY_MIB) for _, _, m in shape)
    for k in range(draw(st.integers(0, 2 * len(shape)))):  # some nodes partly used, by whole-GPU and shared pods
        req = draw(gpu_requests(max_memory))
        spot = book.place(draw, req)
        if spot is not None:
            docs.append(_pg(f"busy-{k}", 1))
            node, groups = spot
            docs.append(
                gpu_pod(f"busy-{k}-0", req, annotations=_member(f"busy-{k}"), cpu="1", node=node, groups=groups)
            )
    size = draw(st.integers(1, 12))
    req = draw(gpu_requests(max_memory).filter(lambda r: r.devices == 1))  # one device: room is a simple count
    level = draw(st.sampled_from(["rack", "block"]))
    constraint = {"requiredTopologyLevel": level}
    if level == "block" and draw(st.booleans()):
        constraint["preferredTopologyLevel"] = "rack"
    docs.append(_pg("gang", size, constraint))
    docs += [gpu_pod(f"gang-{i}", req, annotations=_member("gang"), cpu="1") for i in range(size)]
    return docs, where, {n.name: _room(n, req) for n in book.nodes}, size, level


def _member(pg: str) -> dict[str, str]:
    return {"pod-group-name": pg}


def _room(node: NodeGpus, req: GpuRequest) -> int:
    """How many pods of *req* fit on *node*: per whole GPU request, its free whole GPUs; per one-device portion,
    what each GPU group and each free GPU holds of them (identical portions pack the same in any order)."""
    if not req.shared:
        return node.whole_free // req.whole
    need = req.units(node.cap)
    if need > node.cap:
        return 0
    return sum(free // need for free in node.groups.values()) + node.whole_free * (node.cap // need)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_required_level_holds_and_a_fitting_domain_is_found(
    case: tuple[list[dict[str, Any]], dict[str, tuple[str, str]], dict[str, int], int, str],
) -> None:
    docs, where, room_of, size, level = case
    objects, _ = load_manifests([("cluster.yaml", yaml.safe_dump_all(docs, sort_keys=False))])
    cluster = EmbeddedCluster(now=parse_time(NOW, "now"), strict_input=True)  # refuses an over-committed draw
    cluster.apply(objects)
    result = cluster.run_cycle(SchedulerConf(actions=("allocate",)))
    nodes = [b.node for b in result.binds if b.pod.name.startswith("gang-")]
    pick = 0 if level == "block" else 1
    room: dict[str, int] = {}
    for name, n in room_of.items():
        room[where[name][pick]] = room.get(where[name][pick], 0) + n
    if nodes:
        assert len(nodes) == size  # all or nothing
        assert len({where[n][pick] for n in nodes}) == 1, nodes  # one domain of the required level
    else:
        assert max(room.values()) < size, (room, size)  # nothing placed only when no domain has room
