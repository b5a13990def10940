"""The FGD paper's fill-up protocol: how much GPU a placement policy can allocate before it is stuck.

Theory of operation (the authors' simulator, reproduced; see data/alibaba-gpu-v2023/BENCHMARK.md):

1. All nodes idle. CPU and memory are hard constraints, as are GPU models.
2. Pods never leave. The trace's pods are sorted by name and shuffled with the seed.
3. Pods drawn uniformly with replacement from the trace are appended (after the shuffled ones) until
   the next draw would take the total GPU request past ``ratio`` (130%) of cluster GPU capacity. As
   in the authors' TunePodsByNodeTotalResource, the stop test adds the drawn pod's *per-GPU* share.
4. Pods are placed one at a time in that order; a pod that fits nowhere fails for good.
5. After each pod we record the GPU demand arrived so far (failed pods included) and the GPU
   allocated, both as % of capacity. The curve buckets rows by arrived % rounded to an integer and
   averages allocated % in each bucket (an empty bucket borrows its neighbours, as the authors'
   analysis does).
6. The figure is unallocated GPU % = 100 - allocated % at arrived = 100%.

Node order: the authors prefix node names with a random permutation (after the draws) and their
kube-scheduler fork breaks score ties by the smallest name, so ties follow a random but fixed node
order per seed (``FreeState.rank``). One numpy Generator seeded with the seed drives the shuffle,
the draws, the node order and Random's choices.
The authors' Go code used Go's math/rand, so single runs differ from theirs; means over seeds compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter

import numpy as np

from kai.scheduler.gpupolicy import FreeState, GpuPolicy, PodRequest, TargetWorkload, make_policy

from .alibaba import NodeTable, PodShape

FILL_RATIO = 1.3


@dataclass(frozen=True)
class FillupResult:
    policy: str
    seed: int
    arrived: np.ndarray  # (k,) float: arrived GPU demand after each pod, % of capacity
    allocated: np.ndarray  # (k,) float: allocated GPU after each pod, % of capacity
    placed: int
    failed: int
    seconds: float  # wall time of the placement loop

    def curve(self, lo: int = 0, hi: int = 130) -> dict[int, float]:
        return bucket_curve(self.arrived, self.allocated, lo, hi)

    def unallocated_at(self, arrived_pct: int = 100) -> float:
        return 100.0 - self.curve(arrived_pct, arrived_pct)[arrived_pct]


def fillup_order(
    pods: Sequence[PodShape], gpu_capacity: int, rng: np.random.Generator, ratio: float = FILL_RATIO
) -> list[int]:
    """Indices into *pods* in arrival order (steps 2-3 of the protocol)."""
    by_name = sorted(range(len(pods)), key=lambda i: pods[i].name)
    order = [by_name[i] for i in rng.permutation(len(by_name))]
    total = sum(p.gpu_demand for p in pods)
    target = ratio * gpu_capacity
    while True:
        i = by_name[int(rng.integers(len(by_name)))]
        if total + pods[i].gpu_milli > target:
            break
        total += pods[i].gpu_demand
        order.append(i)
    return order


def bucket_curve(arrived: np.ndarray, allocated: np.ndarray, lo: int, hi: int) -> dict[int, float]:
    """Mean allocated % per arrived-% bucket lo..hi (rows rounded to the nearest integer %; an empty
    bucket averages the rows within one % of it; a bucket with no rows near it is left out)."""
    bucket = np.round(arrived)
    out: dict[int, float] = {}
    for b in range(lo, hi + 1):
        sel = bucket == b
        if not sel.any():
            sel = (bucket >= b - 1) & (bucket <= b + 1)
            if not sel.any():
                continue
        out[b] = float(allocated[sel].mean())
    return out


def run_fillup(
    nodes: NodeTable,
    pods: Sequence[PodShape],
    policy: str,
    seed: int,
    ratio: float = FILL_RATIO,
) -> FillupResult:
    """Steps 1-5 for one seed. ``fgd`` is given the trace's own shape distribution as its target
    workload (the authors' setting); other policies get nothing up front."""
    rng = np.random.default_rng(seed)
    model_ids = nodes.model_ids
    requests = [p.request(model_ids) for p in pods]
    target = TargetWorkload.from_pods(requests)
    pol = make_policy(policy, n_models=len(model_ids), target=target)
    capacity = nodes.gpu_capacity
    order = fillup_order(pods, capacity, rng, ratio)
    # the authors prefix node names (sorted) with a random permutation; ties go to the smallest name
    rank = np.empty(len(nodes.names), dtype=np.int64)
    rank[np.argsort(np.array(nodes.names), kind="stable")] = rng.permutation(len(nodes.names))
    state = nodes.free_state(rank)
    start = perf_counter()
    rows = place_in_order(state, [requests[i] for i in order], pol, rng)
    seconds = perf_counter() - start
    gpu = np.array([requests[i].total_gpu for i in order], dtype=np.float64)
    arrived = np.cumsum(gpu)
    allocated = np.cumsum(np.where(rows >= 0, gpu, 0.0))
    placed = int((rows >= 0).sum())
    scale = 100.0 / capacity
    return FillupResult(pol.name, seed, arrived * scale, allocated * scale, placed, len(order) - placed, seconds)


def place_in_order(
    state: FreeState, pods: Sequence[PodRequest], policy: GpuPolicy, rng: np.random.Generator
) -> np.ndarray:
    """Steps 4-5's placements: each pod in turn (the policy observes it first), taken from *state* in
    place; the chosen node row of every pod, -1 for a pod that fits nowhere. (The engine's test replays
    a slice of a trace through ``placementStrategy.gpu`` and compares its nodes with these.)"""
    rows = np.full(len(pods), -1, dtype=np.int64)
    for k, pod in enumerate(pods):
        policy.observe(pod)
        placement = policy.choose(state, pod, rng)
        if placement is not None:
            state.take(pod, placement)
            rows[k] = placement.node
    return rows
