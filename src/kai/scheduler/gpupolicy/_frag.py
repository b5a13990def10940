"""GPU fragmentation of nodes for a target workload (the FGD paper's F_n(M)), vectorized over nodes.

For one shape m (per-GPU share g_m, count c_m, CPU cpu_m, accepted models) a node's fragmentation is
the free GPU share m could never use there:

* all of the node's free share if m is CPU-only, does not accept the node's model, or does not fit
  (fewer than c_m devices with >= g_m free, or less free CPU than cpu_m);
* otherwise the free share of the devices with less than g_m free.

F_n(M) = sum_m p_m F_n(m). With U_n(t) = free share on devices with >= t free and K_n(t) their count,
this is ``total_n - sum_m p_m * fits_nm * U_n(g_m)``: it needs U and K only at the distinct g_m
values (a handful), not per shape and device. ``FragCache`` keeps U and K for every node and
recomputes only the rows whose free state changed since the last call, so scoring a pod costs
O(nodes x shapes) with small constants.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._state import FreeState, RowTracker
from ._workload import TargetWorkload


@dataclass(frozen=True)
class FragModel:
    """A TargetWorkload prepared for ``fragmentation`` (thresholds, model access table)."""

    thresholds: np.ndarray  # (t,) distinct per-GPU shares of the GPU shapes, ascending
    t_index: np.ndarray  # (k,) threshold column of each GPU shape
    count: np.ndarray  # (k,) devices each GPU shape needs
    cpu: np.ndarray  # (k,) millicores each GPU shape needs
    weight: np.ndarray  # (k,) p_m of each GPU shape
    access: np.ndarray  # (n_models + 1, k) bool: row = model id + 1 (row 0: nodes without GPUs)

    @classmethod
    def build(cls, target: TargetWorkload, n_models: int) -> FragModel:
        gpu, thresholds, t_index, access = target.gpu_shapes(n_models)
        return cls(
            thresholds=thresholds.astype(np.int64),
            t_index=t_index.astype(np.intp).ravel(),
            count=target.num_gpu[gpu],
            cpu=target.cpu[gpu],
            weight=target.weight[gpu],
            access=access,
        )


def usable(free: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """U (k, t) and K (k, t) of k rows of free shares (k, g; -1 = no device)."""
    ge = free[:, :, None] >= thresholds[None, None, :]
    return (np.maximum(free, 0)[:, :, None] * ge).sum(axis=1), ge.sum(axis=1)


def frag_from(
    fm: FragModel, u: np.ndarray, k: np.ndarray, total: np.ndarray, cpu: np.ndarray, model: np.ndarray
) -> np.ndarray:
    """(r,) float F(M) of r node states given by U, K (r, t), total free share, free CPU, model id."""
    total = total.astype(np.float64)
    if len(fm.weight) == 0:
        return total
    fits = fm.access[model + 1]
    fits &= k[:, fm.t_index] >= fm.count
    fits &= cpu[:, None] >= fm.cpu
    return total - (fits * u[:, fm.t_index]) @ fm.weight


def fragmentation(fm: FragModel, gpu: np.ndarray, cpu: np.ndarray, model: np.ndarray) -> np.ndarray:
    """(k,) float: F(M) of k node states given as free GPU rows (k, g; -1 = no device), free CPU (k,)
    and model ids (k,)."""
    u, k = usable(gpu, fm.thresholds)
    return frag_from(fm, u, k, np.maximum(gpu, 0).sum(axis=1), cpu, model)


class FragCache:
    """U, K, total free share and F(M) of every node. ``sync`` brings them in step with a FreeState,
    recomputing only rows whose free state changed (every row when the thresholds or the FragModel
    change); ``refresh`` does the same with the changed rows given (one RowTracker for several caches).
    """

    def __init__(self) -> None:
        self._tracker = RowTracker()
        self._thresholds: np.ndarray | None = None
        self._fm: FragModel | None = None
        self.u = np.zeros((0, 0), dtype=np.int64)
        self.k = np.zeros((0, 0), dtype=np.int64)
        self.total = np.zeros(0, dtype=np.int64)
        self.frag = np.zeros(0)

    def sync(self, fm: FragModel, state: FreeState) -> None:
        self.refresh(fm, state, self._tracker.changed(state))

    def refresh(self, fm: FragModel, state: FreeState, changed: np.ndarray | None) -> None:
        gpu = state.gpu
        if changed is None or self._thresholds is None or not np.array_equal(self._thresholds, fm.thresholds):
            self._thresholds = fm.thresholds.copy()
            self.u, self.k = usable(gpu, fm.thresholds)
            self.total = np.maximum(gpu, 0).sum(axis=1)
            self._fm = None
        elif len(changed):
            g = gpu[changed]
            self.u[changed], self.k[changed] = usable(g, fm.thresholds)
            self.total[changed] = np.maximum(g, 0).sum(axis=1)
            if self._fm is fm:
                self.frag[changed] = frag_from(
                    fm, self.u[changed], self.k[changed], self.total[changed], state.cpu[changed], state.model[changed]
                )
        if self._fm is not fm:
            self._fm = fm
            self.frag = frag_from(fm, self.u, self.k, self.total, state.cpu, state.model)
