"""FGD: place the pod where the cluster's fragmentation for the target workload grows least.

For each feasible node the policy computes F_n(M) now and after the pod (a shared pod tries each GPU
with room; a whole-GPU pod takes fully free GPUs; a CPU-only pod takes only CPU) and scores the change
Δ = F_before - F_after. The authors' plugin returns trunc(100 * sigmoid(Δ / 1000)); their
kube-scheduler takes the best node (lowest ``FreeState.rank`` among equals); inside a node a shared
pod takes the first GPU with the best score. ``quantize=False`` keeps Δ exact.
"""

from __future__ import annotations

import numpy as np

from ._frag import FragCache, FragModel, frag_from
from ._state import MILLI, FreeState, GpuPolicy, Placement, PodRequest, SharedOptions, feasible, pick, whole_gpus
from ._workload import TargetWorkload


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """The authors' node score: trunc(100 * sigmoid(Δ / 1000)) (Δ in milli-GPU)."""
    return np.trunc(100.0 / (1.0 + np.exp(-delta / 1000.0)))


def frag_grid(
    fm: FragModel, cache: FragCache, state: FreeState, pod: PodRequest, rows: np.ndarray, opts: SharedOptions | None
) -> np.ndarray:
    """Δ = F_before - F_after for the feasible *rows* (*cache* in step with *state*): a (k, g) grid
    over *opts* for a shared pod, else (k, 1)."""
    u, k, total, before = cache.u[rows], cache.k[rows], cache.total[rows], cache.frag[rows]
    cpu, model = state.cpu[rows], state.model[rows]
    cpu_after = cpu - pod.cpu
    if not pod.gpu_task:
        return (before - frag_from(fm, u, k, total, cpu_after, model))[:, None]
    if opts is None:  # takes num_gpu fully free devices: each had room for every threshold
        c = pod.num_gpu
        return (before - frag_from(fm, u - MILLI * c, k - c, total - MILLI * c, cpu_after, model))[:, None]
    r, f = opts.row, opts.free
    f_after = f - pod.gpu_milli
    was = f[:, None] >= fm.thresholds
    now = f_after[:, None] >= fm.thresholds
    after = frag_from(
        fm,
        u[r] - f[:, None] * was + f_after[:, None] * now,
        k[r] - was + now,
        total[r] - pod.gpu_milli,
        cpu_after[r],
        model[r],
    )
    return opts.grid(before[r] - after)


def frag_deltas(
    fm: FragModel, cache: FragCache, state: FreeState, pod: PodRequest, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Δ = F_before - F_after for the feasible *rows*.

    For a shared pod: a (k, g) grid, one column per distinct free share with room on the row (the
    shares are the second result, same shape; -inf / -1 where there is none): devices with equal free
    shares give equal results, so each value is scored once. For other pods: a (k, 1) grid and None.
    """
    cache.sync(fm, state)
    opts = SharedOptions.of(state.gpu[rows], pod.gpu_milli) if pod.shared else None
    return frag_grid(fm, cache, state, pod, rows, opts), (opts.shares if opts is not None else None)


def shared_device(free_row: np.ndarray, scores: np.ndarray, shares: np.ndarray) -> int:
    """The first device of a node whose free share has the best score (the authors' loop over GPUs)."""
    best = shares[scores == scores.max()]
    return int(np.flatnonzero(np.isin(free_row, best))[0])


class _FragPlacement(GpuPolicy):
    """Shared by FGD and kai's policy: the model cache keyed by the target workload."""

    def __init__(self, n_models: int) -> None:
        self.n_models = n_models
        self._fm: tuple[TargetWorkload, FragModel] | None = None
        self.cache = FragCache()

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

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        rows = np.flatnonzero(feasible(state, pod, allowed))
        if len(rows) == 0:
            return None
        grid, shares = frag_deltas(self.frag_model(self.target), self.cache, state, pod, rows)
        score = sigmoid_score(grid) if self.quantize else grid
        k = pick(score.max(axis=1), np.ones(len(rows), dtype=bool), state.rank[rows])
        node = int(rows[k])
        if shares is not None:
            return Placement(node, (shared_device(state.gpu[node], score[k], shares[k]),))
        return Placement(node, whole_gpus(state.gpu[node], pod.num_gpu) if pod.gpu_task else ())
