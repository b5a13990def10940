"""A GPU placement policy (``kai.scheduler.gpupolicy``) as the Placer's node chooser: kai's
``placementStrategy.gpu: <policy>`` (fragmentation, bestfit, fgd, gpupacking, gpuclustering, dotprod,
random).

Theory of operation. The Placer asks ``PolicyPlacer.best_node`` first for every task. The policy only
chooses among the nodes the engine allows: the task's static predicates (selectors, taints, affinity,
...), the caller's restriction (a topology domain; with a topology preference, only the most preferred
of those nodes) and a fit on idle resources now, all from the Placer's own candidate arrays. When no
such node exists, or the policy declines, the Placer's own path decides unchanged (binpack, and
pipelining onto resources being released). Nodes are the Session's rows, ranked by name (KAI's
tie-break), so a policy's ties go to the smallest node name.

The policy reads a ``FreeState`` built from the Session, one per Session, brought up to date before
each question by re-reading only the rows in ``Session.node_log`` since the last one (every change,
rollbacks included, lands there, exactly as the Placer's score caches follow it):

* cpu, memory: the node's idle millicores and bytes;
* gpu: per device (a GPU slot of ``GpuTable``), the milli-GPU free now. A GPU group (a slot holding
  shared pods that are not all releasing) has ``idle units * 1000 // cap`` (cap = the node's GPU
  memory in units); the node's whole idle GPUs are its first slots without shared pods, 1000 each;
  other devices (held by whole-GPU pods, or by releasing shared pods) have 0; -1 past the node's GPUs;
* model: the id of the node's ``nvidia.com/gpu.product`` label among the GPU nodes' distinct values
  (sorted; a GPU node without the label has the id of ""), -1 on a node without GPUs;
* tags (gpuclustering only): GPU pods per kind on the node, counted over the snapshot's pods and the
  pods this policy placed since (pods moved by other paths are not counted: an approximation).

A task's request: CPU millicores and memory bytes; a whole-GPU task asks ``n`` devices of 1000; a
``gpu-fraction: f`` pod one device of ``f`` milli-GPU (exact: the Session takes ``f x cap / 1000``
units, the FreeState shows ``floor(idle x 1000 / cap)``); a ``gpu-memory: m`` pod one device of
``ceil(m x 1000 / M)`` milli-GPU where M is the smallest GPU memory (MiB) of the nodes the pod may use
(so on every such node it needs at most that share: a node the policy calls feasible can take it).
Multi-device fractions are left to the Placer's own path. The GPU models a pod accepts are those of
the GPU nodes its static predicates allow (None when that is all of them).

Purity per cycle: ``fgd`` and ``fragmentation`` take their target workload from the Snapshot's pods
(pending and running, in snapshot order), never from earlier cycles; ``random`` draws from a
generator seeded with ``the gpupolicy plugin's ``seed`` argument (``spec.args.gpu-policy-seed``, default 0)
once per Session. So a cycle's decisions are a function of its Snapshot and configuration.

GPU choice: for a shared pod, the device the policy picks is part of its answer (``Choice.gpus``), which
the caller hands to ``Statement.allocate``: exactly that slot (a fresh one when the device was a whole
idle GPU). A whole-GPU task's devices are not tracked by the engine (any whole idle GPUs are alike), so
nothing is chosen for it.
"""

from __future__ import annotations

import numpy as np

from kai.api import constants as C
from kai.scheduler.framework import Choice
from kai.scheduler.gpupolicy import (
    MILLI,
    N_TAGS,
    Fgd,
    Fragmentation,
    FreeState,
    GpuPolicy,
    PodRequest,
    TargetWorkload,
    make_policy,
)
from kai.scheduler.model import ACTIVE_ALLOCATED, ACTIVE_USED, CPU, GPU, MEMORY, TaskInfo, TaskStatus
from kai.scheduler.session import Session

_SCALAR_ROWS = 8  # up to this many changed nodes, the FreeState is refreshed row by row in Python


def model_ids(ssn: Session) -> tuple[np.ndarray, int]:
    """(n,) GPU model id of every node (-1 without GPUs) and the number of ids (see the module docstring)."""
    nodes = ssn.snap.nodes
    has_gpu = (nodes.allocatable[:, GPU] > 0) | (ssn.snap.gpus.pods > 0).any(axis=1) if nodes.n else np.zeros(0, bool)
    products = [lb.get(C.LABEL_GPU_PRODUCT, "") for lb in nodes.labels]
    names = sorted({p for p, g in zip(products, has_gpu.tolist(), strict=True) if g})
    index = {p: i for i, p in enumerate(names)}
    model = np.array([index[p] if g else -1 for p, g in zip(products, has_gpu.tolist(), strict=True)], dtype=np.int64)
    return model, len(names)


class PolicyPlacer:
    """The policy, its FreeState and what it needs per task, for one Session."""

    def __init__(self, ssn: Session, name: str, seed: int = 0) -> None:
        self.ssn = ssn
        self.name = name
        nodes = ssn.snap.nodes
        g = ssn.snap.gpus
        self.model, self.n_models = model_ids(ssn)
        self._cap = np.maximum(g.cap, 1)  # units per GPU
        self._count = nodes.allocatable[:, GPU] // MILLI  # devices per node (0 on a MIG-mixed node)
        self._cap_list, self._count_list = self._cap.tolist(), self._count.tolist()
        self._width = max(int(g.pods.shape[1]) if g.pods.ndim == 2 else 0, 1)
        self.rng = np.random.default_rng(seed)
        self._requests: dict[tuple[int, bytes], PodRequest | None] = {}
        self._models: dict[int, tuple[int, ...] | None] = {}  # per signature
        self._all_models = tuple(int(m) for m in np.unique(self.model[self.model >= 0]))
        self._clustering = self.name == "gpuclustering"
        self._on_node: dict[int, dict[int, int]] = {}  # gpuclustering: node -> {task: tag} candidates
        n = nodes.n
        self.state = FreeState(
            cpu=np.zeros(n, dtype=np.int64),
            memory=np.zeros(n, dtype=np.int64),
            gpu=np.full((n, self._width), -1, dtype=np.int64),
            model=self.model,
            tags=np.zeros((n, N_TAGS), dtype=np.int64),
            rank=np.arange(n, dtype=np.int64),  # rows are sorted by node name: KAI's tie-break
        )
        if self._clustering:
            for t in ssn.snap.tasks:
                if t.status in ACTIVE_USED and t.node >= 0:
                    tag = self._tag(t)
                    if tag >= 0:
                        self._on_node.setdefault(t.node, {})[t.index] = tag
        self._refresh(slice(None))
        self._synced = len(ssn.node_log)
        self.policy: GpuPolicy = self._make()
        self.placed = 0  # placements the policy chose (for tests and stats)

    # --- the FreeState ------------------------------------------------------------------------------

    def _gpu_rows(self, rows: np.ndarray | slice) -> np.ndarray:
        ssn = self.ssn
        idle, _, pods, gone = ssn.gpu_arrays(None if isinstance(rows, slice) else rows.tolist())
        k = len(idle)
        width = self._width
        if idle.shape[1] < width:  # no GPU table at all (a cluster without GPUs): nothing to pad from
            pad = width - idle.shape[1]
            idle, pods, gone = (np.pad(a, ((0, 0), (0, pad))) for a in (idle, pods, gone))
        cap = self._cap[rows]
        count = self._count[rows]
        group = pods > gone
        pool = pods == 0
        whole = np.maximum(ssn.idle[rows, GPU], 0) // MILLI  # whole GPUs idle now
        nth = np.cumsum(pool, axis=1)  # 1-based position among the node's slots without shared pods
        free = np.where(
            group,
            np.minimum(np.maximum(idle, 0) * MILLI // cap[:, None], MILLI),
            np.where(pool & (nth <= whole[:, None]), MILLI, 0),
        )
        exists = (np.arange(width)[None, :] < count[:, None]) | (pods > 0)
        out = np.where(exists, free, -1)
        return out.reshape(k, width)

    def _gpu_row(self, row: int) -> list[int]:
        """``_gpu_rows`` for one node in Python scalars (a placement changes one node; NumPy's per-call
        overhead would cost more than the arithmetic)."""
        idle, _, pods, gone = self.ssn.gpu_slots[row]
        cap, count = self._cap_list[row], self._count_list[row]
        whole = max(self.ssn.idle.item(row, GPU), 0) // MILLI
        out = [-1] * self._width
        nth = 0
        for s, p in enumerate(pods):
            if p > gone[s]:
                v = min(max(idle[s], 0) * MILLI // cap, MILLI)
            elif p == 0:
                nth += 1
                v = MILLI if nth <= whole else 0
            else:
                v = 0
            if s < count or p > 0:
                out[s] = v
        return out

    def _refresh(self, rows: np.ndarray | slice) -> None:
        ssn, st = self.ssn, self.state
        if not isinstance(rows, slice) and len(rows) <= _SCALAR_ROWS:
            idle = ssn.idle
            for r in rows.tolist():
                st.cpu[r] = idle.item(r, CPU)
                st.memory[r] = idle.item(r, MEMORY)
                st.gpu[r] = self._gpu_row(r)
                if self._clustering:
                    st.tags[r] = self._tags_of(r)
            return
        st.cpu[rows] = ssn.idle[rows, CPU]
        st.memory[rows] = ssn.idle[rows, MEMORY]
        st.gpu[rows] = self._gpu_rows(rows)
        if self._clustering:
            for r in range(ssn.snap.nodes.n) if isinstance(rows, slice) else rows.tolist():
                st.tags[r] = self._tags_of(r)

    def _sync(self) -> None:
        log = self.ssn.node_log
        if self._synced < len(log):
            rows = np.array(sorted(set(log[self._synced :])), dtype=np.intp)  # a few rows, usually one
            self._synced = len(log)
            self._refresh(rows)

    def _tag(self, task: TaskInfo) -> int:
        req = self._request(task)
        return -1 if req is None else req.tag

    def _tags_of(self, row: int) -> np.ndarray:
        """GpuClustering's counts for one node: its candidate pods that are still on it."""
        out = np.zeros(N_TAGS, dtype=np.int64)
        on = self._on_node.get(row)
        if on:
            ssn = self.ssn
            for t, tag in list(on.items()):
                if ssn.node[t] == row and ssn.status[t] in ACTIVE_USED:
                    out[tag] += 1
        return out

    # --- requests and the target workload ------------------------------------------------------------

    def _accepted_models(self, task: TaskInfo) -> tuple[int, ...] | None:
        if task.signature not in self._models:
            mask = self.ssn.static_fit(task).mask
            ids = tuple(int(m) for m in np.unique(self.model[mask & (self.model >= 0)]))
            self._models[task.signature] = None if ids == self._all_models else ids
        return self._models[task.signature]

    def _request(self, task: TaskInfo) -> PodRequest | None:
        """The policy-facing request of *task* (units in the module docstring); None = not for the policy."""
        key = (task.signature, task.request.tobytes())
        if key in self._requests:
            return self._requests[key]
        req = task.request
        cpu, mem = int(req[CPU]), int(req[MEMORY])
        share = task.share
        out: PodRequest | None
        if share is not None:
            if share.devices != 1:
                out = None
            elif share.fraction_milli:
                out = PodRequest(cpu, mem, 1, share.fraction_milli, self._accepted_models(task))
            else:
                mask = self.ssn.static_fit(task).mask & self.ssn.snap.gpus.sharing_nodes
                mib = self.ssn.snap.nodes.gpu_memory_mib[mask]
                smallest = int(mib.min()) if len(mib) else 0
                milli = -(-share.memory_mib * MILLI // smallest) if smallest else MILLI + 1
                out = PodRequest(cpu, mem, 1, milli, self._accepted_models(task)) if milli <= MILLI else None
        elif req[GPU] > 0:
            g = int(req[GPU])
            out = PodRequest(cpu, mem, g // MILLI, MILLI, self._accepted_models(task)) if g % MILLI == 0 else None
        else:
            out = PodRequest(cpu, mem)
        self._requests[key] = out
        return out

    def target(self) -> TargetWorkload:
        """The snapshot's workload: its pending and running pods (``fgd`` and ``fragmentation``)."""
        ssn = self.ssn
        wanted = ACTIVE_ALLOCATED | {TaskStatus.PENDING}
        reqs = []
        for t in ssn.snap.tasks:
            if t.status in wanted and not t.spec_error:
                r = self._request(t)
                if r is not None:
                    reqs.append(r)
        return TargetWorkload.from_pods(reqs)

    def _make(self) -> GpuPolicy:
        if self.name == "fgd":
            return Fgd(self.target(), self.n_models)
        if self.name == "fragmentation":
            return Fragmentation(self.n_models, target=self.target())
        return make_policy(self.name, n_models=self.n_models)

    # --- the Placer's questions ----------------------------------------------------------------------

    def best_node(
        self,
        task: TaskInfo,
        static: np.ndarray,
        fits_now: np.ndarray,
        allowed: np.ndarray | None,
        bonus: np.ndarray | None,
    ) -> Choice | None:
        """The node (fits now) and, for a shared pod, the GPU slot the policy chose among the nodes that allow
        *task* and fit it now; None when there is no such node or the policy declines (the Placer decides)."""
        req = self._request(task)
        if req is None:
            return None
        mask = static & fits_now
        if allowed is not None:
            mask &= allowed
        if not mask.any():
            return None
        if bonus is not None:  # a topology preference: the policy chooses among the most preferred nodes
            best = np.where(mask, bonus, -np.inf).max()
            mask &= bonus == best
        self._sync()
        placement = self.policy.choose(self.state, req, self.rng, mask)
        if placement is None:
            return None
        row = placement.node
        self.placed += 1
        if self._clustering and req.tag >= 0:
            self._on_node.setdefault(row, {})[task.index] = req.tag
        return Choice(row, True, tuple(placement.gpus) if task.share is not None else None)
