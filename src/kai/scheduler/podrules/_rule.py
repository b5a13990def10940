"""The common shape of the pod rules: a NodeRule (``kai.scheduler.framework``) over per-domain counts, kept
current row by row.

Theory of operation. A rule reads ``DomainSums`` (a counter summed per topology domain). When a pod moves,
each DomainSums it belongs to tells its rules which node moved; the rule only notes it. When the rule is
next read, it recomputes the rows of the noted nodes' domains (vectorized, on those rows alone), writes the
rows whose answer changed, and appends them to ``log`` (``None`` when it recomputed everything). A rule
decides itself when a change reaches beyond those rows (``_needs_full``: a spread minimum that moved, the
first pod of an affinity that appeared) and then recomputes every row. The Placer reads ``log`` to refresh
exactly the rows of its own cached answers that a rule changed.
"""

from __future__ import annotations

import numpy as np

from kai.scheduler.podrules._counters import DomainSums

# KAI's scores.K8sPlugins: a Kubernetes plugin's score (inter-pod affinity) weighs more than any of KAI's own
# (node availability 1,000, GPU sharing 10,000, topology 100,000)
K8S_PLUGINS = 1_000_000.0

Answer = tuple[np.ndarray, np.ndarray, np.ndarray | None]  # later mask, now mask, scores (for some rows)


class CountedRule:
    """Base of the pod rules (see the module docstring). Subclasses call ``__init__`` with the sums and
    counters they read and implement ``_compute(rows)`` (rows None: all of them) and ``failures``."""

    filters = True
    loosens = False
    now_differs = True  # pods being released may count now and not later (anti-affinity, ports)

    def __init__(self, n: int, sums: list[DomainSums]) -> None:
        self._n = n
        for s in sums:
            s.rules.append(self)
        self._full = True
        self._dirty: list[tuple[DomainSums, int]] = []
        self._later = self._now = np.ones(n, dtype=bool)
        self._scores: np.ndarray | None = None
        self.log: list[np.ndarray | None] = []  # rows changed at each refresh (None: all rows)

    def touched(self, sums: DomainSums, node: int) -> None:
        if not self._full:
            self._dirty.append((sums, node))

    def stale(self) -> None:
        """Recompute every row at the next read."""
        self._full = True
        self._dirty = []

    def _needs_full(self) -> bool:
        return False

    def _compute(self, rows: np.ndarray | None) -> Answer:
        raise NotImplementedError

    def _refresh(self) -> None:
        if not self._full:
            if not self._dirty:
                return
            if self._needs_full():
                self._full = True
        if self._full:
            later, now, scores = self._compute(None)
            self._later, self._now, self._scores = later, now & later, scores
            self._full = False
            self._dirty = []
            self.log.append(None)
            return
        dirty, self._dirty = self._dirty, []
        if len(dirty) == 1:
            rows = dirty[0][0].domain.rows_of(dirty[0][1])
        else:
            rows = np.unique(np.concatenate([s.domain.rows_of(node) for s, node in dirty]))
        if not rows.size:
            return
        later, now, scores = self._compute(rows)
        now = now & later
        changed = (later != self._later[rows]) | (now != self._now[rows])
        if scores is not None:
            assert self._scores is not None
            changed |= scores != self._scores[rows]
        if changed.any():
            picked = rows[changed]
            self._later[picked] = later[changed]
            self._now[picked] = now[changed]
            if scores is not None:
                assert self._scores is not None
                self._scores[picked] = scores[changed]
            self.log.append(picked)

    def mask(self) -> np.ndarray:
        self._refresh()
        return self._later

    def now_mask(self) -> np.ndarray:
        self._refresh()
        return self._now

    def allows(self, row: int) -> bool:
        return bool(self.mask()[row])

    def allows_now(self, row: int) -> bool:
        return bool(self.now_mask()[row])

    def scores(self) -> np.ndarray | None:
        self._refresh()
        return self._scores

    def score(self, row: int) -> float:
        s = self.scores()
        return 0.0 if s is None else float(s[row])

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return ()
