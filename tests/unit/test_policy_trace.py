"""One code path: a slice of the Alibaba trace replayed through the engine with ``placementStrategy.gpu: P``
chooses the same nodes as ``kai.trace.fillup``'s placement loop with policy P.

The slice: nodes of the trace's node list (every NODE_STEP-th, named so that name order is file order),
the first PODS pods of seed 42's fill-up order that the slice's GPU models can run. The engine sees
them as Kubernetes objects (``nvidia.com/gpu`` for whole GPUs, ``gpu-fraction`` for shared GPUs, a
required node affinity on ``nvidia.com/gpu.product`` for ``gpu_spec``), all pending in arrival order,
one queue without limits, one cycle of ``allocate`` in the embedded cluster. Jobs go in creation order
(one queue, equal priority), which is the arrival order, so the engine asks the policy about the pods
in the fill-up's order, on a cluster state that has taken exactly the previous placements.

Where the two must be set up alike:
* node order: the fill-up ranks nodes by name, as the engine does (rows sorted by name);
* target workload (``fgd``, ``fragmentation``): the engine learns it from the Snapshot's pods, i.e. the
  whole slice; the fill-up's ``fgd`` gets the same up front, and ``fragmentation`` gets it as its fixed
  target (the fill-up benchmark's ``fragmentation`` learns online instead, pod by pod: a separate test
  runs the engine one cycle per pod and compares with that);
* ``random``: the engine's generator is seeded with ``spec.args.gpu-policy-seed``; the fill-up loop is
  given a generator with the same seed, and both draw once per pod that fits somewhere (twice for a
  shared pod: node, then device). One difference can show on other slices: the engine does not track
  which devices whole-GPU pods hold (whole GPUs are interchangeable), so on a node running both kinds
  its device order may differ from the fill-up's; Random picks a device by position among those with
  room, so it may then pick a GPU with another free share. The deterministic policies pick devices by
  free share (ties to the first), which the order does not change.
* ``binpack`` is KAI's own placement (the engine's existing path, not the policy package): compared
  with the package's ``binpack`` too.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

import numpy as np
import pytest
import yaml

from kai.api import constants as C
from kai.api.manifests import load_manifests
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.gpupolicy import Fragmentation, TargetWorkload, make_policy
from kai.sim.cluster import EmbeddedCluster
from kai.trace.alibaba import DEFAULT_DATA_DIR, DEFAULT_NODES, NodeTable, PodShape, load_nodes, load_pods
from kai.trace.fillup import fillup_order, place_in_order

NOW = 1_767_225_600.0
NODE_STEP = 40  # every 40th node of the trace's 1,213: 31 nodes
PODS = 200
SEED = 42


@cache
def trace_slice() -> tuple[NodeTable, tuple[PodShape, ...]]:
    nodes = load_nodes(DEFAULT_DATA_DIR / DEFAULT_NODES)
    pick = np.arange(0, len(nodes.names), NODE_STEP)
    sub = NodeTable(
        names=tuple(f"node-{i:04d}" for i in range(len(pick))),
        cpu_milli=nodes.cpu_milli[pick],
        memory_mib=nodes.memory_mib[pick],
        gpus=nodes.gpus[pick],
        models=tuple(nodes.models[i] for i in pick),
    )
    pods = load_pods(DEFAULT_DATA_DIR / "openb_pod_list_default.csv")
    order = fillup_order(pods, sub.gpu_capacity, np.random.default_rng(SEED))
    have = set(sub.models)
    chosen: list[PodShape] = []
    for i in order:
        p = pods[i]
        if all(m in have for m in p.gpu_models):
            chosen.append(p)
        if len(chosen) == PODS:
            break
    return sub, tuple(chosen)


def manifests(
    nodes: NodeTable, pods: tuple[PodShape, ...], gpu: str, extra_args: dict[str, str]
) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": C.SHARD_API_VERSION,
            "kind": "SchedulingShard",
            "metadata": {"name": "default"},
            "spec": {"placementStrategy": {"gpu": gpu}, "args": extra_args},
        },
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "trace"},
            "spec": {
                "resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
            },
        },
    ]
    for name, cpu, mem, gpus, model in zip(
        nodes.names, nodes.cpu_milli.tolist(), nodes.memory_mib.tolist(), nodes.gpus.tolist(), nodes.models, strict=True
    ):
        labels = {C.LABEL_GPU_PRODUCT: model, C.LABEL_GPU_MEMORY: "16000"} if gpus else {}
        alloc = {"cpu": f"{cpu}m", "memory": f"{mem}Mi", "pods": "1000"}
        if gpus:
            alloc["nvidia.com/gpu"] = str(gpus)
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": alloc},
            }
        )
    for k, p in enumerate(pods):
        requests = {"cpu": f"{p.cpu_milli}m", "memory": f"{p.memory_mib}Mi"}
        annotations = {}
        if p.num_gpu and p.gpu_milli == 1000:
            requests["nvidia.com/gpu"] = str(p.num_gpu)
        elif p.num_gpu:
            annotations[C.ANNOTATION_GPU_FRACTION] = f"{p.gpu_milli / 1000:.3f}"
        spec: dict[str, Any] = {
            "schedulerName": C.SCHEDULER_NAME,
            "containers": [{"name": "c", "resources": {"requests": requests}}],
        }
        if p.gpu_models:
            term = {"matchExpressions": [{"key": C.LABEL_GPU_PRODUCT, "operator": "In", "values": list(p.gpu_models)}]}
            spec["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
            }
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{k:04d}", "labels": {C.LABEL_QUEUE: "trace"}, "annotations": annotations},
                "spec": spec,
            }
        )
    return docs


def engine_rows(gpu: str, extra_args: dict[str, str] | None = None, per_pod: bool = False) -> np.ndarray:
    """The node row (name order) the engine chose for each pod of the slice; -1 = left pending."""
    nodes, pods = trace_slice()
    docs = manifests(nodes, pods, gpu, extra_args or {})
    cluster = EmbeddedCluster(now=NOW)
    head = 2 + len(nodes.names)
    conf = None
    if per_pod:  # one pod arrives before each cycle, as in the fill-up's online setting
        cluster.apply(load_manifests([("c.yaml", yaml.safe_dump_all(docs[:head]))])[0])
        for doc in docs[head:]:
            cluster.apply(load_manifests([("p.yaml", yaml.safe_dump(doc))])[0])
            conf = conf or SchedulerConf.from_shard(cluster.shard(), actions=("allocate",))
            cluster.schedule(conf)
    else:
        cluster.apply(load_manifests([("c.yaml", yaml.safe_dump_all(docs))])[0])
        cluster.schedule(SchedulerConf.from_shard(cluster.shard(), actions=("allocate",)))
    row = {n: i for i, n in enumerate(nodes.names)}
    out = np.full(len(pods), -1, dtype=np.int64)
    for pod in cluster.store.list("Pod"):
        if pod.node_name:
            out[int(pod.meta.name[1:])] = row[pod.node_name]
    return out


def fillup_rows(policy: str, *, online: bool = False, seed: int = 0) -> np.ndarray:
    nodes, pods = trace_slice()
    ids = nodes.model_ids
    requests = [p.request(ids) for p in pods]
    target = TargetWorkload.from_pods(requests)
    if policy == "fragmentation":
        pol = Fragmentation(len(ids), target=None if online else target)
        if online:
            pol.counter._refresh = 0.0  # rebuild the learned target after every pod, as a fresh cycle does
    else:
        pol = make_policy(policy, n_models=len(ids), target=target)
    return place_in_order(nodes.free_state(), requests, pol, np.random.default_rng(seed))


POLICIES = ["fragmentation", "bestfit", "fgd", "gpupacking", "gpuclustering", "dotprod", "random"]


@pytest.mark.parametrize("policy", POLICIES)
def test_engine_places_the_trace_slice_as_the_fillup_does(policy: str) -> None:
    engine = engine_rows(policy, {"gpu-policy-seed": "7"} if policy == "random" else None)
    fill = fillup_rows(policy, seed=7)
    placed = int((fill >= 0).sum())
    assert 150 < placed < PODS  # the slice fills the cluster: some pods fit nowhere
    assert engine.tolist() == fill.tolist()


def test_engine_learns_fragmentations_target_like_the_fillup_when_pods_arrive_one_per_cycle() -> None:
    """The fill-up benchmark's ``fragmentation`` learns the workload from the pods seen so far; the engine
    learns it from the Snapshot's pods. One pod arriving per cycle, the two see the same pods (failed ones
    included: they stay pending in the Snapshot) and choose the same nodes."""
    engine = engine_rows("fragmentation", per_pod=True)
    fill = fillup_rows("fragmentation", online=True)
    assert 150 < int((fill >= 0).sum()) < PODS
    assert engine.tolist() == fill.tolist()


def test_the_seed_of_random_changes_its_choices() -> None:
    assert engine_rows("random", {"gpu-policy-seed": "7"}).tolist() != engine_rows("random").tolist()


def test_kai_binpack_matches_the_packages_binpack_without_shared_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """``placementStrategy.gpu: binpack`` stays KAI's placement (the engine's own path). It ranks nodes by
    whole idle GPUs, the package's ``binpack`` by total free GPU share, so the two agree on whole-GPU and
    CPU-only pods; for a fraction KAI first prefers any node with a GPU group it fits on (gpusharingorder),
    which the package's approximation does not (on the full slice they part at the first such pod)."""
    nodes, pods = trace_slice()
    whole = tuple(p for p in pods if p.gpu_milli in (0, 1000))
    monkeypatch.setattr(sys.modules[__name__], "trace_slice", lambda: (nodes, whole))
    engine = engine_rows("binpack")
    fill = fillup_rows("binpack")
    assert len(whole) > 100
    assert engine.tolist() == fill.tolist()
