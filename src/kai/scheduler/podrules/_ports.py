"""Host ports: kube-scheduler's NodePorts filter, over Counters.

A node does not fit a pod if a pod there (placed before this cycle or earlier in it) binds a (hostIP,
protocol, hostPort) that conflicts with one the pod asks for: the same protocol and port, on the same address
or with either binding every address (0.0.0.0). A pod being released holds its ports while it runs, so the
pod may be pipelined onto its node (it binds once the other is gone), not placed there now.
"""

from __future__ import annotations

import numpy as np

from kai.api.podspec import HostPort
from kai.scheduler.podrules._counters import Counter, Counters
from kai.scheduler.podrules._rule import CountedRule


class PortsRule(CountedRule):
    def __init__(self, counters: Counters, ports: tuple[HostPort, ...]) -> None:
        self._ports: list[tuple[HostPort, Counter]] = [(p, counters.port(p)) for p in ports]
        super().__init__(counters.n, [c for _, c in self._ports])

    def _compute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        later = np.ones(self._n, dtype=bool)
        now = np.ones(self._n, dtype=bool)
        for _, c in self._ports:
            later &= c.held == 0
            if c.rel_total:
                now &= c.rel == 0
        return later, now, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return tuple((f"lack free host port {p.describe()}", c.held > 0) for p, c in self._ports)
