"""What every pod rule of a Session reads and nobody changes: the pods that can sit on nodes, where they are,
their labels indexed, the topology domains of each node label, and namespace labels.

Rules: built once per Session on first use (``shared(ssn)``, kept in ``Session.cache``), so a cycle without
inter-pod rules pays nothing. A pod has one id (``pid``) for the Session: a task's index, or
``len(tasks) + i`` for the i-th of ``Snapshot.others`` (pods kai does not schedule but that count). A task's
place is read from the Session (it changes); another pod's never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kai.api.objects import Pod, namespace_labels
from kai.api.podspec import PodAffinityTerm
from kai.api.selectors import LabelSelector
from kai.scheduler.model import HOLDING, TaskStatus
from kai.scheduler.session import Session

NONE, HELD, RELEASING = 0, 1, 2  # where a pod is: nowhere, holding its node, terminating on it
_NO_ROWS = np.zeros(0, dtype=np.int64)
_RELEASING = TaskStatus.RELEASING


@dataclass(slots=True)
class Domain:
    """The domains of one topology key (a node label): per node its domain id, -1 where the label is missing."""

    key: str
    dom: np.ndarray  # (n,) int64
    has: np.ndarray  # (n,) bool: the node carries the label
    count: int  # number of distinct values
    names: tuple[str, ...]  # value of each domain id
    per_node: bool  # each domain is one node (kubernetes.io/hostname, usually): counts per domain = per node
    everywhere: bool  # every node carries the label
    _members: list[np.ndarray] | None = None  # per domain id, its rows (made on first use)
    _lists: tuple[list[int], list[bool]] | None = None

    def lists(self) -> tuple[list[int], list[bool]]:
        """(dom, has) as Python lists, for per-pod updates (made once, shared by every DomainSums)."""
        if self._lists is None:
            self._lists = (self.dom.tolist(), self.has.tolist())
        return self._lists

    def rows_of(self, node: int) -> np.ndarray:
        """The rows in *node*'s domain (none if the node lacks the label)."""
        d = int(self.dom[node])
        if d < 0:
            return _NO_ROWS
        if self.per_node:
            return np.array([node], dtype=np.int64)
        return self.members()[d]

    def members(self) -> list[np.ndarray]:
        """Per domain id, its rows (ascending)."""
        if self._members is None:
            rows = np.flatnonzero(self.has)
            order = rows[np.argsort(self.dom[rows], kind="stable")]
            bounds = np.searchsorted(self.dom[order], np.arange(self.count + 1))
            self._members = [order[bounds[i] : bounds[i + 1]] for i in range(self.count)]
        return self._members


@dataclass(frozen=True, slots=True)
class NsMatcher:
    """The namespaces an affinity term covers: listed names, or those whose labels match a selector."""

    names: frozenset[str]
    selector: LabelSelector | None

    @staticmethod
    def of(term: PodAffinityTerm) -> NsMatcher:
        return NsMatcher(frozenset(term.namespaces), term.namespace_selector)


class SessionPods:
    """The pods of a Session that can be on a node, and the shared indexes over them (see the module docstring)."""

    def __init__(self, ssn: Session) -> None:
        snap = ssn.snap
        self.ssn = ssn
        self.n_tasks = len(snap.tasks)
        self.pods: list[Pod] = [t.pod for t in snap.tasks] + [o.pod for o in snap.others]
        self._other_at = [(o.node, RELEASING if o.releasing else HELD) for o in snap.others]
        self._domains: dict[str, Domain] = {}
        self._by_label: dict[tuple[str, str], list[int]] | None = None
        self._by_key: dict[str, list[int]] | None = None
        self._ns_labels: dict[str, Mapping[str, str]] = {}
        self._ns_match: dict[tuple[NsMatcher, str], bool] = {}

    def __len__(self) -> int:
        return len(self.pods)

    def where(self, pid: int) -> tuple[int, int]:
        """(node row, NONE | HELD | RELEASING) of pod *pid* now."""
        if pid < self.n_tasks:
            ssn = self.ssn
            node = ssn.node[pid]
            if node < 0:
                return -1, NONE
            status = ssn.status[pid]
            if status in HOLDING:  # a pod StuckInReleasing stays where it is
                return node, HELD
            return (node, RELEASING) if status == _RELEASING else (-1, NONE)
        return self._other_at[pid - self.n_tasks]

    def namespace(self, pid: int) -> str:
        return self.pods[pid].meta.namespace or ""

    def labels(self, pid: int) -> Mapping[str, str]:
        return self.pods[pid].meta.labels

    # --- labels ---------------------------------------------------------------------------------

    def _index(self) -> None:
        by_label: dict[tuple[str, str], list[int]] = {}
        by_key: dict[str, list[int]] = {}
        for pid, pod in enumerate(self.pods):
            for kv in pod.meta.labels.items():
                by_label.setdefault(kv, []).append(pid)
                by_key.setdefault(kv[0], []).append(pid)
        self._by_label, self._by_key = by_label, by_key

    def candidates(self, selector: LabelSelector) -> list[int] | range:
        """Pods that may match *selector* (a superset, from the label index; all pods when it cannot narrow)."""
        if self._by_label is None:
            self._index()
        assert self._by_label is not None and self._by_key is not None
        eq = selector.equalities()
        if eq:
            key, values = min(eq, key=lambda kv: sum(len(self._by_label.get((kv[0], v), ())) for v in kv[1]))
            if len(values) == 1:
                return self._by_label.get((key, values[0]), [])
            return sorted({p for v in values for p in self._by_label.get((key, v), ())})
        exists = [r.key for r in selector.match_expressions if r.operator == "Exists"]
        if exists:
            return self._by_key.get(exists[0], [])
        return range(len(self.pods))

    # --- namespaces -----------------------------------------------------------------------------

    def ns_labels(self, namespace: str) -> Mapping[str, str]:
        got = self._ns_labels.get(namespace)
        if got is None:
            got = self._ns_labels[namespace] = self.ssn.snap.namespaces.get(namespace) or namespace_labels(namespace)
        return got

    def in_namespaces(self, matcher: NsMatcher, namespace: str) -> bool:
        if namespace in matcher.names:
            return True
        if matcher.selector is None:
            return False
        key = (matcher, namespace)
        got = self._ns_match.get(key)
        if got is None:
            got = self._ns_match[key] = matcher.selector.matches(self.ns_labels(namespace))
        return got

    def term_matches(self, term: PodAffinityTerm, matcher: NsMatcher, pid: int) -> bool:
        """Does pod *pid* match *term* (its selector, in the term's namespaces)? kube's AffinityTerm.Matches."""
        return (
            term.selector is not None
            and self.in_namespaces(matcher, self.namespace(pid))
            and term.selector.matches(self.labels(pid))
        )

    # --- topology -------------------------------------------------------------------------------

    def node_domain(self) -> Domain:
        """Every node its own domain (host ports, attach limits: per node)."""
        got = self._domains.get("")
        if got is None:
            n = len(self.ssn.snap.nodes.names)
            got = self._domains[""] = Domain(
                "", np.arange(n, dtype=np.int64), np.ones(n, dtype=bool), n, (), True, True
            )
        return got

    def domain(self, key: str) -> Domain:
        got = self._domains.get(key)
        if got is None:
            values, present = self.ssn.labels.column(key)
            dom = np.full(len(values), -1, dtype=np.int64)
            names: tuple[str, ...] = ()
            if present.any():
                uniq, inverse = np.unique(values[present].astype(str), return_inverse=True)
                dom[present] = inverse
                names = tuple(uniq.tolist())
            count = len(names)
            n_have = int(present.sum())
            got = self._domains[key] = Domain(key, dom, present, count, names, count == n_have, n_have == len(dom))
        return got


def shared(ssn: Session) -> SessionPods:
    """The Session's SessionPods (made on first use)."""
    got = ssn.cache.get("podrules")
    if got is None:
        got = ssn.cache["podrules"] = SessionPods(ssn)
    return got
