"""FGD: place the pod where the cluster's fragmentation for the target workload grows least.

For each feasible node the policy computes F_n(M) now and after the pod (a shared pod tries each GPU
with room; a whole-GPU pod takes fully free GPUs; a CPU-only pod takes only CPU) and scores the change
Δ = F_before - F_after. The authors' plugin returns trunc(100 * sigmoid(Δ / 1000)); their
kube-scheduler takes the best node (lowest ``FreeState.rank`` among equals); inside a node a shared
pod takes the first GPU with the best score. ``quantize=False`` keeps Δ exact.
"""

from __future__ import annotations

import numpy as np

from ._frag import FragModel, fragmentation
from ._state import MILLI, FreeState, GpuPolicy, Placement, PodRequest, feasible, pick, whole_gpus
from ._workload import TargetWorkload


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """The authors' node score: trunc(100 * sigmoid(Δ / 1000)) (Δ in milli-GPU)."""
    return np.trunc(100.0 / (1.0 + np.exp(-delta / 1000.0)))


def take_whole(gpu: np.ndarray, count: int) -> np.ndarray:
    """(k, g) bool: the first *count* fully free devices of each row."""
    full = gpu == MILLI
    return full & (np.cumsum(full, axis=1) <= count)


def frag_deltas(fm: FragModel, state: FreeState, pod: PodRequest, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For feasible *rows*: Δ of every (row, device) a shared pod could take, as a (k, g) grid with -inf
    where the device has no room; for other pods a (k, 1) grid. Also the rows' F before, (k,)."""
    g = state.gpu[rows]
    cpu = state.cpu[rows]
    model = state.model[rows]
    before = fragmentation(fm, g, cpu, model)
    cpu_after = cpu - pod.cpu
    if not pod.shared:
        after_g = g - MILLI * take_whole(g, pod.num_gpu) if pod.gpu_task else g
        return (before - fragmentation(fm, after_g, cpu_after, model))[:, None], before
    r, j = np.nonzero(g >= pod.gpu_milli)
    # devices with the same free share on one node give the same result: score each value once
    _, first, inv = np.unique(r * (2 * MILLI) + g[r, j], return_index=True, return_inverse=True)
    ur, uj = r[first], j[first]
    after_g = g[ur].copy()
    after_g[np.arange(len(ur)), uj] -= pod.gpu_milli
    delta = before[ur] - fragmentation(fm, after_g, cpu_after[ur], model[ur])
    grid = np.full(g.shape, -np.inf)
    grid[r, j] = delta[inv.ravel()]
    return grid, before


class _FragPlacement(GpuPolicy):
    """Shared by FGD and kai's policy: the model cache keyed by the target workload."""

    def __init__(self, n_models: int) -> None:
        self.n_models = n_models
        self._fm: tuple[TargetWorkload, FragModel] | None = None

    def frag_model(self, target: TargetWorkload) -> FragModel:
        if self._fm is None or self._fm[0] is not target:
            self._fm = (target, FragModel.build(target, self.n_models))
        return self._fm[1]


class Fgd(_FragPlacement):
    """Fragmentation Gradient Descent with a fixed target workload (the authors' setting: the trace's
    own shape distribution, known in advance)."""

    name = "fgd"

    def __init__(self, target: TargetWorkload, n_models: int, quantize: bool = True) -> None:
        super().__init__(n_models)
        self.target = target
        self.quantize = quantize

    def choose(self, state: FreeState, pod: PodRequest, rng: np.random.Generator) -> Placement | None:
        rows = np.flatnonzero(feasible(state, pod))
        if len(rows) == 0:
            return None
        grid, _ = frag_deltas(self.frag_model(self.target), state, pod, rows)
        score = sigmoid_score(grid) if self.quantize else grid
        best_dev = score.argmax(axis=1)  # first device with the best score
        node_score = score[np.arange(len(rows)), best_dev]
        k = pick(node_score, np.ones(len(rows), dtype=bool), state.rank[rows])
        node = int(rows[k])
        if pod.shared:
            return Placement(node, (int(best_dev[k]),))
        return Placement(node, whole_gpus(state.gpu[node], pod.num_gpu) if pod.gpu_task else ())
