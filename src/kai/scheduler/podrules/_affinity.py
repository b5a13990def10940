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
from kai.scheduler.podrules._counters import Counter, Counters, _label_dispatch
from kai.scheduler.podrules._rule import K8S_PLUGINS, CountedRule
from kai.scheduler.podrules._shared import Domain, NsMatcher, SessionPods
from kai.scheduler.session import Session

Owned = tuple[str, PodAffinityTerm, int]  # (kind: anti | aff | pref | antipref, term, weight)


class OwnedTerms:
    """Every (anti-)affinity term some pod of the Session owns, indexed to find those that match a given pod."""

    def __init__(self, pods: SessionPods) -> None:
        self.pods = pods
        seen: set[Owned] = set()
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
                seen.add(o)
                keys = _label_dispatch(o[1].selector)
                if keys is None:
                    self._scan.append(o)
                else:
                    for k in keys:
                        self._index.setdefault(k, []).append(o)
        self.kinds = {o[0] for o in seen}

    def matching(self, pid: int, kinds: frozenset[str]) -> tuple[Owned, ...]:
        """The owned terms of *kinds* that pod *pid* matches (its labels, in the term's namespaces)."""
        pods = self.pods
        labels = pods.labels(pid)
        candidates = [o for k, v in labels.items() for o in self._index.get(("L", k, v), ())]
        candidates += [o for k in labels for o in self._index.get(("K", k), ())]
        out = {
            o for o in (*candidates, *self._scan) if o[0] in kinds and pods.term_matches(o[1], NsMatcher.of(o[1]), pid)
        }
        return tuple(sorted(out, key=repr))


def owned_terms(ssn: Session, pods: SessionPods) -> OwnedTerms:
    got = ssn.cache.get("podrules.owned")
    if got is None:
        got = ssn.cache["podrules.owned"] = OwnedTerms(pods)
    return got


def _blocked(c: Counter, d: Domain, with_releasing: bool) -> np.ndarray:
    per_node = c.held + c.rel if with_releasing and c.rel_total else c.held
    return d.totals(per_node) > 0


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
        self._anti = [(counters.term(t), pods.domain(t.topology_key), t) for t in anti]
        self._sym = [(counters.owners("anti", t), pods.domain(t.topology_key), t) for t in symmetric]
        self._aff = counters.terms(affinity) if affinity else None
        self._aff_terms = [(pods.domain(t.topology_key), t) for t in affinity]
        self._self_match = self_match
        self.loosens = bool(affinity)  # placing a matching pod opens its domain
        deps = [c for c, _, _ in (*self._anti, *self._sym)] + ([self._aff] if self._aff is not None else [])
        super().__init__(len(pods.ssn.snap.nodes.names), deps)

    def _affinity_ok(self) -> np.ndarray | None:
        c = self._aff
        if c is None:
            return None
        ok = np.ones(self._n, dtype=bool)
        exist = np.ones(self._n, dtype=bool)
        empty = True  # kube's len(affinityCounts) == 0: no matching pod on a node carrying any term's key
        for d, _ in self._aff_terms:
            ok &= d.has
            exist &= d.totals(c.held) > 0
            if empty and c.total_held(d.has):
                empty = False
        return ok & (exist | (empty and self._self_match))

    def _compute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        later = np.ones(self._n, dtype=bool)
        now = np.ones(self._n, dtype=bool)
        for c, d, _ in (*self._anti, *self._sym):
            later &= ~_blocked(c, d, False)
            if c.rel_total:
                now &= ~_blocked(c, d, True)
        ok = self._affinity_ok()
        if ok is not None:
            later &= ok
        return later, now, None

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        out = []
        for c, d, t in self._anti:
            assert t.selector is not None
            out.append(
                (
                    f"hold a pod matching this pod's anti-affinity {t.selector.describe()} on {d.key}",
                    _blocked(c, d, False),
                )
            )
        for c, d, t in self._sym:
            assert t.selector is not None
            out.append(
                (
                    f"hold a pod whose anti-affinity {t.selector.describe()} on {d.key} matches this pod",
                    _blocked(c, d, False),
                )
            )
        if self._aff is not None:
            for d, _ in self._aff_terms:
                out.append((f"lack the label {d.key} of this pod's affinity", ~d.has))
            ok = self._affinity_ok()
            assert ok is not None
            what = " and ".join(t.describe() for _, t in self._aff_terms)
            out.append((f"hold no pod matching this pod's affinity {what}", ~ok))
        return tuple(out)


class AffinityScore(CountedRule):
    """The preferred part (see the module docstring) for one pod shape: scores only."""

    filters = False

    def __init__(self, pods: SessionPods, entries: list[tuple[Counter, Domain, float]]) -> None:
        self._entries = entries
        super().__init__(len(pods.ssn.snap.nodes.names), [c for c, _, _ in entries])

    def _compute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        total = np.zeros(self._n)
        for c, d, w in self._entries:
            total += w * d.totals(c.held)
        ones = np.ones(self._n, dtype=bool)
        return ones, ones, K8S_PLUGINS * total


def self_matches(pods: SessionPods, pid: int, terms: tuple[PodAffinityTerm, ...]) -> bool:
    """Does the pod match all of its own affinity terms (kube's first-pod rule needs it)?"""
    return bool(terms) and all(pods.term_matches(t, NsMatcher.of(t), pid) for t in terms)
