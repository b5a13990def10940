"""Host ports: kube-scheduler's NodePorts filter, over Counters.

A node does not fit a pod if a pod there (placed before this cycle or earlier in it) binds a (hostIP,
protocol, hostPort) that conflicts with one the pod asks for: the same protocol and port, on the same address
or with either binding every address (0.0.0.0). A pod being released holds its ports while it runs, so the
pod may be pipelined onto its node (it binds once the other is gone), not placed there now.
"""

from __future__ import annotations

import numpy as np

from kai.api.podspec import HostPort
from kai.scheduler.podrules._counters import Counters, DomainSums
from kai.scheduler.podrules._rule import Answer, CountedRule
from kai.scheduler.podrules._shared import SessionPods


class PortsRule(CountedRule):
    def __init__(self, counters: Counters, pods: SessionPods, ports: tuple[HostPort, ...]) -> None:
        self._ports: list[tuple[HostPort, DomainSums]] = [
            (p, counters.sums(counters.port(p), pods.node_domain())) for p in ports
        ]
        super().__init__(counters.n, [s for _, s in self._ports])

    def _compute(self, rows: np.ndarray | None) -> Answer:
        at = slice(None) if rows is None else rows
        size = self._n if rows is None else len(rows)
        later = np.ones(size, dtype=bool)
        now = np.ones(size, dtype=bool)
        for _, s in self._ports:
            later &= s.at(at) == 0
            if s.counter.rel_total:
                now &= s.at(at, releasing=True) == 0
        return later, now, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return tuple((f"lack free host port {p.describe()}", s.at(slice(None)) > 0) for p, s in self._ports)
