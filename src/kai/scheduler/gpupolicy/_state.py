"""What a GPU placement policy sees and answers: the cluster's free state, one pod's request, a placement.

Rules: plain arrays, no Session, no Snapshot. The caller (the fill-up benchmark today, the engine's
Placer once per-GPU accounting lands) owns a ``FreeState``, asks a policy for a ``Placement`` and
applies it with ``FreeState.take``. Units: CPU in millicores, GPU in milli-GPUs per device (1000 = a
whole GPU), memory in any unit as long as nodes and pods agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.scheduler.gpusharing import portion_fits

MILLI = 1000
N_TAGS = 9  # GpuClustering's affinity tags: column 0 = pods on a shared GPU, column k = pods of k whole GPUs


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod's request.

    ``gpu_milli`` is per GPU: a shared pod asks for one GPU with ``gpu_milli`` < 1000, a whole-GPU pod
    for ``num_gpu`` GPUs with ``gpu_milli`` = 1000, a CPU-only pod for none (both 0). ``models`` lists
    the GPU model ids the pod accepts (ids index ``FreeState.model``); None accepts any model.
    """

    cpu: int
    memory: int
    num_gpu: int = 0
    gpu_milli: int = 0
    models: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.cpu < 0 or self.memory < 0 or self.num_gpu < 0 or self.gpu_milli < 0:
            raise ValueError(f"pod request must not be negative: {self}")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise ValueError(f"num_gpu and gpu_milli must both be 0 or both positive: {self}")
        if self.gpu_milli > MILLI:
            raise ValueError(f"gpu_milli is per GPU and at most {MILLI}: {self}")
        if 0 < self.gpu_milli < MILLI and self.num_gpu != 1:
            raise ValueError(f"a shared-GPU pod (gpu_milli < {MILLI}) asks for exactly one GPU: {self}")

    @property
    def gpu_task(self) -> bool:
        return self.num_gpu > 0

    @property
    def shared(self) -> bool:
        """A fraction of one GPU."""
        return 0 < self.gpu_milli < MILLI

    @property
    def total_gpu(self) -> int:
        """Milli-GPUs in all: ``num_gpu * gpu_milli``."""
        return self.num_gpu * self.gpu_milli

    @property
    def tag(self) -> int:
        """GpuClustering's affinity tag: 0 for a shared GPU, k for k whole GPUs, -1 for a CPU-only pod."""
        if not self.gpu_task:
            return -1
        return 0 if self.shared else min(self.num_gpu, N_TAGS - 1)


@dataclass(frozen=True, slots=True)
class Placement:
    node: int  # row in the FreeState
    gpus: tuple[int, ...]  # device indices on that node; () for a CPU-only pod


@dataclass(slots=True)
class FreeState:
    """The cluster's free resources, one row per node. ``take`` updates it in place."""

    cpu: np.ndarray  # (n,) int64 free millicores
    memory: np.ndarray  # (n,) int64 free memory
    gpu: np.ndarray  # (n, max_gpus) int64 free milli-GPU per device; -1 = no such device
    model: np.ndarray  # (n,) int64 GPU model id of the node; -1 = no GPUs
    tags: np.ndarray  # (n, N_TAGS) int64 GPU pods on the node by affinity tag (GpuClustering reads it)
    rank: np.ndarray  # (n,) int64 tie-break order: among equally good nodes the lowest rank wins

    @classmethod
    def idle(
        cls,
        cpu: np.ndarray,
        memory: np.ndarray,
        gpu_count: np.ndarray,
        model: np.ndarray,
        rank: np.ndarray | None = None,
    ) -> FreeState:
        """Empty nodes with the given capacities (GPUs of ``gpu_count`` whole devices each). *rank*
        defaults to the row order (KAI breaks ties by node name, i.e. rows sorted by name)."""
        gpu_count = np.asarray(gpu_count, dtype=np.int64)
        width = max(int(gpu_count.max(initial=0)), 1)
        gpu = np.where(np.arange(width)[None, :] < gpu_count[:, None], MILLI, -1).astype(np.int64)
        n = len(gpu_count)
        return cls(
            cpu=np.array(cpu, dtype=np.int64),
            memory=np.array(memory, dtype=np.int64),
            gpu=gpu,
            model=np.array(model, dtype=np.int64),
            tags=np.zeros((n, N_TAGS), dtype=np.int64),
            rank=np.arange(n, dtype=np.int64) if rank is None else np.array(rank, dtype=np.int64),
        )

    @property
    def n(self) -> int:
        return len(self.cpu)

    def copy(self) -> FreeState:
        return FreeState(
            self.cpu.copy(), self.memory.copy(), self.gpu.copy(), self.model.copy(), self.tags.copy(), self.rank.copy()
        )

    def take(self, pod: PodRequest, placement: Placement) -> None:
        """Account *pod* on *placement* (the caller checked it fits, e.g. it came from a policy)."""
        row = placement.node
        self.cpu[row] -= pod.cpu
        self.memory[row] -= pod.memory
        if pod.gpu_task:
            self.gpu[row, list(placement.gpus)] -= pod.gpu_milli
            self.tags[row, pod.tag] += 1


def model_allowed(state: FreeState, models: tuple[int, ...] | None) -> np.ndarray:
    """(n,) bool: nodes whose GPU model the pod accepts (nodes without GPUs never)."""
    if models is None:
        return state.model >= 0
    return np.isin(state.model, models)


def feasible(state: FreeState, pod: PodRequest, allowed: np.ndarray | None = None) -> np.ndarray:
    """(n,) bool: nodes with the CPU, memory and GPUs (model, count of devices with room) *pod* needs,
    among *allowed* (the caller's other predicates: selectors, taints, ...; None = all nodes)."""
    ok = (state.cpu >= pod.cpu) & (state.memory >= pod.memory)
    if allowed is not None:
        ok &= allowed
    if pod.gpu_task:
        ok &= model_allowed(state, pod.models)
        # the engine's one GPU-fit rule over this per-device model: every device is a GPU with its free share
        ok &= portion_fits(pod.gpu_milli, MILLI, (state.gpu >= pod.gpu_milli).sum(axis=1), 0, pod.num_gpu)
    return ok


def whole_gpus(free_row: np.ndarray, count: int) -> tuple[int, ...]:
    """The first *count* fully free devices of a node, by index (the authors' AllocateExclusiveGpuId)."""
    return tuple(int(i) for i in np.flatnonzero(free_row == MILLI)[:count])


def fullest_gpu(free_row: np.ndarray, milli: int) -> int:
    """The device with the least free share that still fits *milli*; the lower index on ties (gpupack)."""
    room = np.where(free_row >= milli, free_row, np.iinfo(np.int64).max)
    return int(room.argmin())


def gpus_for(free_row: np.ndarray, pod: PodRequest) -> tuple[int, ...]:
    """Devices for *pod* on a node: the fullest fitting one if shared, else the first fully free ones."""
    if not pod.gpu_task:
        return ()
    if pod.shared:
        return (fullest_gpu(free_row, pod.gpu_milli),)
    return whole_gpus(free_row, pod.num_gpu)


@dataclass(frozen=True, slots=True)
class SharedOptions:
    """Where a shared pod could go on each of k candidate nodes: one option per distinct free share
    with room (devices with equal free shares give equal results, so each value is scored once)."""

    shares: np.ndarray  # (k, g) each row's free shares with room, sorted ascending; -1 = no option
    row: np.ndarray  # (c,) candidate index (0..k-1) of each option
    col: np.ndarray  # (c,) column of each option in ``shares``
    free: np.ndarray  # (c,) the option's free share before the pod

    @classmethod
    def of(cls, gpu: np.ndarray, milli: int) -> SharedOptions:
        shares = np.sort(np.where(gpu >= milli, gpu, -1), axis=1)
        distinct = shares >= 0
        distinct[:, 1:] &= shares[:, 1:] != shares[:, :-1]
        row, col = np.nonzero(distinct)
        return cls(shares, row, col, shares[row, col])

    def grid(self, values: np.ndarray) -> np.ndarray:
        """(k, g) grid of per-option *values*; -inf where there is no option."""
        out = np.full(self.shares.shape, -np.inf)
        out[self.row, self.col] = values
        return out


class RowTracker:
    """Which nodes' free CPU, memory or GPU changed since the last call (a copy is kept)."""

    def __init__(self) -> None:
        self._gpu: np.ndarray | None = None
        self._cpu = np.zeros(0, dtype=np.int64)
        self._mem = np.zeros(0, dtype=np.int64)

    def changed(self, state: FreeState) -> np.ndarray | None:
        """Rows changed since the last call; None when everything must be (re)computed."""
        if self._gpu is None or self._gpu.shape != state.gpu.shape:
            self._gpu, self._cpu, self._mem = state.gpu.copy(), state.cpu.copy(), state.memory.copy()
            return None
        rows = np.flatnonzero(
            (state.gpu != self._gpu).any(axis=1) | (state.cpu != self._cpu) | (state.memory != self._mem)
        )
        if len(rows):
            self._gpu[rows], self._cpu[rows], self._mem[rows] = state.gpu[rows], state.cpu[rows], state.memory[rows]
        return rows


def pick(score: np.ndarray, ok: np.ndarray, rank: np.ndarray) -> int:
    """The node with the highest *score* among those where *ok*, the lowest *rank* among equals; -1 if
    no node is ok. (The FGD authors' kube-scheduler fork breaks ties by the smallest node name, and
    their simulator prefixes node names with a random permutation: a random but fixed node order.)"""
    if not ok.any():
        return -1
    s = np.where(ok, score, -np.inf)
    best = np.flatnonzero(s == s.max())
    return int(best[0]) if len(best) == 1 else int(best[rank[best].argmin()])


class GpuPolicy:
    """A placement policy. ``choose`` is the one required method; ``observe`` lets a policy that learns
    the workload online count each arriving pod (called once per pod, before ``choose``)."""

    name = ""

    def choose(
        self, state: FreeState, pod: PodRequest, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> Placement | None:
        """The node and devices for *pod*, or None if no node can take it. Only nodes where *allowed*
        (the caller's other predicates; None = all) are considered. Reads *state*, never changes it;
        *rng* is the only source of randomness (the Random policy)."""
        raise NotImplementedError

    def observe(self, pod: PodRequest) -> None:
        """A pod arrived (placed or not). Default: nothing to learn."""
