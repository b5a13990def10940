"""Inter-pod affinity and anti-affinity: kube-scheduler's InterPodAffinity filter and score, over Counters.

Filter (required terms), for a pod P and a node n:

* P's anti-affinity: for each term, no pod matching it in n's domain of the term's topology key (a node
  without that label passes);
* symmetry: no pod in n's domain (of that term's key) whose own required anti-affinity matches P;
* P's affinity: n carries every term's key, and for each term some pod matching *all* of P's affinity terms
  sits in n's domain; or, the first-pod rule, no pod anywhere matches them all and P matches them itself.

Pods being released count for anti-affinity while they run (P may be pipelined there, not placed now, as
kube-scheduler's preemption removes its victims before it filters); for affinity only pods that stay count.

Score (preferred terms), kube's raw InterPodAffinity score scaled as KAI scales it (x 1,000,000): per node,
the sum over pods in its domains of P's preferred weights they match (minus anti-affinity weights), plus the
weights of the preferred terms of pods there that match P, plus ``hardPodAffinityWeight`` for each of their
required affinity terms that matches P (KAI passes 0; kube-scheduler's default is 1).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from kai.api.podspec import PodAffinityTerm
from kai.scheduler.podrules._counters import Counter, Counters, DomainSums, _label_dispatch
from kai.scheduler.podrules._rule import K8S_PLUGINS, Answer, CountedRule
from kai.scheduler.podrules._shared import NsMatcher, SessionPods
from kai.scheduler.session import Session

Owned = tuple[str, PodAffinityTerm, int]  # (kind: anti | aff | pref | antipref, term, weight)


class OwnedTerms:
    """Every (anti-)affinity term some pod of the Session owns, indexed to find those that match a given pod."""

    def __init__(self, pods: SessionPods) -> None:
        self.pods = pods
        seen: dict[Owned, int] = {}  # owned term -> its rank (first seen first): a stable order for shape keys
        self._index: dict[Hashable, list[Owned]] = {}
        self._scan: list[Owned] = []
        for pod in pods.pods:
            aff = pod.pod_affinity
            if aff is None:
                continue
            owned: list[Owned] = [("anti", t, 0) for t in aff.anti_required]
            owned += [("aff", t, 0) for t in aff.required]
            owned += [("pref", w.term, w.weight) for w in aff.preferred]
            owned += [("antipref", w.term, w.weight) for w in aff.anti_preferred]
            for o in owned:
                if o in seen or o[1].selector is None:
                    continue
                seen[o] = len(seen)
                keys = _label_dispatch(o[1].selector)
                if keys is None:
                    self._scan.append(o)
                else:
                    for k in keys:
                        self._index.setdefault(k, []).append(o)
        self.kinds = {o[0] for o in seen}
        self._rank = seen
        self._cache: dict[Hashable, tuple[Owned, ...]] = {}

    def matching(self, pid: int, kinds: frozenset[str]) -> tuple[Owned, ...]:
        """The owned terms of *kinds* that pod *pid* matches (its labels, in the term's namespaces); cached per
        (kinds, namespace, labels), which the pods of one workload share."""
        pods = self.pods
        labels = pods.labels(pid)
        key = (kinds, pods.namespace(pid), tuple(labels.items()))
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._matching(pid, kinds)
        return got

    def _matching(self, pid: int, kinds: frozenset[str]) -> tuple[Owned, ...]:
        pods = self.pods
        labels = pods.labels(pid)
        candidates = [o for k, v in labels.items() for o in self._index.get(("L", k, v), ())]
        candidates += [o for k in labels for o in self._index.get(("K", k), ())]
        out = {
            o for o in (*candidates, *self._scan) if o[0] in kinds and pods.term_matches(o[1], NsMatcher.of(o[1]), pid)
        }
        return tuple(sorted(out, key=self._rank.__getitem__))


def owned_terms(ssn: Session, pods: SessionPods) -> OwnedTerms:
    got = ssn.cache.get("podrules.owned")
    if got is None:
        got = ssn.cache["podrules.owned"] = OwnedTerms(pods)
    return got


class AffinityFilter(CountedRule):
    """The required part (see the module docstring) for one pod shape."""

    def __init__(
        self,
        pods: SessionPods,
        counters: Counters,
        affinity: tuple[PodAffinityTerm, ...],
        anti: tuple[PodAffinityTerm, ...],
        symmetric: tuple[PodAffinityTerm, ...],
        self_match: bool,
    ) -> None:
        def sums(c: Counter, t: PodAffinityTerm) -> DomainSums:
            return counters.sums(c, pods.domain(t.topology_key))

        self._anti = [(sums(counters.term(t), t), t) for t in anti]
        self._sym = [(sums(counters.owners("anti", t), t), t) for t in symmetric]
        conj = counters.terms(affinity) if affinity else None
        self._aff = [(sums(conj, t), t) for t in affinity] if conj is not None else []
        self._self_match = self_match
        self._empty = self._aff_empty()
        self.loosens = bool(affinity)  # placing a matching pod opens its domain
        every = [s for s, _ in (*self._anti, *self._sym, *self._aff)]
        super().__init__(len(pods.ssn.snap.nodes.names), every)

    def _aff_empty(self) -> bool:
        """kube's ``len(affinityCounts) == 0``: no pod matching all affinity terms on a node with any term's key."""
        return all(s.total_held == 0 for s, _ in self._aff)

    def _needs_full(self) -> bool:
        # the first-pod rule holds while no matching pod exists anywhere: when that flips, every row may flip
        return bool(self._aff) and self._self_match and self._aff_empty() != self._empty

    def _compute(self, rows: np.ndarray | None) -> Answer:
        at = slice(None) if rows is None else rows
        size = self._n if rows is None else len(rows)
        later = np.ones(size, dtype=bool)
        now = np.ones(size, dtype=bool)
        for s, _ in (*self._anti, *self._sym):
            later &= s.at(at) == 0
            if s.counter.rel_total:
                now &= s.at(at, releasing=True) == 0
        if self._aff:
            self._empty = self._aff_empty()
            has_all = np.ones(size, dtype=bool)
            exist = np.ones(size, dtype=bool)
            for s, _ in self._aff:
                has_all &= s.domain.has[at]
                exist &= s.at(at) > 0
            later &= has_all & (exist | (self._empty and self._self_match))
        return later, now, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        out = []
        for s, t in self._anti:
            assert t.selector is not None
            why = f"hold a pod matching this pod's anti-affinity {t.selector.describe()} on {t.topology_key}"
            out.append((why, s.at(slice(None)) > 0))
        for s, t in self._sym:
            assert t.selector is not None
            why = f"hold a pod whose anti-affinity {t.selector.describe()} on {t.topology_key} matches this pod"
            out.append((why, s.at(slice(None)) > 0))
        if self._aff:
            for s, t in self._aff:
                out.append((f"lack the label {t.topology_key} of this pod's affinity", ~s.domain.has))
            what = " and ".join(t.describe() for _, t in self._aff)
            out.append((f"hold no pod matching this pod's affinity {what}", ~self._compute(None)[0]))
        return tuple(out)


class AffinityScore(CountedRule):
    """The preferred part (see the module docstring) for one pod shape: scores only."""

    now_differs = False

    filters = False

    def __init__(self, pods: SessionPods, entries: list[tuple[DomainSums, float]]) -> None:
        self._entries = entries
        super().__init__(len(pods.ssn.snap.nodes.names), [s for s, _ in entries])

    def _compute(self, rows: np.ndarray | None) -> Answer:
        at = slice(None) if rows is None else rows
        size = self._n if rows is None else len(rows)
        total = np.zeros(size)
        for s, w in self._entries:
            total += w * s.at(at)
        ones = np.ones(size, dtype=bool)
        return ones, ones, K8S_PLUGINS * total


def self_matches(pods: SessionPods, pid: int, terms: tuple[PodAffinityTerm, ...]) -> bool:
    """Does the pod match all of its own affinity terms (kube's first-pod rule needs it)?"""
    return bool(terms) and all(pods.term_matches(t, NsMatcher.of(t), pid) for t in terms)
