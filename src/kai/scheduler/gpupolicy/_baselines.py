"""The FGD paper's baseline policies, as its authors implemented them (hkust-adsl/kubernetes-scheduler-simulator).

Each scores every feasible node with the integer score the authors' kube-scheduler plugin returns
(0..100, truncated as Go's int64() does) and takes the best node, the lowest ``FreeState.rank``
among equals (the authors' kube-scheduler fork breaks ties by node name, which their simulator
randomizes per seed). The integer scores matter: they make many nodes tie, and the fixed tie-break
order packs those ties onto the same nodes, which is part of how these policies behave. Inside the
chosen node a shared pod takes the fullest GPU that fits ("best" GPU selection; Random picks a
random fitting GPU) and a whole-GPU pod the first fully free GPUs by index.

Max spec (used to normalize): 128 cores and 8 GPUs, the authors' constants.
"""

from __future__ import annotations

import numpy as np

from ._state import MILLI, FreeState, GpuPolicy, Placement, PodRequest, feasible, gpus_for, pick, whole_gpus

MAX_CPU = 128_000  # millicores
MAX_GPU = 8 * MILLI  # milli-GPUs


def _free_gpu(state: FreeState) -> np.ndarray:
    """(n,) int64 total free milli-GPU per node."""
    return np.maximum(state.gpu, 0).sum(axis=1)


def _place(state: FreeState, pod: PodRequest, node: int) -> Placement | None:
    if node < 0:
        return None
    return Placement(node, gpus_for(state.gpu[node], pod))


class RandomFit(GpuPolicy):
    """A random feasible node; a shared pod takes a random GPU with room on it."""

    name = "random"

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        rows = np.flatnonzero(feasible(state, pod, allowed))
        if len(rows) == 0:
            return None
        node = int(rows[rng.integers(len(rows))])
        row = state.gpu[node]
        if pod.shared:
            fitting = np.flatnonzero(row >= pod.gpu_milli)
            return Placement(node, (int(fitting[rng.integers(len(fitting))]),))
        return Placement(node, whole_gpus(row, pod.num_gpu) if pod.gpu_task else ())


class DotProduct(GpuPolicy):
    """Tetris's alignment, inverted: the node whose free (cpu, gpu) has the smallest dot product with
    the request, both normalized by the max spec ("merge" dimensions, "max" normalization).

    score = trunc(100 * (1 - (cpu_free/128c * cpu/128c + gpu_free/8 * gpu/8) / 2))
    """

    name = "dotprod"

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        ok = feasible(state, pod, allowed)
        dot = (state.cpu / MAX_CPU) * (pod.cpu / MAX_CPU) + (_free_gpu(state) / MAX_GPU) * (pod.total_gpu / MAX_GPU)
        score = np.trunc((1.0 - dot / 2) * 100)
        return _place(state, pod, pick(score, ok, state.rank))


class GpuClustering(GpuPolicy):
    """Keep pods of one GPU kind together (shared, 1-GPU, 2-GPU, ...): score bands of 25 points,

    75..100 the node runs only pods of this kind, 50..75 this kind among others, 25..50 no GPU pods
    yet, 0..25 only other kinds; inside a band, fuller nodes first (25 * used / 8 GPUs). CPU-only
    pods score 0 everywhere (a random node).
    """

    name = "gpuclustering"

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        ok = feasible(state, pod, allowed)
        if not pod.gpu_task:
            return _place(state, pod, pick(np.zeros(state.n), ok, state.rank))
        fill = (25 * (MAX_GPU - _free_gpu(state))) // MAX_GPU
        kinds = (state.tags > 0).sum(axis=1)
        same = state.tags[:, pod.tag] > 0
        band = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return _place(state, pod, pick((fill + band).astype(np.float64), ok, state.rank))


class GpuPacking(GpuPolicy):
    """Prefer GPUs already in use, then used nodes, then idle nodes (the authors' three cases):

    * an idle node (every GPU fully free): max(33 - free GPUs, free GPUs);
    * the pod needs fully free GPUs on a used node: max(50 - GPUs it takes, 33);
    * a shared pod fits on a partly used GPU: max(100 - (free % of that GPU) // 10, 50), i.e. 90..100,
      fuller GPUs first.

    CPU-only pods score 0 everywhere (a random node).
    """

    name = "gpupacking"

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        ok = feasible(state, pod, allowed)
        if not pod.gpu_task:
            return _place(state, pod, pick(np.zeros(state.n), ok, state.rank))
        fully = (state.gpu == MILLI).sum(axis=1)
        idle = fully == (state.gpu >= 0).sum(axis=1)
        score = np.where(idle, np.maximum(33 - fully, fully), 0)
        if pod.shared:
            room = np.where(state.gpu >= pod.gpu_milli, state.gpu, np.iinfo(np.int64).max).min(axis=1)
            used_gpu = np.maximum(100 - (room * 100 // MILLI) // 10, 50)
            score = np.where(idle, score, np.where(room == MILLI, max(50 - 1, 33), used_gpu))
        else:
            score = np.where(idle, score, max(50 - pod.num_gpu, 33))
        return _place(state, pod, pick(score.astype(np.float64), ok, state.rank))


class BestFit(GpuPolicy):
    """The node left with the least free (cpu, gpu) after the pod, each normalized by the max spec:

    score = trunc(100 * (1 - 0.5 * (cpu_free - cpu) / 128c - 0.5 * (gpu_free - gpu) / 8))
    (the authors then min-max normalize across nodes, which keeps the same best nodes).
    """

    name = "bestfit"

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        ok = feasible(state, pod, allowed)
        left = (state.cpu - pod.cpu) / MAX_CPU * 0.5 + (_free_gpu(state) - pod.total_gpu) / MAX_GPU * 0.5
        score = np.trunc((1.0 - left) * 100)
        return _place(state, pod, pick(score, ok, state.rank))
