"""Static predicates: which nodes a task may ever use, as one boolean mask per signature.

Rules: every check is a NumPy expression over all nodes (label columns are
built once per label key); the result is cached per scheduling signature
(node selector, required node affinity, tolerations), so a gang of 500
identical pods costs one evaluation. Resource fit is dynamic and lives in the
session. Each failing check keeps its own mask so explanations can count
"3 nodes do not match nodeSelector gpu=a100".
"""

from __future__ import annotations

import numpy as np

from kai.api.mig import legacy_mig_request, requests_mig
from kai.api.objects import Pod, SelectorRequirement, SelectorTerm, Toleration, parse_go_int
from kai.api.selectors import describe_requirement
from kai.scheduler.framework import NodeVerdict
from kai.scheduler.model import NodeTable

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


StaticFit = NodeVerdict  # the predicates' verdict: mask of nodes passing, and the failing nodes per reason


class NodeLabels:
    """Label columns over the node table, built lazily per key."""

    def __init__(self, nodes: NodeTable) -> None:
        self._nodes = nodes
        self._cols: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.names = np.array(nodes.names, dtype=object)
        self._taints: list[tuple[tuple[str, str, str], np.ndarray]] | None = None

    def taint_masks(self) -> list[tuple[tuple[str, str, str], np.ndarray]]:
        """Each distinct taint and the nodes carrying it, sorted by taint."""
        if self._taints is None:
            rows: dict[tuple[str, str, str], list[int]] = {}
            for i, node_taints in enumerate(self._nodes.taints):
                for t in node_taints:
                    rows.setdefault(t, []).append(i)
            self._taints = []
            for t, idx in sorted(rows.items()):
                m = np.zeros(self._nodes.n, dtype=bool)
                m[idx] = True
                self._taints.append((t, m))
        return self._taints

    def column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, present): values as an object array ('' where missing)."""
        col = self._cols.get(key)
        if col is None:
            vals = [lb.get(key) for lb in self._nodes.labels]
            present = np.array([v is not None for v in vals], dtype=bool)
            values = np.array([v if v is not None else "" for v in vals], dtype=object)
            col = self._cols[key] = (values, present)
        return col


def _requirement(labels: NodeLabels, r: SelectorRequirement, *, field: bool = False) -> np.ndarray:
    if field:
        values, present = labels.names, np.ones(len(labels.names), dtype=bool)
    else:
        values, present = labels.column(r.key)
    if r.operator == "In":
        return present & np.isin(values, list(r.values))
    if r.operator == "NotIn":
        return ~(present & np.isin(values, list(r.values)))
    if r.operator == "Exists":
        return present.copy()
    if r.operator == "DoesNotExist":
        return ~present
    bound = parse_go_int(r.values[0])
    if bound is None:
        return np.zeros(len(values), dtype=bool)
    gt = r.operator == "Gt"
    # exact integer comparison, per distinct label value (there are few), as Kubernetes compares int64s
    verdict: dict[str, bool] = {}
    for v in set(values[present].tolist()):
        num = parse_go_int(v)
        verdict[v] = num is not None and (num > bound if gt else num < bound)
    return present & np.array([verdict.get(v, False) for v in values.tolist()], dtype=bool)


def _tolerates(tolerations: tuple[Toleration, ...], key: str, value: str, effect: str) -> bool:
    for t in tolerations:
        if t.effect and t.effect != effect:
            continue
        if t.operator == "Exists" and (not t.key or t.key == key):
            return True
        if t.operator == "Equal" and t.key == key and t.value == value:
            return True
    return False


def selector_terms_fit(nodes: NodeTable, labels: NodeLabels, terms: tuple[SelectorTerm, ...]) -> np.ndarray:
    """(n,) bool: nodes matching some of *terms* (nodeSelectorTerms: ORed, each term's requirements ANDed)."""
    any_term = np.zeros(nodes.n, dtype=bool)
    for term in terms:
        m = np.ones(nodes.n, dtype=bool)
        for r in term.match_expressions:
            m &= _requirement(labels, r)
        for r in term.match_fields:
            m &= _requirement(labels, r, field=True)
        any_term |= m
    return any_term


def _affinity_parts(nodes: NodeTable, labels: NodeLabels, pod: Pod) -> list[tuple[str, np.ndarray]]:
    """(reason, rows passing) for the pod's nodeSelector and required node affinity."""
    parts = []
    for key, value in sorted(pod.node_selector.items()):
        values, present = labels.column(key)
        parts.append((f"do not match nodeSelector {key}={value}", present & (values == value)))
    if pod.affinity_terms:
        any_term = selector_terms_fit(nodes, labels, pod.affinity_terms)
        terms = " or ".join(
            "(" + ", ".join(describe_requirement(r) for r in (*t.match_expressions, *t.match_fields)) + ")"
            for t in pod.affinity_terms
        )
        parts.append((f"do not match required node affinity {terms}", any_term))
    return parts


def _taint_parts(labels: NodeLabels, pod: Pod) -> list[tuple[str, np.ndarray]]:
    """(reason, rows passing) for each NoSchedule / NoExecute taint the pod does not tolerate."""
    return [
        (f"have untolerated taint {key}{'=' + value if value else ''}:{effect}", ~m)
        for (key, value, effect), m in labels.taint_masks()
        if effect in _BLOCKING_EFFECTS and not _tolerates(pod.tolerations, key, value, effect)
    ]


def _all(n: int, parts: list[tuple[str, np.ndarray]]) -> np.ndarray:
    ok = np.ones(n, dtype=bool)
    for _, m in parts:
        ok &= m
    return ok


def node_affinity_fit(nodes: NodeTable, labels: NodeLabels, pod: Pod) -> np.ndarray:
    """(n,) bool: nodes matching the pod's nodeSelector and required node affinity (kube's RequiredNodeAffinity)."""
    return _all(nodes.n, _affinity_parts(nodes, labels, pod))


def taints_fit(nodes: NodeTable, labels: NodeLabels, pod: Pod) -> np.ndarray:
    """(n,) bool: nodes whose NoSchedule / NoExecute taints the pod tolerates."""
    return _all(nodes.n, _taint_parts(labels, pod))


def static_fit(nodes: NodeTable, labels: NodeLabels, pod: Pod) -> StaticFit:
    """Evaluate the static predicates of *pod* (a signature's representative) over all nodes."""
    failures: list[tuple[str, np.ndarray]] = []
    ok = nodes.schedulable.copy()
    if not ok.all():
        failures.append(("are not ready", ~nodes.schedulable))
    for reason, m in (*_affinity_parts(nodes, labels, pod), *_taint_parts(labels, pod)):
        if not m.all():
            failures.append((reason, ~m))
        ok &= m
    return StaticFit(ok, tuple(failures))


def mig_fit(nodes: NodeTable, pod: Pod) -> StaticFit | None:
    """KAI's MIG rules (node_info.PredicateByNodeResourcesType), None when they do not concern *pod*: a legacy
    MIG pod (MIG instances named in annotations) is never scheduled; a pod asking for MIG instances does not
    go to a node where a legacy MIG pod runs."""
    if legacy_mig_request(pod.meta.annotations):
        none = np.zeros(nodes.n, dtype=bool)
        return StaticFit(none, (("cannot take a legacy MIG pod (MIG instances named in annotations)", ~none),))
    if nodes.legacy_mig is not None and requests_mig(pod.requests):
        return StaticFit(~nodes.legacy_mig, (("run legacy MIG pods, so take no new MIG pod", nodes.legacy_mig),))
    return None
