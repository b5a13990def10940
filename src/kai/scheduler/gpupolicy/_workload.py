"""The target workload: the pod shapes a cluster expects, with their frequencies (FGD's M and p_m).

FGD scores a placement by how much it fragments the cluster *for the pods that will come*. Those are
described by the most frequent shapes (cpu, gpu_milli, num_gpu, models) that together cover 95% of
pods, renormalized (the authors' GetTypicalPods with podPopularityThreshold 95, step 1, CPU-only pods
included). The FGD baseline builds it from the whole trace up front; kai's own policy learns it online
from the pods it has seen (``ShapeCounter``), which a real scheduler can do.

Memory is not part of a shape: the authors' fragmentation measure ignores it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._state import PodRequest

Shape = tuple[int, int, int, tuple[int, ...] | None]  # (cpu, gpu_milli, num_gpu, models)


def shape_of(pod: PodRequest) -> Shape:
    return (pod.cpu, pod.gpu_milli, pod.num_gpu, pod.models if pod.gpu_task else None)


@dataclass(frozen=True)
class TargetWorkload:
    """Shapes and weights (summing to 1), as arrays for vectorized scoring."""

    cpu: np.ndarray  # (m,) int64 millicores
    gpu_milli: np.ndarray  # (m,) int64 per GPU; 0 for CPU-only shapes
    num_gpu: np.ndarray  # (m,) int64
    models: tuple[tuple[int, ...] | None, ...]  # (m,) accepted model ids; None = any
    weight: np.ndarray  # (m,) float64
    memory: np.ndarray | None = None  # (m,) float64 mean memory of the pods of each shape (if known)

    @classmethod
    def from_counts(
        cls, counts: dict[Shape, float], coverage: float = 0.95, memory: dict[Shape, float] | None = None
    ) -> TargetWorkload:
        """The most frequent shapes covering *coverage* of the total count, renormalized.

        Order: count descending, then the shape descending (the authors' tie-break: cpu, gpu, count).
        """
        if not counts:
            return cls.empty()
        items = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2]), reverse=True)
        total = float(sum(counts.values()))
        chosen: list[tuple[Shape, float]] = []
        cum = 0.0
        for shape, c in items:
            if cum >= coverage * total:
                break
            chosen.append((shape, c))
            cum += c
        weight = np.array([c for _, c in chosen], dtype=np.float64)
        return cls(
            cpu=np.array([s[0] for s, _ in chosen], dtype=np.int64),
            gpu_milli=np.array([s[1] for s, _ in chosen], dtype=np.int64),
            num_gpu=np.array([s[2] for s, _ in chosen], dtype=np.int64),
            models=tuple(s[3] for s, _ in chosen),
            weight=weight / weight.sum(),
            memory=None if memory is None else np.array([memory[s] / c for s, c in chosen], dtype=np.float64),
        )

    @classmethod
    def from_pods(cls, pods: Iterable[PodRequest], coverage: float = 0.95) -> TargetWorkload:
        counts: dict[Shape, float] = {}
        memory: dict[Shape, float] = {}
        for p in pods:
            k = shape_of(p)
            counts[k] = counts.get(k, 0.0) + 1.0
            memory[k] = memory.get(k, 0.0) + p.memory
        return cls.from_counts(counts, coverage, memory)

    @classmethod
    def empty(cls) -> TargetWorkload:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, (), np.zeros(0))

    def __len__(self) -> int:
        return len(self.weight)

    def gpu_shapes(self, n_models: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The GPU shapes as both fragmentation measures index them: (shape rows, distinct per-GPU requests,
        each shape's column among those, access[model id + 1, shape]); row 0 of access is a node without
        GPUs, which no GPU shape can use."""
        gpu = np.flatnonzero(self.gpu_milli > 0)
        thresholds, t_index = np.unique(self.gpu_milli[gpu], return_inverse=True)
        access = np.zeros((n_models + 1, len(gpu)), dtype=bool)
        for j, m in enumerate(gpu):
            models = self.models[m]
            if models is None:
                access[1:, j] = True
            else:
                access[[i + 1 for i in models if i < n_models], j] = True
        return gpu, thresholds, t_index, access


class ShapeCounter:
    """Counts the shapes of the pods seen so far; ``target()`` is the workload they describe.

    The counts may decay (``half_life`` pods) so the target follows a drifting workload. ``target()``
    is rebuilt when the pods seen since the last rebuild reach *refresh* (a fraction) of all seen, so a
    long run rebuilds it O(log n) times and its consumers can cache what they derive from it.
    """

    def __init__(self, coverage: float = 0.95, half_life: float | None = None, refresh: float = 0.02) -> None:
        self.coverage = coverage
        self._decay = 0.5 ** (1.0 / half_life) if half_life else 1.0
        self._counts: dict[Shape, float] = {}
        self._memory: dict[Shape, float] = {}  # summed memory of each shape's pods (same scale as counts)
        self._scale = 1.0  # decay is applied lazily: a new pod counts 1 / _scale of today's unit
        self._target: TargetWorkload | None = None
        self._refresh = refresh
        self._built_at = 0
        self.seen = 0

    def observe(self, pod: PodRequest) -> None:
        self.seen += 1
        if self._decay != 1.0:
            self._scale *= self._decay
            if self._scale < 1e-100:  # renormalize before underflow
                self._counts = {k: v * self._scale for k, v in self._counts.items()}
                self._memory = {k: v * self._scale for k, v in self._memory.items()}
                self._scale = 1.0
        k = shape_of(pod)
        self._counts[k] = self._counts.get(k, 0.0) + 1.0 / self._scale
        self._memory[k] = self._memory.get(k, 0.0) + pod.memory / self._scale

    def target(self) -> TargetWorkload:
        if self._target is None or self.seen - self._built_at > self._refresh * self.seen:
            self._target = TargetWorkload.from_counts(self._counts, self.coverage, self._memory)
            self._built_at = self.seen
        return self._target
