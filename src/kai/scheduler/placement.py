"""Choosing a node for a task: dynamic fit and KAI's node scores, vectorized over nodes.

Scores (KAI's magnitudes, summed): nodeavailability +1000 when the task fits on
idle resources now; resourcetype +10 for a CPU-only task on a CPU-only node;
nodeplacement 0..9: *binpack* ranks the node with the least free amount of the
task's resource (GPU for GPU tasks, CPU otherwise) highest, *spread* ranks by
free/total. KAI normalizes binpack by the min and max over the fitting nodes;
we scale by a fixed per-session constant instead, which keeps the same order
(monotone in the free amount, always below 10) and lets a placement update one
row instead of rescoring every node. Ties go to the lower row, i.e. the node
name ascending.

Theory of operation: one Placer lives as long as its Session. It keeps, per
(scheduling signature, request), the score of every node, and remembers how far
into the Session's log of changed nodes (``Session.node_log``) those scores are
up to date. Before answering it rescores only the rows changed since: a few
rows with Python scalars (NumPy's per-call overhead dominates on one row), many
rows with one vectorized pass. Any change through a Statement, including a
rollback, lands in the log, so no caller has to tell the Placer anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.scheduler.gpusharing import GpuShare, fit_one, fit_rows, fit_rows_single
from kai.scheduler.model import CPU, GPU, MILLI, TaskInfo
from kai.scheduler.session import Session

_SCALAR_ROWS = 24  # below this many changed rows, rescoring row by row in Python is cheaper


@dataclass(slots=True)
class _Candidates:
    request: np.ndarray  # (n_res,)
    cols: np.ndarray  # resource columns the task requests
    static: np.ndarray  # (n,) bool
    fits_now: np.ndarray  # (n,) bool
    fits_later: np.ndarray  # (n,) bool: fits on idle + releasing (``_score_rows``' intermediate; not kept per row)
    score: np.ndarray  # (n,) float, -inf where the task cannot go
    synced: int  # position in Session.node_log up to which the rows are current
    # the same facts as Python scalars, for the row-by-row path
    req_cols: list[tuple[int, int]]  # (column, amount) of each requested resource
    col: int  # the resource the placement strategy ranks by
    binpack: bool
    gpu_task: bool
    static_list: list[bool]
    share: GpuShare | None = None  # a fractional request: per-GPU fit on top of the node columns
    need: list[int] | None = None  # one-device share: the units it takes on each node's GPUs


class Placer:
    """Best node for a task, kept current with the Session's changes (see the module docstring)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._cache: dict[tuple[int, bytes], _Candidates] = {}
        alloc = ssn.snap.nodes.allocatable
        self._cpu_only_node = alloc[:, GPU] == 0
        self._cpu_only_list = self._cpu_only_node.tolist()
        self._alloc_cols = {c: alloc[:, c].tolist() for c in (CPU, GPU)}
        self._scale = {c: float(ssn.score_scale[c]) for c in (CPU, GPU)}
        self._cap = ssn.snap.gpus.cap.tolist()

    def _score_rows(self, c: _Candidates, rows: np.ndarray | slice) -> None:
        ssn = self.ssn
        idle = ssn.idle[rows]
        free_later = idle + ssn.releasing[rows]
        cols = c.cols
        c.fits_now[rows] = (idle[:, cols] >= c.request[cols]).all(axis=1)
        c.fits_later[rows] = (free_later[:, cols] >= c.request[cols]).all(axis=1)
        col = c.col
        alloc = ssn.snap.nodes.allocatable[rows, col]
        free = np.maximum(idle[:, col], 0)
        if c.binpack:
            placement = np.where(alloc > 0, 9.0 * (1.0 - free / ssn.score_scale[col]), 0.0)
        else:
            placement = np.where(alloc > 0, 9.0 * free / np.maximum(alloc, 1), 0.0)
        if c.share is not None:
            g = ssn.snap.gpus
            if c.share.devices == 1:
                if isinstance(rows, slice):
                    max_now, max_later = np.array(ssn.group_max_now), np.array(ssn.group_max_later)
                else:
                    max_now = np.array([ssn.group_max_now[r] for r in rows.tolist()], dtype=np.int64)
                    max_later = np.array([ssn.group_max_later[r] for r in rows.tolist()], dtype=np.int64)
                now, later, shared = fit_rows_single(
                    c.share, g.cap[rows], max_now, max_later, idle[:, GPU], ssn.releasing[rows, GPU]
                )
            else:
                slots = ssn.gpu_arrays(None if isinstance(rows, slice) else rows.tolist())
                now, later, shared = fit_rows(c.share, g.cap[rows], *slots, idle[:, GPU], ssn.releasing[rows, GPU])
            c.fits_now[rows] &= now
            c.fits_later[rows] &= later
            if c.binpack:  # gpusharingorder: a node with a shared GPU the portion fits on comes first
                placement = placement + 10000.0 * shared
        score = 1000.0 * c.fits_now[rows] + placement
        if not c.gpu_task:
            score = score + 10.0 * self._cpu_only_node[rows]
        c.score[rows] = np.where(c.static[rows] & c.fits_later[rows], score, -np.inf)

    def _score_row(self, c: _Candidates, row: int) -> None:
        """``_score_rows`` for one row in Python floats: the same operations in the same order, so equal results."""
        if not c.static_list[row]:
            return  # a statically excluded node stays at -inf whatever its free resources
        ssn = self.ssn
        idle = ssn.idle[row].tolist()
        releasing = ssn.releasing[row].tolist()
        now = later = True
        for k, need in c.req_cols:
            if idle[k] < need:
                now = False
                if idle[k] + releasing[k] < need:
                    later = False
                    break
        shared = False
        if later and c.share is not None:
            if c.need is not None:  # one device: the node's largest free group decides (fit_one, inlined)
                need = c.need[row]
                fits_gpu = need <= self._cap[row]
                shared = fits_gpu and ssn.group_max_later[row] >= need
                now = now and (idle[GPU] >= MILLI or (fits_gpu and ssn.group_max_now[row] >= need))
                later = shared or (fits_gpu and max(idle[GPU], 0) + max(releasing[GPU], 0) >= MILLI)
            else:
                free_now, free_later = ssn.group_free[row]
                g_now, g_later, shared = fit_one(
                    c.share, self._cap[row], free_now, free_later, idle[GPU], releasing[GPU]
                )
                now = now and g_now
                later = g_later
        c.fits_now[row] = now  # (fits_later is the vector path's scratch: nothing reads it for one row)
        if not later:
            c.score[row] = -np.inf
            return
        col = c.col
        alloc = self._alloc_cols[col][row]
        if alloc > 0:
            free = max(idle[col], 0)
            placement = 9.0 * (1.0 - free / self._scale[col]) if c.binpack else 9.0 * free / max(alloc, 1)
        else:
            placement = 0.0
        if shared and c.binpack:
            placement += 10000.0
        score = 1000.0 * now + placement
        if not c.gpu_task:
            score = score + 10.0 * self._cpu_only_list[row]
        c.score[row] = score

    def _candidates(self, task: TaskInfo) -> _Candidates:
        ssn = self.ssn
        key = (task.signature, task.request.tobytes())  # the signature includes any GPU share
        c = self._cache.get(key)
        log = ssn.node_log
        if c is None:
            n = ssn.snap.nodes.n
            static = ssn.static_fit(task).mask
            gpu_task = bool(task.request[GPU] > 0)
            request = ssn.node_request(task)
            cols = np.flatnonzero(request)
            share = task.share
            c = _Candidates(
                request=request,
                cols=cols,
                static=static,
                fits_now=np.zeros(n, dtype=bool),
                fits_later=np.zeros(n, dtype=bool),
                score=np.full(n, -np.inf),
                synced=len(log),
                req_cols=[(int(k), int(request[k])) for k in cols],
                col=GPU if gpu_task else CPU,
                binpack=(ssn.conf.placement_gpu if gpu_task else ssn.conf.placement_cpu) == "binpack",
                gpu_task=gpu_task,
                static_list=static.tolist(),
                share=share,
                need=share.units_array(ssn.snap.gpus.cap).tolist() if share and share.devices == 1 else None,
            )
            self._score_rows(c, slice(None))
            self._cache[key] = c
        elif c.synced < len(log):
            changed = set(log[c.synced :])  # binpack keeps changing the same few nodes
            c.synced = len(log)
            if len(changed) <= _SCALAR_ROWS:
                for row in changed:
                    self._score_row(c, row)
            else:
                self._score_rows(c, np.array(sorted(changed), dtype=np.intp))
        return c

    def best_node(
        self, task: TaskInfo, allowed: np.ndarray | None = None, bonus: np.ndarray | None = None
    ) -> tuple[int, bool]:
        """(node row, fits on idle now) of the best node, or (-1, False) if none can take the task.

        *allowed* (n_nodes,) bool restricts the choice to a set of nodes (a topology domain); *bonus*
        (n_nodes,) float is added to the scores (topology's node preference). Neither changes the cache."""
        c = self._candidates(task)
        score = c.score
        if score.size == 0:
            return -1, False
        if bonus is not None:
            score = score + bonus
        if allowed is not None:
            score = np.where(allowed, score, -np.inf)
        row = int(score.argmax())
        if score[row] == -np.inf:
            return -1, False
        return row, bool(c.fits_now[row])
