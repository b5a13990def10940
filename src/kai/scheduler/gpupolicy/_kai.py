"""kai's placement policies.

``KaiBinpack`` is what kai (and KAI Scheduler) do by default: binpack nodes, gpupack GPUs. A GPU pod
goes to the feasible node with the least free GPU share, a CPU-only pod to the one with the least
free CPU; ties go to the lowest ``FreeState.rank`` (KAI: node name ascending). A shared pod takes the fullest GPU with
room, a whole-GPU pod the first fully free GPUs.
"""

from __future__ import annotations

import numpy as np

from ._fgd import _FragPlacement, frag_deltas, shared_device
from ._state import FreeState, GpuPolicy, Placement, PodRequest, feasible, gpus_for, pick
from ._workload import ShapeCounter


class KaiBinpack(GpuPolicy):
    name = "binpack"

    def choose(self, state: FreeState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        ok = feasible(state, pod)
        free = np.maximum(state.gpu, 0).sum(axis=1) if pod.gpu_task else state.cpu
        node = pick(-free.astype(np.float64), ok, state.rank)
        return None if node < 0 else Placement(node, gpus_for(state.gpu[node], pod))


class Fragmentation(_FragPlacement):
    """kai's fragmentation-aware policy (work in progress: FGD with exact Δ and an online target)."""

    name = "fragmentation"

    def __init__(self, n_models: int, half_life: float | None = None) -> None:
        super().__init__(n_models)
        self.counter = ShapeCounter(half_life=half_life)

    def observe(self, pod: PodRequest) -> None:
        self.counter.observe(pod)

    def choose(self, state: FreeState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        rows = np.flatnonzero(feasible(state, pod))
        if len(rows) == 0:
            return None
        grid, shares = frag_deltas(self.frag_model(self.counter.target()), self.cache, state, pod, rows)
        k = pick(grid.max(axis=1), np.ones(len(rows), dtype=bool), state.rank[rows])
        node = int(rows[k])
        if shares is not None:
            return Placement(node, (shared_device(state.gpu[node], grid[k], shares[k]),))
        return Placement(node, gpus_for(state.gpu[node], pod))
