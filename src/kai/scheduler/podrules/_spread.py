"""Pod topology spread constraints: kube-scheduler's PodTopologySpread filter and score, over Counters.

For a constraint with topology key k, the *eligible* nodes are those carrying every key of the pod's
constraints of the same kind (all hard ones, or all soft ones), and, with ``nodeAffinityPolicy: Honor`` (the
default), matching the pod's nodeSelector and required node affinity, with ``nodeTaintsPolicy: Honor``,
whose NoSchedule/NoExecute taints it tolerates. Each value of k on an eligible node is a domain; a domain
counts the pods of the pod's namespace that match the constraint's selector on its eligible nodes (pods
being released do not count: kube-scheduler skips terminating pods). The global minimum is the smallest
count over the domains, or 0 when there are fewer domains than ``minDomains``.

Filter (``DoNotSchedule``): a node passes if it carries k and ``count(its domain) + [the pod matches the
selector itself] - minimum <= maxSkew``, for every hard constraint.

Score (``ScheduleAnyway``): fewer matching pods in the node's domain is better, each constraint weighted by
log(domains + 2) as kube-scheduler does, scaled like the other Kubernetes plugin scores (x 1,000,000); a
node missing a key scores below every node that has them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kai.api.objects import Pod
from kai.api.podspec import SpreadConstraint
from kai.scheduler.podrules._counters import Counters, DomainSums
from kai.scheduler.podrules._rule import K8S_PLUGINS, Answer, CountedRule
from kai.scheduler.podrules._shared import SessionPods
from kai.scheduler.predicates import node_affinity_fit, taints_fit

_NO_MINIMUM = 2**31 - 1  # no eligible domain: kube's critical path stays at MaxInt32 and every skew passes


@dataclass(slots=True)
class _Constraint:
    spec: SpreadConstraint
    sums: DomainSums  # matching pods per domain, over the eligible nodes
    domains: np.ndarray  # (domain count,) bool: domains with an eligible node
    self_match: int  # 1 if the pod matches the selector itself
    minimum: int = 0

    def least(self) -> int:
        """The global minimum: the smallest count over the eligible domains (0 below minDomains)."""
        present = self.domains
        n_domains = int(present.sum())
        least = int(self.sums.held[present].min()) if n_domains else _NO_MINIMUM
        if self.spec.min_domains is not None and n_domains < self.spec.min_domains:
            least = 0
        return least

    def ok(self, at: np.ndarray | slice) -> np.ndarray:
        return self.sums.domain.has[at] & (self.sums.at(at) + self.self_match - self.minimum <= self.spec.max_skew)


class SpreadRule(CountedRule):
    now_differs = False  # pods being released count the same now and later

    def __init__(self, pods: SessionPods, counters: Counters, pod: Pod, labels_match: tuple[bool, ...]) -> None:
        ssn = pods.ssn
        nodes, node_labels = ssn.snap.nodes, ssn.labels
        affinity = taints = None
        hard = [c for c in pod.spread if c.hard]
        soft = [c for c in pod.spread if not c.hard]
        self._hard: list[_Constraint] = []
        self._soft: list[_Constraint] = []
        namespace = pod.meta.namespace or ""
        for group, out in ((hard, self._hard), (soft, self._soft)):
            keys = np.ones(nodes.n, dtype=bool)
            for c in group:
                keys &= pods.domain(c.topology_key).has
            for c in group:
                eligible = keys.copy()
                if c.node_affinity_policy == "Honor":
                    if affinity is None:
                        affinity = node_affinity_fit(nodes, node_labels, pod)
                    eligible &= affinity
                if c.node_taints_policy == "Honor":
                    if taints is None:
                        taints = taints_fit(nodes, node_labels, pod)
                    eligible &= taints
                d = pods.domain(c.topology_key)
                domains = np.zeros(d.count, dtype=bool)
                domains[d.dom[eligible & d.has]] = True
                sums = counters.sums(counters.selector(c.selector, namespace), d, eligible)
                match = int(labels_match[pod.spread.index(c)])
                out.append(_Constraint(c, sums, domains, match))
        self.loosens = bool(self._hard)  # placing pods raises the minimum, which reopens domains
        super().__init__(nodes.n, [c.sums for c in (*self._hard, *self._soft)])

    def _needs_full(self) -> bool:
        # a minimum that moved changes the skew of every domain; soft scores are recomputed whole (their
        # worst score, for nodes missing a key, follows the others)
        return bool(self._soft) or any(c.least() != c.minimum for c in self._hard)

    def _compute(self, rows: np.ndarray | None) -> Answer:
        at = slice(None) if rows is None else rows
        later = np.ones(self._n if rows is None else len(rows), dtype=bool)
        for c in self._hard:
            if rows is None:
                c.minimum = c.least()
            later &= c.ok(at)
        scores = None
        if self._soft:
            penalty = np.zeros(self._n)
            has_all = np.ones(self._n, dtype=bool)
            for c in self._soft:
                penalty += math.log(int(c.domains.sum()) + 2) * c.sums.at(slice(None))
                has_all &= c.sums.domain.has
            worst = float(penalty[has_all].max(initial=0.0)) + 1.0
            scores = (-K8S_PLUGINS * np.where(has_all, penalty, worst))[at]
        return later, later, scores

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        out = []
        for c in self._hard:
            d = c.sums.domain
            c.minimum = c.least()
            out.append((f"lack the label {d.key} of this pod's topology spread constraint", ~d.has))
            least = "no eligible domain" if c.minimum == _NO_MINIMUM else f"the emptiest domain holds {c.minimum}"
            out.append((f"would break its topology spread {c.spec.describe()} ({least})", d.has & ~c.ok(slice(None))))
        return tuple(out)
