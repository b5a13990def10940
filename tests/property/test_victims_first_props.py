"""A victims-first simulation known to fail (kai.scheduler.actions.victims_first) decides as the full one.

Random saturated clusters of whole-GPU jobs (the check needs no GPU groups): teams near their quotas, most
nodes full, pending jobs of every size. Each cluster runs a few cycles twice, with the check and with it
disabled (every simulation placing its victims back), and every cycle's decisions must be equal.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from kai.scheduler.actions.victims_first import VictimsFirst
from kai.scheduler.conf import SchedulerConf
from tests.property.manifests import GpuBook, GpuRequest, gpu_pod, node_doc, queue_doc
from tests.property.test_eviction_props import SETTINGS, _cluster, _decisions


@st.composite
def saturated(draw: st.DrawFn) -> list[dict[str, Any]]:
    shape = [(f"node{i}", draw(st.sampled_from([2, 4, 8])), None) for i in range(draw(st.integers(2, 5)))]
    docs: list[dict[str, Any]] = [node_doc(name, gpus, memory) for name, gpus, memory in shape]
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
        docs.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": name, "creationTimestamp": f"2025-12-31T20:{j:02d}:00Z"},
                "spec": {
                    "minMember": draw(st.integers(1, size)),
                    "queue": draw(st.sampled_from(teams)),
                    "priorityClassName": draw(st.sampled_from(["train", "train", "build-preemptible", "inference"])),
                },
            }
        )
        for k in range(size):
            spot = book.place(draw, req) if running else None
            node = spot[0] if spot is not None else None
            cpu = str(draw(st.sampled_from([1, 8]))) if draw(st.booleans()) else None
            docs.append(gpu_pod(f"{name}-{k}", req, annotations={"pod-group-name": name}, node=node, cpu=cpu))
    return docs


@SETTINGS
@given(docs=saturated())
def test_a_known_failure_decides_as_the_full_simulation(docs: list[dict[str, Any]]) -> None:
    conf = SchedulerConf()
    known, full = _cluster(docs), _cluster(docs)
    for _ in range(4):
        with mock.patch.object(VictimsFirst, "of", classmethod(lambda cls, *a: None)):
            expected = _decisions(full.run_cycle(conf))
        assert _decisions(known.run_cycle(conf)) == expected
