"""The victim solver's shortcuts decide as the full simulations do.

* A victims-first simulation known to fail (kai.scheduler.actions.victims_first) is not played out.
* A consolidation whose placed pods must move more than max-consolidation-preemptees stops before putting its
  victims back (``Solver._must_move``), and a put-back pass stops once it has moved more pods than that.

Random saturated clusters of whole-GPU jobs (both shortcuts need no GPU groups): teams near their quotas, most
nodes full, pending jobs of every size, and some pods selecting a node pool their node may no longer be in.
Each cluster runs a few cycles twice, with the shortcuts and with them disabled (every simulation placing its
victims back), and every cycle's decisions must be equal.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import example, given
from hypothesis import strategies as st

from kai.scheduler.actions.consolidation import Consolidation
from kai.scheduler.actions.victims_first import VictimsFirst
from kai.scheduler.conf import SchedulerConf
from tests.property.manifests import (
    GpuBook,
    GpuRequest,
    gpu_pod,
    node_doc,
    podgroup_doc,
    pool_labels,
    queue_doc,
    select_pool,
)
from tests.property.test_eviction_props import SETTINGS, _cluster, _decisions, _found


@st.composite
def saturated(draw: st.DrawFn) -> list[dict[str, Any]]:
    shape = [(f"node{i}", draw(st.sampled_from([2, 4, 8])), None) for i in range(draw(st.integers(2, 5)))]
    pools = draw(st.booleans())  # node pools that some pods select (tests.property.manifests.select_pool)
    docs: list[dict[str, Any]] = [
        node_doc(name, gpus, memory, pool_labels(draw, pools)) for name, gpus, memory in shape
    ]
    docs.append(queue_doc("dept", None, -1, 1))
    teams = [f"team-{c}" for c in "abc"[: draw(st.integers(2, 3))]]
    total = sum(g for _, g, _ in shape)
    for t in teams:
        docs.append(queue_doc(t, "dept", draw(st.integers(0, total // len(teams))), draw(st.integers(1, 2))))
    book = GpuBook.of(shape)
    for j in range(draw(st.integers(3, 14))):
        running = draw(st.integers(0, 2)) > 0  # two in three run: the cluster fills up
        size = draw(st.integers(1, 2))
        req = GpuRequest(whole=draw(st.sampled_from([1, 1, 2, 4])))
        name = f"job{j}"
        min_member, queue = draw(st.integers(1, size)), draw(st.sampled_from(teams))
        priority = draw(st.sampled_from(["train", "train", "build-preemptible", "inference"]))
        docs.append(podgroup_doc(name, queue, min_member, priority, f"2025-12-31T20:{j:02d}:00Z"))
        for k in range(size):
            spot = book.place(draw, req) if running else None
            node = spot[0] if spot is not None else None
            cpu = str(draw(st.sampled_from([1, 8]))) if draw(st.booleans()) else None
            doc = gpu_pod(f"{name}-{k}", req, annotations={"pod-group-name": name}, node=node, cpu=cpu)
            docs.append(select_pool(draw, doc, pools, 4))
    return docs


@SETTINGS
@given(docs=saturated())
@example(docs=_found("victims_first_relabelled.yaml"))  # a victim its relabelled node no longer takes (restores)
def test_a_known_failure_decides_as_the_full_simulation(docs: list[dict[str, Any]]) -> None:
    _decide_both_ways(docs, SchedulerConf(), mock.patch.object(VictimsFirst, "of", classmethod(lambda cls, *a: None)))


def _decide_both_ways(docs: list[dict[str, Any]], conf: SchedulerConf, full_path: Any) -> None:
    """Four cycles of *docs*, with the shortcuts and inside *full_path* (a patch turning them off): the
    decisions of every cycle are equal."""
    shortcut, full = _cluster(docs), _cluster(docs)
    for _ in range(4):
        with full_path:
            expected = _decisions(full.run_cycle(conf))
        assert _decisions(shortcut.run_cycle(conf)) == expected


@st.composite
def fragmented(draw: st.DrawFn) -> list[dict[str, Any]]:
    """8-GPU nodes partly used by small running pods, and a pending wide pod (or a pair) bigger than any node's
    free GPUs but within the cluster's: it fits only once small pods move, consolidation's work."""
    nodes = draw(st.integers(2, 5))
    docs: list[dict[str, Any]] = [node_doc(f"node{i}", 8, None) for i in range(nodes)]
    docs += [queue_doc("dept", None, -1, 1), queue_doc("team", "dept", -1, 1)]
    free = []
    for i in range(nodes):
        used = draw(st.integers(2, 7))
        free.append(8 - used)
        while used > 0:
            gpus = min(used, draw(st.sampled_from([1, 1, 2])))
            used -= gpus
            name = f"small{len(docs)}"
            docs += _job(name, 1, [gpu_pod(f"{name}-0", GpuRequest(whole=gpus), node=f"node{i}")])
    wide = [w for w in range(max(free) + 1, 9) if w <= sum(free)] or [8]
    size = draw(st.integers(1, 2))
    req = GpuRequest(whole=draw(st.sampled_from(wide)))
    docs += _job("wide", size, [gpu_pod(f"wide-{k}", req) for k in range(size)])
    return docs


def _job(name: str, size: int, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A PodGroup of queue team needing *size* pods, and *pods* as its members."""
    group = podgroup_doc(name, "team", size, "train")
    for p in pods:
        p["metadata"]["annotations"]["pod-group-name"] = name
    return [group, *pods]


@SETTINGS
@given(docs=fragmented(), cap=st.integers(1, 4))
def test_a_consolidation_bound_by_its_cap_decides_as_the_full_simulation(docs: list[dict[str, Any]], cap: int) -> None:
    no_cap = mock.patch.object(Consolidation, "move_cap", lambda self, ssn: -1)  # only the validator counts
    _decide_both_ways(docs, SchedulerConf(max_consolidation_preemptees=cap), no_cap)
