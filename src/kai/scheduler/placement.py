"""Choosing a node for a task: dynamic fit and KAI's node scores, vectorized over nodes.

Scores (KAI's magnitudes, summed): nodeavailability +1000 when the task fits on
idle resources now; resourcetype +10 for a CPU-only task on a CPU-only node;
nodeplacement 0..9: *binpack* ranks the node with the least free amount of the
task's resource (GPU for GPU tasks, CPU otherwise) highest, *spread* ranks by
free/total. KAI normalizes binpack by the min and max over the fitting nodes;
we scale by a fixed per-session constant instead, which keeps the same order
(monotone in the free amount, always below 10) and lets a gang's placements
update one row at a time instead of rescoring every node per task. Ties go to
the lower row, i.e. the node name ascending.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.scheduler.model import CPU, GPU, TaskInfo
from kai.scheduler.session import Session


@dataclass(slots=True)
class _Candidates:
    request: np.ndarray  # (n_res,)
    cols: np.ndarray  # resource columns the task requests
    static: np.ndarray  # (n,) bool
    fits_now: np.ndarray  # (n,) bool
    fits_later: np.ndarray  # (n,) bool: fits on idle + releasing
    score: np.ndarray  # (n,) float, -inf where the task cannot go


class Placer:
    """Node choice for the tasks of one placement attempt.

    Caches candidate arrays per (signature, request) and refreshes only the row
    of a node it placed on. Valid while no one else changes the session: make a
    new Placer after a rollback.
    """

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._cache: dict[tuple[int, bytes], _Candidates] = {}
        nodes = ssn.snap.nodes
        self._cpu_only_node = nodes.allocatable[:, GPU] == 0

    def _score_rows(self, c: _Candidates, rows: np.ndarray | slice) -> None:
        ssn = self.ssn
        idle = ssn.idle[rows]
        free_later = idle + ssn.releasing[rows]
        cols = c.cols
        c.fits_now[rows] = (idle[:, cols] >= c.request[cols]).all(axis=1)
        c.fits_later[rows] = (free_later[:, cols] >= c.request[cols]).all(axis=1)
        gpu_task = c.request[GPU] > 0
        col = GPU if gpu_task else CPU
        strategy = ssn.conf.placement_gpu if gpu_task else ssn.conf.placement_cpu
        alloc = ssn.snap.nodes.allocatable[rows, col]
        free = np.maximum(idle[:, col], 0)
        if strategy == "binpack":
            placement = np.where(alloc > 0, 9.0 * (1.0 - free / ssn.score_scale[col]), 0.0)
        else:
            placement = np.where(alloc > 0, 9.0 * free / np.maximum(alloc, 1), 0.0)
        score = 1000.0 * c.fits_now[rows] + placement
        if not gpu_task:
            score = score + 10.0 * self._cpu_only_node[rows]
        c.score[rows] = np.where(c.static[rows] & c.fits_later[rows], score, -np.inf)

    def _candidates(self, task: TaskInfo) -> _Candidates:
        key = (task.signature, task.request.tobytes())
        c = self._cache.get(key)
        if c is None:
            n = self.ssn.snap.nodes.n
            c = _Candidates(
                request=task.request,
                cols=np.flatnonzero(task.request),
                static=self.ssn.static_fit(task).mask,
                fits_now=np.zeros(n, dtype=bool),
                fits_later=np.zeros(n, dtype=bool),
                score=np.full(n, -np.inf),
            )
            self._score_rows(c, slice(None))
            self._cache[key] = c
        return c

    def best_node(self, task: TaskInfo) -> tuple[int, bool]:
        """(node row, fits on idle now) of the best node, or (-1, False) if none can take the task."""
        c = self._candidates(task)
        if c.score.size == 0:
            return -1, False
        row = int(np.argmax(c.score))
        if c.score[row] == -np.inf:
            return -1, False
        return row, bool(c.fits_now[row])

    def placed(self, node: int) -> None:
        """Refresh every cached candidate set after the session changed *node*."""
        for c in self._cache.values():
            self._score_rows(c, slice(node, node + 1))
