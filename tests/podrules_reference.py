"""An independent checker of kube-scheduler's pod rules, written straight from the Kubernetes API reference and
kube-scheduler's plugins (InterPodAffinity, PodTopologySpread, NodePorts, NodeAffinity, TaintToleration,
NodeResourcesFit): plain loops over nodes and pods, no NumPy, nothing shared with ``kai.scheduler.podrules``.

The unit tests compare kai's vectorized, incremental rules with it; the differential test against the real
kube-scheduler uses it to check that the node kai chose satisfies every constraint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kai.api.objects import Pod, SelectorTerm
from kai.api.podspec import ANY_HOST_IP, PodAffinityTerm
from kai.api.selectors import requirement_holds


@dataclass
class RNode:
    name: str
    labels: dict[str, str]
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    cpu_milli: int = 0  # allocatable
    unschedulable: bool = False


@dataclass
class RPod:
    pod: Pod
    node: str
    terminating: bool = False


@dataclass
class World:
    nodes: list[RNode]
    placed: list[RPod]
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def ns_labels(self, ns: str) -> Mapping[str, str]:
        return self.namespace_labels.get(ns, {"kubernetes.io/metadata.name": ns})


def _term_matches(world: World, term: PodAffinityTerm, pod: Pod) -> bool:
    ns = pod.meta.namespace or "default"
    in_ns = ns in term.namespaces or (
        term.namespace_selector is not None and term.namespace_selector.matches(world.ns_labels(ns))
    )
    return term.selector is not None and in_ns and term.selector.matches(pod.meta.labels)


def _same_domain(a: RNode, b: RNode, key: str) -> bool:
    return key in a.labels and key in b.labels and a.labels[key] == b.labels[key]


def _node(world: World, name: str) -> RNode | None:
    return next((n for n in world.nodes if n.name == name), None)


def node_affinity_ok(node: RNode, pod: Pod) -> bool:
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return False
    if pod.affinity_terms:
        return any(_selector_term(node, t) for t in pod.affinity_terms)
    return True


def _selector_term(node: RNode, term: SelectorTerm) -> bool:
    for r in term.match_expressions:
        if r.operator in ("Gt", "Lt"):
            v = node.labels.get(r.key)
            if v is None or not v.lstrip("-").isdigit():
                return False
            if (r.operator == "Gt" and not int(v) > int(r.values[0])) or (
                r.operator == "Lt" and not int(v) < int(r.values[0])
            ):
                return False
        elif not requirement_holds(r, node.labels):
            return False
    return all(r.operator == "In" and node.name in r.values for r in term.match_fields) if term.match_fields else True


def tolerated(node: RNode, pod: Pod) -> bool:
    for key, value, effect in node.taints:
        if effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(
            (not t.effect or t.effect == effect)
            and ((t.operator == "Exists" and (not t.key or t.key == key)) or (t.key == key and t.value == value))
            for t in pod.tolerations
        ):
            return False
    return True


def inter_pod_affinity_ok(world: World, node: RNode, pod: Pod) -> bool:
    """kube-scheduler's InterPodAffinity filter on one node (terminating pods count, as in NodeInfo)."""
    aff = pod.pod_affinity
    # existing pods' required anti-affinity that matches the incoming pod
    for e in world.placed:
        en = _node(world, e.node)
        if en is None or e.pod.pod_affinity is None:
            continue
        for t in e.pod.pod_affinity.anti_required:
            if _term_matches(world, t, pod) and _same_domain(node, en, t.topology_key):
                return False
    if aff is None:
        return True
    for t in aff.anti_required:
        for e in world.placed:
            en = _node(world, e.node)
            if en is not None and _term_matches(world, t, e.pod) and _same_domain(node, en, t.topology_key):
                return False
    if aff.required:
        if any(t.topology_key not in node.labels for t in aff.required):
            return False

        def matches_all(p: Pod) -> bool:
            return all(_term_matches(world, t, p) for t in aff.required)

        matching = [e for e in world.placed if not e.terminating and matches_all(e.pod) and _node(world, e.node)]
        exist = all(
            any(_same_domain(node, _node(world, e.node), t.topology_key) for e in matching)
            for t in aff.required  # type: ignore[arg-type]
        )
        if not exist:
            anywhere = any(
                t.topology_key in _node(world, e.node).labels
                for e in matching
                for t in aff.required  # type: ignore[union-attr]
            )
            return not anywhere and matches_all(pod)
    return True


def spread_ok(world: World, node: RNode, pod: Pod) -> bool:
    """kube-scheduler's PodTopologySpread filter (DoNotSchedule constraints) on one node."""
    hard = [c for c in pod.spread if c.hard]
    if not hard:
        return True
    ns = pod.meta.namespace or "default"
    for c in hard:
        if c.topology_key not in node.labels:
            return False
    for c in hard:
        counts: dict[str, int] = {}
        for n in world.nodes:
            if any(h.topology_key not in n.labels for h in hard):
                continue
            if c.node_affinity_policy == "Honor" and not node_affinity_ok(n, pod):
                continue
            if c.node_taints_policy == "Honor" and not tolerated(n, pod):
                continue
            value = n.labels[c.topology_key]
            counts.setdefault(value, 0)
            for e in world.placed:
                mine = e.node == n.name and not e.terminating and (e.pod.meta.namespace or "default") == ns
                if mine and c.selector is not None and c.selector.matches(e.pod.meta.labels):
                    counts[value] += 1
        least = min(counts.values()) if counts else 2**31 - 1
        if c.min_domains is not None and len(counts) < c.min_domains:
            least = 0
        me = 1 if c.selector is not None and c.selector.matches(pod.meta.labels) else 0
        if counts.get(node.labels[c.topology_key], 0) + me - least > c.max_skew:
            return False
    return True


def ports_ok(world: World, node: RNode, pod: Pod) -> bool:
    """kube-scheduler's NodePorts filter."""
    for e in world.placed:
        if e.node != node.name:
            continue
        for held in e.pod.host_ports:
            for want in pod.host_ports:
                if (
                    held.port == want.port
                    and held.protocol == want.protocol
                    and (held.host_ip == want.host_ip or ANY_HOST_IP in (held.host_ip, want.host_ip))
                ):
                    return False
    return True


def cpu_ok(world: World, node: RNode, pod: Pod) -> bool:
    used = sum(e.pod.requests.get("cpu", 0) for e in world.placed if e.node == node.name)
    return used + pod.requests.get("cpu", 0) <= node.cpu_milli


def violations(world: World, node: RNode, pod: Pod) -> list[str]:
    """Every rule the pod would break on *node* (empty: the node is a valid choice)."""
    out = []
    if node.unschedulable:
        out.append("unschedulable")
    if not node_affinity_ok(node, pod):
        out.append("node affinity")
    if not tolerated(node, pod):
        out.append("taints")
    if not ports_ok(world, node, pod):
        out.append("host ports")
    if not cpu_ok(world, node, pod):
        out.append("cpu")
    if not spread_ok(world, node, pod):
        out.append("topology spread")
    if not inter_pod_affinity_ok(world, node, pod):
        out.append("inter-pod affinity")
    return out
