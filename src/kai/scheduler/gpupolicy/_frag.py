"""GPU fragmentation of nodes for a target workload (the FGD paper's F_n(M)), vectorized over nodes.

For one shape m (per-GPU share g_m, count c_m, CPU cpu_m, accepted models) a node's fragmentation is
the free GPU share m could never use there:

* all of the node's free share if m is CPU-only, does not accept the node's model, or does not fit
  (fewer than c_m devices with >= g_m free, or less free CPU than cpu_m);
* otherwise the free share of the devices with less than g_m free.

F_n(M) = sum_m p_m F_n(m). With U_n(t) = free share on devices with >= t free and K_n(t) their count,
this is ``total_n - sum_m p_m * fits_nm * U_n(g_m)``, which needs U and K only at the distinct g_m
values (a handful) rather than per shape and device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._workload import TargetWorkload


@dataclass(frozen=True)
class FragModel:
    """A TargetWorkload prepared for ``fragmentation`` (thresholds, model access table)."""

    thresholds: np.ndarray  # (t,) distinct per-GPU shares of the GPU shapes
    t_index: np.ndarray  # (k,) threshold column of each GPU shape
    count: np.ndarray  # (k,) devices each GPU shape needs
    cpu: np.ndarray  # (k,) millicores each GPU shape needs
    weight: np.ndarray  # (k,) p_m of each GPU shape
    access: np.ndarray  # (n_models + 1, k) bool: row = model id + 1 (row 0: nodes without GPUs)

    @classmethod
    def build(cls, target: TargetWorkload, n_models: int) -> FragModel:
        gpu = np.flatnonzero(target.gpu_milli > 0)
        thresholds, t_index = np.unique(target.gpu_milli[gpu], return_inverse=True)
        access = np.zeros((n_models + 1, len(gpu)), dtype=bool)
        for j, m in enumerate(gpu):
            models = target.models[m]
            if models is None:
                access[1:, j] = True
            else:
                access[[i + 1 for i in models if i < n_models], j] = True
        return cls(
            thresholds=thresholds.astype(np.int64),
            t_index=t_index.astype(np.intp),
            count=target.num_gpu[gpu],
            cpu=target.cpu[gpu],
            weight=target.weight[gpu],
            access=access,
        )


def fragmentation(fm: FragModel, gpu: np.ndarray, cpu: np.ndarray, model: np.ndarray) -> np.ndarray:
    """(k,) float: F(M) of k node states given as free GPU rows (k, g; -1 = no device), free CPU (k,)
    and model ids (k,)."""
    free = np.maximum(gpu, 0)
    total = free.sum(axis=1).astype(np.float64)
    if len(fm.weight) == 0:
        return total
    ge = free[:, :, None] >= fm.thresholds[None, None, :]  # (k, g, t)
    k_count = ge.sum(axis=1)  # (k, t) devices with room for each threshold
    usable = (free[:, :, None] * ge).sum(axis=1)  # (k, t) free share on those devices
    fits = fm.access[model + 1]  # (k, m)
    fits &= k_count[:, fm.t_index] >= fm.count
    fits &= cpu[:, None] >= fm.cpu
    return total - (fits * usable[:, fm.t_index]) @ fm.weight
