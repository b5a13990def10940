"""The common shape of the pod rules: a NodeRule (``kai.scheduler.framework``) over Counters, whose masks and
scores are recomputed, vectorized over nodes, only when a counter it reads has moved."""

from __future__ import annotations

import numpy as np

from kai.scheduler.podrules._counters import Counter

# KAI's scores.K8sPlugins: a Kubernetes plugin's score (inter-pod affinity) weighs more than any of KAI's own
# (node availability 1,000, GPU sharing 10,000, topology 100,000)
K8S_PLUGINS = 1_000_000.0


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class CountedRule:
    """Base of the pod rules. Subclasses set ``_deps`` (the counters they read) and implement ``_compute``
    (later mask, now mask, scores) and ``failures``."""

    filters = True
    loosens = False

    def __init__(self, n: int, deps: list[Counter]) -> None:
        self._n = n
        self._deps = deps
        self._at = -1
        self._later = self._now = np.ones(n, dtype=bool)
        self._scores: np.ndarray | None = None

    def _refresh(self) -> None:
        at = sum(c.version for c in self._deps)  # versions only grow: any change moves the sum
        if at != self._at:
            self._at = at
            later, now, scores = self._compute()
            self._later, self._now = _ro(later), _ro(now & later)
            self._scores = None if scores is None else _ro(scores)

    def _compute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        raise NotImplementedError

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
