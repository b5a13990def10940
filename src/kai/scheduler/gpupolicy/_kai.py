"""kai's placement policies.

``KaiBinpack`` is what kai (and KAI Scheduler) do by default: binpack nodes, gpupack GPUs. A GPU pod
goes to the feasible node with the least free GPU share, a CPU-only pod to the one with the least
free CPU; ties go to the lowest ``FreeState.rank`` (KAI: node name ascending). A shared pod takes the fullest GPU with
room, a whole-GPU pod the first fully free GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._capacity import CapacityCache, CapacityModel, stranded_grid
from ._fgd import frag_grid, shared_device
from ._frag import FragCache, FragModel
from ._state import FreeState, GpuPolicy, Placement, PodRequest, RowTracker, SharedOptions, feasible, gpus_for, pick
from ._workload import ShapeCounter, TargetWorkload

_MEMO_SIZE = 512  # pod requests whose Δ is kept (about 40 MB at 1,200 nodes x 8 GPUs)
QUANTUM = 80.0  # milli-GPU: the width of a score bin (see Fragmentation)
FGD_WEIGHT = 0.75  # weight of FGD's fragmentation in the score; the stranded share gets the rest


class KaiBinpack(GpuPolicy):
    name = "binpack"

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        ok = feasible(state, pod, allowed)
        free = np.maximum(state.gpu, 0).sum(axis=1) if pod.gpu_task else state.cpu
        node = pick(-free.astype(np.float64), ok, state.rank)
        return None if node < 0 else Placement(node, gpus_for(state.gpu[node], pod))


@dataclass(slots=True)
class _Memo:
    at: np.ndarray  # (n,) int64 version at which each node's Δ was computed; -1 = never
    delta: np.ndarray  # (n, w) float64 Δ grid rows
    shares: np.ndarray | None  # (n, g) int64 option shares (shared pods)

    @classmethod
    def empty(cls, state: FreeState, pod: PodRequest) -> _Memo:
        width = state.gpu.shape[1] if pod.shared else 1
        shares = np.full(state.gpu.shape, -1, dtype=np.int64) if pod.shared else None
        return cls(np.full(state.n, -1, dtype=np.int64), np.full((state.n, width), -np.inf), shares)


class Fragmentation(GpuPolicy):
    """kai's fragmentation-aware policy: FGD's idea with a measure that also sees CPU and memory,
    learned online, and a coarse score that packs.

    * Target workload: learned from the pods seen so far (``observe``), not given up front (FGD
      reads the trace's shape distribution before it starts).
    * Measure: 0.75 x FGD's fragmentation (free GPU share no target shape can use for lack of GPU
      room) + 0.25 x kai's stranded share (free GPU share the target shapes cannot take because the
      node lacks devices with room, CPU or memory; see ``_capacity``). The second is what sends
      CPU-heavy pods and CPU-only pods to CPU-rich nodes and keeps CPU next to free GPUs. (Weights
      0.5 and 0.9 did worse on the traces; see docs/trace.md.)
    * Score: Δ = before - after of that measure, in bins of ``quantum`` milli-GPU; among nodes in the
      best bin the lowest ``FreeState.rank`` wins. The coarse bins matter: placements that differ by
      a few milli-GPU of fragmentation are treated as equal and go to the same nodes in a fixed order,
      which packs pods and leaves whole nodes free (exact Δ spreads pods and does worse).

    Inside the node a shared pod takes the first device whose free share scores best; a whole-GPU
    pod the first fully free devices.
    """

    name = "fragmentation"

    def __init__(
        self,
        n_models: int,
        *,
        target: TargetWorkload | None = None,
        quantum: float = QUANTUM,
        fgd_weight: float = FGD_WEIGHT,
        half_life: float | None = None,
    ) -> None:
        self.n_models = n_models
        self.fixed = target
        self.quantum = quantum
        self.fgd_weight = fgd_weight
        self.counter = ShapeCounter(half_life=half_life)
        self._tracker = RowTracker()
        self._frag_cache = FragCache()
        self._cap_cache = CapacityCache()
        self._models: tuple[TargetWorkload, FragModel, CapacityModel] | None = None
        # Δ per pod request, per node, reused until the node changes (pods repeat a few hundred shapes)
        self._memo: dict[PodRequest, _Memo] = {}
        self._version = 0
        self._stamp = np.zeros(0, dtype=np.int64)  # (n,) version at which each node last changed

    def observe(self, pod: PodRequest) -> None:
        self.counter.observe(pod)

    def target(self) -> TargetWorkload:
        """The workload the policy assumes: the fixed one, else what it has seen."""
        return self.fixed if self.fixed is not None else self.counter.target()

    def _prepared(self) -> tuple[FragModel, CapacityModel]:
        target = self.target()
        if self._models is None or self._models[0] is not target:
            self._models = (target, FragModel.build(target, self.n_models), CapacityModel.build(target, self.n_models))
            self._memo.clear()
        return self._models[1], self._models[2]

    def deltas(self, state: FreeState, pod: PodRequest, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Δ of the combined measure for the feasible *rows* (layout of ``frag_deltas``).

        A node's Δ for a pod request depends only on that node's free state and the target workload,
        so it is kept per request and recomputed only for nodes that changed since."""
        fm, cm = self._prepared()
        changed = self._tracker.changed(state)
        self._frag_cache.refresh(fm, state, changed)
        self._cap_cache.refresh(cm, state, changed)
        self._version += 1
        if changed is None:
            self._stamp = np.full(state.n, self._version, dtype=np.int64)
            self._memo.clear()
        elif len(changed):
            self._stamp[changed] = self._version
        memo = self._memo.get(pod)
        if memo is None:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            memo = self._memo[pod] = _Memo.empty(state, pod)
        stale = rows[memo.at[rows] < self._stamp[rows]]
        if len(stale):
            opts = SharedOptions.of(state.gpu[stale], pod.gpu_milli) if pod.shared else None
            frag = frag_grid(fm, self._frag_cache, state, pod, stale, opts)
            stranded = stranded_grid(cm, self._cap_cache, state, pod, stale, opts)
            memo.delta[stale] = self.fgd_weight * frag + (1.0 - self.fgd_weight) * stranded
            memo.at[stale] = self._version
            if opts is not None and memo.shares is not None:
                memo.shares[stale] = opts.shares
        return memo.delta[rows], (memo.shares[rows] if memo.shares is not None else None)

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        rows = np.flatnonzero(feasible(state, pod, allowed))
        if len(rows) == 0:
            return None
        delta, shares = self.deltas(state, pod, rows)
        score = np.floor(delta / self.quantum)
        k = pick(score.max(axis=1), np.ones(len(rows), dtype=bool), state.rank[rows])
        node = int(rows[k])
        if shares is not None:
            return Placement(node, (shared_device(state.gpu[node], score[k], shares[k]),))
        return Placement(node, gpus_for(state.gpu[node], pod))
