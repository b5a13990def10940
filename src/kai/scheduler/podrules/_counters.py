"""Per-node counts of pods of a kind, kept current as the Session changes: what the pod rules read.

Theory of operation. A ``Counter`` counts, per node row, the pods of one kind that hold the node and those
terminating on it (kube-scheduler's NodeInfo keeps terminating pods until they are gone; whether a rule
counts them is the rule's business). A kind is a membership test on a pod that never changes during a
Session: "matches selector S in namespaces N" (an affinity term, a spread constraint), "matches all of these
terms" (required affinity), "owns this term" (the symmetric side: pods whose own anti-affinity may repel
others), "binds a host port that conflicts with P".

A plugin keeps one ``Counters`` registry. A counter is made when a rule first needs it, counted from the
Session's current state through the label index (only candidate pods are looked at), and from then on
``changed`` keeps it current: the plugin calls it from ``on_task_change`` for every change of a task's
status or node, rollbacks included. Which counters a pod belongs to is worked out once per pod, through a
dispatch index keyed by what a member must carry (a label, a label key, a term it owns, a port), and a
counter made later adds itself to the pods already worked out. A counter passes each change on to its
listeners: ``DomainSums`` (the counts per topology domain a rule reads), which tell their rules which node
moved, so a rule recomputes only the rows of that node's domain.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol

import numpy as np

from kai.api.podspec import HostPort, PodAffinityTerm
from kai.api.selectors import LabelSelector
from kai.scheduler.model import HOLDING, TaskStatus
from kai.scheduler.podrules._shared import HELD, NONE, RELEASING, Domain, NsMatcher, SessionPods

Member = Callable[[int], bool]


class Counter:
    """Pods of one kind per node, sparse: ``on[node] = [holding, terminating]`` (most counters cover a few
    nodes). Every change is passed on to its listeners (``DomainSums``)."""

    __slots__ = ("held_total", "label", "listeners", "on", "rel_total")

    def __init__(self, label: str) -> None:
        self.on: dict[int, list[int]] = {}
        self.held_total = 0
        self.rel_total = 0  # most counters never see a terminating pod, and rules skip them then
        self.label = label  # for debugging
        self.listeners: list[Listener] = []

    def add(self, node: int, state: int, delta: int) -> None:
        counts = self.on.get(node)
        if counts is None:
            counts = self.on[node] = [0, 0]
        if state == HELD:
            counts[0] += delta
            self.held_total += delta
        else:
            counts[1] += delta
            self.rel_total += delta
        for listener in self.listeners:
            listener.touched(node, state, delta)


class Listener(Protocol):
    def touched(self, node: int, state: int, delta: int) -> None: ...


class DomainSums:
    """One counter summed per domain of one topology key, over some nodes (all, or a rule's eligible ones):
    ``held[d]`` (and ``rel[d]`` once a pod there terminates), kept current by the counter; every change is
    passed on to ``rules``."""

    __slots__ = ("_dom", "_keep", "counter", "domain", "held", "rel", "rules", "total_held")

    def __init__(self, counter: Counter, domain: Domain, nodes: np.ndarray | None = None) -> None:
        self.counter = counter
        self.domain = domain
        self._dom, has = domain.lists()
        self._keep = has if nodes is None else (domain.has & nodes).tolist()
        self.held = np.zeros(domain.count, dtype=np.int64)
        self.rel: np.ndarray | None = None
        self.total_held = 0
        self.rules: list[Any] = []  # CountedRule (kai.scheduler.podrules._rule): told which node moved
        for node, (held, rel) in counter.on.items():
            if self._keep[node]:
                d = self._dom[node]
                self.held[d] += held
                self.total_held += held
                if rel:
                    self._rel()[d] += rel
        counter.listeners.append(self)

    def _rel(self) -> np.ndarray:
        if self.rel is None:
            self.rel = np.zeros(self.domain.count, dtype=np.int64)
        return self.rel

    def touched(self, node: int, state: int, delta: int) -> None:
        if not self._keep[node]:
            return
        d = self._dom[node]
        if state == HELD:
            self.held[d] += delta
            self.total_held += delta
        else:
            self._rel()[d] += delta
        for rule in self.rules:
            rule.touched(self, node)

    def at(self, rows: np.ndarray | slice, releasing: bool = False) -> np.ndarray:
        """Per row, the count of its domain (0 where the row has no domain); with *releasing*, held + releasing."""
        per_domain = self.held + self.rel if releasing and self.rel is not None else self.held
        dom = self.domain.dom[rows]
        if self.domain.everywhere:
            return per_domain[dom]
        return np.where(dom >= 0, per_domain[np.maximum(dom, 0)], 0)


def state_of(status: TaskStatus, node: int) -> int:
    if node < 0:
        return NONE
    if status in HOLDING:
        return HELD
    return RELEASING if status == TaskStatus.RELEASING else NONE


def _owned(pods: SessionPods, pid: int) -> list[Hashable]:
    """The terms pod *pid* owns, as the dispatch keys of owner counters."""
    aff = pods.pods[pid].pod_affinity
    if aff is None:
        return []
    keys: list[Hashable] = [("O", "anti", t, 0) for t in aff.anti_required]
    keys += [("O", "aff", t, 0) for t in aff.required]
    keys += [("O", "pref", w.term, w.weight) for w in aff.preferred]
    keys += [("O", "antipref", w.term, w.weight) for w in aff.anti_preferred]
    return keys


class Counters:
    """One plugin's counters (see the module docstring)."""

    def __init__(self, pods: SessionPods, n_nodes: int) -> None:
        self.pods = pods
        self.n = n_nodes
        self._made: dict[Hashable, Counter] = {}
        self._dispatch: dict[Hashable, list[tuple[Counter, Member]]] = {}
        self._scan: list[tuple[Counter, Member]] = []
        self._of_pid: dict[int, list[Counter]] = {}
        self._of_shape: dict[Hashable, list[Counter]] = {}
        self._owners: dict[Hashable, list[int]] | None = None
        self._sums: dict[Hashable, DomainSums] = {}
        self._ports: dict[tuple[str, int], list[int]] | None = None

    # --- making counters ----------------------------------------------------------------------

    def _make(
        self, key: Hashable, member: Member, candidates: Iterable[int], dispatch: list[Hashable] | None
    ) -> Counter:
        got = self._made.get(key)
        if got is not None:
            return got
        c = self._made[key] = Counter(str(key)[:80])
        pods, of_pid = self.pods, self._of_pid
        for pid in candidates:
            if not member(pid):
                continue
            node, state = pods.where(pid)
            if state != NONE:
                c.add(node, state, 1)
            known = of_pid.get(pid)
            if known is not None:  # worked out before this counter existed
                known.append(c)
        entry = (c, member)
        if dispatch is None:
            self._scan.append(entry)
        else:
            for d in dispatch:
                self._dispatch.setdefault(d, []).append(entry)
        return c

    def term(self, term: PodAffinityTerm) -> Counter:
        """Pods matching *term*'s selector in its namespaces."""
        return self.terms((term,))

    def terms(self, terms: tuple[PodAffinityTerm, ...]) -> Counter:
        """Pods matching every one of *terms* (a pod's required affinity: kube counts a pod only if it matches
        all of them)."""
        pods = self.pods
        matchers = [(t, NsMatcher.of(t)) for t in terms]
        first = terms[0].selector

        def member(pid: int) -> bool:
            return all(pods.term_matches(t, m, pid) for t, m in matchers)

        if first is None:
            return self._make(("T", terms), lambda pid: False, (), [])
        return self._make(("T", terms), member, pods.candidates(first), _label_dispatch(first))

    def selector(self, selector: LabelSelector | None, namespace: str) -> Counter:
        """Pods of *namespace* matching *selector* (a spread constraint counts these)."""
        pods = self.pods
        if selector is None:
            return self._make(("S", None, namespace), lambda pid: False, (), [])

        def member(pid: int) -> bool:
            return pods.namespace(pid) == namespace and selector.matches(pods.labels(pid))

        return self._make(("S", selector, namespace), member, pods.candidates(selector), _label_dispatch(selector))

    def owners(self, kind: str, term: PodAffinityTerm, weight: int = 0) -> Counter:
        """Pods that own *term* as an (anti-)affinity term of *kind* (anti, aff, pref, antipref) with *weight*."""
        key = ("O", kind, term, weight)
        if self._owners is None:
            self._owners = {}
            for pid in range(len(self.pods)):
                for k in _owned(self.pods, pid):
                    self._owners.setdefault(k, []).append(pid)
        owners = self._owners.get(key, [])
        members = set(owners)
        return self._make(key, members.__contains__, owners, [key])

    def port(self, port: HostPort) -> Counter:
        """Pods binding a host port that conflicts with *port*."""
        if self._ports is None:
            self._ports = {}
            for pid, pod in enumerate(self.pods.pods):
                for hp in pod.host_ports:
                    self._ports.setdefault((hp.protocol, hp.port), []).append(pid)
        pods = self.pods

        def member(pid: int) -> bool:
            return any(hp.conflicts(port) for hp in pods.pods[pid].host_ports)

        key = ("P", port.protocol, port.port)
        return self._make(("P", port), member, self._ports.get((port.protocol, port.port), []), [key])

    def sums(self, counter: Counter, domain: Domain, nodes: np.ndarray | None = None) -> DomainSums:
        """*counter* summed per domain of *domain* (over *nodes*), shared by the rules that ask for the same."""
        key = (id(counter), domain.key, None if nodes is None else nodes.tobytes())
        got = self._sums.get(key)
        if got is None:
            got = self._sums[key] = DomainSums(counter, domain, nodes)
        return got

    # --- following the Session -----------------------------------------------------------------

    def _members(self, pid: int) -> list[Counter]:
        got = self._of_pid.get(pid)
        if got is not None:
            return got
        pods = self.pods
        pod = pods.pods[pid]
        # membership depends on the namespace, labels, affinity terms and ports only: pods of one workload share
        # it (a pod's own list is a copy, which counters made later extend pod by pod)
        shape = (pod.meta.namespace, tuple(pod.meta.labels.items()), pod.pod_affinity, pod.host_ports)
        like = self._of_shape.get(shape)
        if like is not None:
            got = self._of_pid[pid] = list(like)
            return got
        keys: list[Hashable] = [("L", k, v) for k, v in pod.meta.labels.items()]
        keys += [("K", k) for k in pod.meta.labels]
        keys += _owned(pods, pid)
        keys += [("P", hp.protocol, hp.port) for hp in pod.host_ports]
        seen: set[int] = set()
        out: list[Counter] = []
        dispatch = self._dispatch
        for entries in [dispatch.get(k, ()) for k in keys] + [self._scan]:
            for c, member in entries:
                if id(c) not in seen and member(pid):
                    seen.add(id(c))
                    out.append(c)
        self._of_pid[pid] = out
        self._of_shape[shape] = out
        return out

    def changed(self, pid: int, old_node: int, old_state: int, new_node: int, new_state: int) -> None:
        """Pod *pid* moved from (old_node, old_state) to (new_node, new_state)."""
        if not self._made or (old_node, old_state) == (new_node, new_state) or (old_state == NONE == new_state):
            return
        for c in self._members(pid):
            if old_state != NONE:
                c.add(old_node, old_state, -1)
            if new_state != NONE:
                c.add(new_node, new_state, 1)

    def task_changed(self, task_index: int, old_status: TaskStatus, old_node: int) -> None:
        """``on_task_change``: the task's new place is in the Session."""
        ssn = self.pods.ssn
        new_node = ssn.node[task_index]
        self.changed(
            task_index, old_node, state_of(old_status, old_node), new_node, state_of(ssn.status[task_index], new_node)
        )


def _label_dispatch(selector: LabelSelector) -> list[Hashable] | None:
    """Dispatch keys a member of *selector* must carry one of (None: every pod must be checked)."""
    eq = selector.equalities()
    if eq:
        key, values = eq[0]
        return [("L", key, v) for v in values]
    exists = [r.key for r in selector.match_expressions if r.operator == "Exists"]
    if exists:
        return [("K", exists[0])]
    return None
