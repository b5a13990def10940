"""Stranded GPU share: FGD's fragmentation measure, extended to count CPU and memory as well.

FGD counts a node's free GPU share as usable by a shape m when at least one m pod fits. On this
trace that misses the main way GPU share is lost: nodes run out of CPU (or memory) while GPU share is
left, because the GPU pods ask for more CPU per GPU than many nodes have (the G2 nodes have 12 cores
per GPU; the 1-GPU pods ask 11-18). So kai measures, per shape m, the GPU share that m pods could
still take on the node, limited by every resource:

    n_m = min(sum_i floor(free_i / g_m) // c_m,  cpu_free // cpu_m,  memory_free // memory_m)
    stranded_n = total_free_n - sum_m p_m * access_nm * n_m * g_m * c_m

(CPU-only shapes take no GPU share: their p_m * total_free counts as stranded, as in FGD.) A pod
goes where stranded share grows least. The sums of floor(free_i / g) per distinct g are kept per
node and updated only for rows that changed, as ``FragCache`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._state import MILLI, FreeState, PodRequest, RowTracker, SharedOptions
from ._workload import TargetWorkload


@dataclass(frozen=True)
class CapacityModel:
    """A TargetWorkload prepared for ``stranded``: its GPU shapes, thresholds and model access."""

    thresholds: np.ndarray  # (t,) distinct per-GPU shares of the GPU shapes
    t_index: np.ndarray  # (k,) threshold column of each GPU shape
    count: np.ndarray  # (k,) devices per pod
    share: np.ndarray  # (k,) float milli-GPU per pod (g * c)
    cpu: np.ndarray  # (k,) float millicores per pod (>= 1 to keep the division finite)
    memory: np.ndarray  # (k,) float memory per pod (>= 1)
    weight: np.ndarray  # (k,) p_m
    value: np.ndarray  # (k,) p_m * share: expected share per pod that fits
    access: np.ndarray  # (n_models + 1, k) bool: row = model id + 1

    @classmethod
    def build(cls, target: TargetWorkload, n_models: int) -> CapacityModel:
        gpu, thresholds, t_index, access = target.gpu_shapes(n_models)
        memory = target.memory[gpu] if target.memory is not None else np.zeros(len(gpu))
        return cls(
            thresholds=thresholds.astype(np.int64),
            t_index=t_index.astype(np.intp).ravel(),
            count=target.num_gpu[gpu],
            share=(target.gpu_milli[gpu] * target.num_gpu[gpu]).astype(np.float64),
            cpu=np.maximum(target.cpu[gpu], 1).astype(np.float64),
            memory=np.maximum(memory, 1.0),
            weight=target.weight[gpu],
            value=target.weight[gpu] * target.gpu_milli[gpu] * target.num_gpu[gpu],
            access=access,
        )


def instances(free: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(r, t) int64: sum over devices of floor(free_i / t), for each threshold t."""
    return (np.maximum(free, 0)[:, :, None] // thresholds[None, None, :]).sum(axis=1)


def stranded(
    cm: CapacityModel,
    inst: np.ndarray,
    total: np.ndarray,
    cpu: np.ndarray,
    memory: np.ndarray,
    model: np.ndarray,
) -> np.ndarray:
    """(r,) float: stranded GPU share of r node states (see the module docstring)."""
    total = total.astype(np.float64)
    if len(cm.weight) == 0:
        return total
    # floor(a / b) in float64 is exact for these integer magnitudes (far below 2**26) and much
    # faster than floor_divide
    n = np.floor(inst[:, cm.t_index] / cm.count)
    np.minimum(n, np.floor(cpu[:, None] / cm.cpu), out=n)
    np.minimum(n, np.floor(memory[:, None] / cm.memory), out=n)
    n *= cm.access[model + 1]
    return total - n @ cm.value


class CapacityCache:
    """Per-node instance sums, total free share and stranded share, in step with a FreeState: ``sync``
    diffs it itself, ``refresh`` takes the changed rows (only those are recomputed; every row when the
    thresholds or the model change)."""

    def __init__(self) -> None:
        self._tracker = RowTracker()
        self._thresholds: np.ndarray | None = None
        self._cm: CapacityModel | None = None
        self.inst = np.zeros((0, 0), dtype=np.int64)
        self.total = np.zeros(0, dtype=np.int64)
        self.value = np.zeros(0)

    def sync(self, cm: CapacityModel, state: FreeState) -> None:
        self.refresh(cm, state, self._tracker.changed(state))

    def refresh(self, cm: CapacityModel, state: FreeState, changed: np.ndarray | None) -> None:
        gpu, cpu, mem = state.gpu, state.cpu, state.memory
        if changed is None or self._thresholds is None or not np.array_equal(self._thresholds, cm.thresholds):
            self._thresholds = cm.thresholds.copy()
            self.inst = instances(gpu, cm.thresholds)
            self.total = np.maximum(gpu, 0).sum(axis=1)
            self._cm = None
        elif len(changed):
            g = gpu[changed]
            self.inst[changed] = instances(g, cm.thresholds)
            self.total[changed] = np.maximum(g, 0).sum(axis=1)
            if self._cm is cm:
                self.value[changed] = stranded(
                    cm, self.inst[changed], self.total[changed], cpu[changed], mem[changed], state.model[changed]
                )
        if self._cm is not cm:
            self._cm = cm
            self.value = stranded(cm, self.inst, self.total, cpu, mem, state.model)


def stranded_grid(
    cm: CapacityModel,
    cache: CapacityCache,
    state: FreeState,
    pod: PodRequest,
    rows: np.ndarray,
    opts: SharedOptions | None,
) -> np.ndarray:
    """before - after stranded share for the feasible *rows* (*cache* in step with *state*), in the
    layout of ``frag_grid``."""
    inst, total, before = cache.inst[rows], cache.total[rows], cache.value[rows]
    model = state.model[rows]
    cpu_after = state.cpu[rows] - pod.cpu
    mem_after = state.memory[rows] - pod.memory
    if not pod.gpu_task:
        return (before - stranded(cm, inst, total, cpu_after, mem_after, model))[:, None]
    if opts is None:
        c = pod.num_gpu
        after = stranded(cm, inst - c * (MILLI // cm.thresholds), total - MILLI * c, cpu_after, mem_after, model)
        return (before - after)[:, None]
    r, f = opts.row, opts.free
    inst_after = inst[r] - f[:, None] // cm.thresholds + (f - pod.gpu_milli)[:, None] // cm.thresholds
    after = stranded(cm, inst_after, total[r] - pod.gpu_milli, cpu_after[r], mem_after[r], model[r])
    return opts.grid(before[r] - after)


def stranded_deltas(
    cm: CapacityModel, cache: CapacityCache, state: FreeState, pod: PodRequest, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """before - after stranded share for the feasible *rows*, in the layout of ``frag_deltas``."""
    cache.sync(cm, state)
    opts = SharedOptions.of(state.gpu[rows], pod.gpu_milli) if pod.shared else None
    return stranded_grid(cm, cache, state, pod, rows, opts), (opts.shares if opts is not None else None)
