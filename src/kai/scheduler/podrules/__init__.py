"""Stateful node rules that tie a pod's place to other pods and to storage, as kube-scheduler's plugins do:
inter-pod affinity and anti-affinity (InterPodAffinity), topology spread (PodTopologySpread), host ports
(NodePorts), volumes (VolumeBinding, NodeVolumeLimits).

Each rule is a ``NodeRule`` (``kai.scheduler.framework``): a mask over node rows (and, where pods being
released still count, a stricter "now" mask), scores, and the reasons with numbers. The plugins
(``kai.scheduler.plugins``: predicates, podaffinity, podtopologyspread) make one ``RuleSet`` per Session,
ask it for a task's rules (shared between tasks of one shape) and forward every ``on_task_change`` to it.
Everything per node is a NumPy array; counts follow the Session pod by pod (``_counters``).

How pods being released (evicted, terminating) count, decided once for all rules:

* for anti-affinity (both directions) and host ports they count while they run: a pod may be *pipelined*
  onto their node (it binds once they are gone), not placed there now. That is what lets the eviction
  actions free an anti-affinity or a port: their simulations evict the victims (releasing) and pipeline the
  preemptor, as kube-scheduler's preemption removes the victims before it filters;
* for topology spread they never count (kube-scheduler skips terminating pods);
* for required affinity only pods that stay count (a pod is not placed next to one that is leaving);
* for attach limits they count (their volumes are attached until they are gone).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from kai.scheduler.model import TaskInfo, TaskStatus
from kai.scheduler.podrules._affinity import AffinityFilter, AffinityScore, owned_terms, self_matches
from kai.scheduler.podrules._counters import Counters, state_of
from kai.scheduler.podrules._ports import PortsRule
from kai.scheduler.podrules._rule import K8S_PLUGINS, CountedRule
from kai.scheduler.podrules._shared import SessionPods, shared
from kai.scheduler.podrules._spread import SpreadRule
from kai.scheduler.podrules._volumes import VolumeBook, VolumeRule
from kai.scheduler.session import Session

R = TypeVar("R")
_MISSING = object()


class RuleSet:
    """One plugin's pod rules for one Session: its counters, its rules by shape, the volume book if it keeps
    one. Made on the plugin's first ``node_filter`` of the Session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.pods: SessionPods = shared(ssn)
        self.counters = Counters(self.pods, ssn.snap.nodes.n)
        self._shapes: dict[Hashable, object] = {}
        self._by_pod: dict[Hashable, object] = {}
        self.volumes: VolumeBook | None = None

    def shape(self, key: Hashable, make: Callable[[], R]) -> R:
        got = self._shapes.get(key)
        if got is None:
            got = self._shapes[key] = make()
        return got  # type: ignore[return-value]

    def changed(self, task: TaskInfo, old_status: TaskStatus, old_node: int) -> None:
        """``on_task_change``: keep the counters (and the volume book) current."""
        self.counters.task_changed(task.index, old_status, old_node)
        if self.volumes is not None and task.pod.claims:
            ssn = self.ssn
            new_node = ssn.node[task.index]
            self.volumes.changed(
                task.index,
                task.pod,
                (old_node, state_of(old_status, old_node)),
                (new_node, state_of(ssn.status[task.index], new_node)),
            )

    # --- the rules of each family ----------------------------------------------------------------

    def ports(self, task: TaskInfo) -> PortsRule | None:
        ports = task.pod.host_ports
        if not ports:
            return None
        return self.shape(("ports", ports), lambda: PortsRule(self.counters, self.pods, ports))

    def volume_rule(self, task: TaskInfo) -> VolumeRule | None:
        pod = task.pod
        if not pod.claims:
            return None
        if self.volumes is None:
            self.volumes = VolumeBook(self.pods)
        book = self.volumes
        return self.shape(("volumes", pod.meta.namespace, pod.claims), lambda: VolumeRule(book, pod))

    def _by_labels(self, family: str, task: TaskInfo, make: Callable[[], R]) -> R:
        """*make*'s rule for *task*, cached per (namespace, labels, pod affinity): what the affinity rules of a
        pod depend on (the pods of one workload share it; finding a pod's symmetric terms is the costly part)."""
        pod = task.pod
        key = (family, pod.meta.namespace, tuple(pod.meta.labels.items()), pod.pod_affinity)
        got = self._by_pod.get(key, _MISSING)
        if got is _MISSING:
            got = self._by_pod[key] = make()
        return got  # type: ignore[return-value]

    def affinity_filter(self, task: TaskInfo) -> AffinityFilter | None:
        return self._by_labels("filter", task, lambda: self._affinity_filter(task))

    def _affinity_filter(self, task: TaskInfo) -> AffinityFilter | None:
        aff = task.pod.pod_affinity
        required = aff.required if aff is not None else ()
        anti = aff.anti_required if aff is not None else ()
        owned = owned_terms(self.ssn, self.pods)
        symmetric: tuple = ()
        if "anti" in owned.kinds:
            symmetric = tuple(o[1] for o in owned.matching(task.index, frozenset({"anti"})))
        if not required and not anti and not symmetric:
            return None
        self_match = self_matches(self.pods, task.index, required)
        key = ("affinity", required, anti, symmetric, self_match)
        return self.shape(key, lambda: AffinityFilter(self.pods, self.counters, required, anti, symmetric, self_match))

    def affinity_score(self, task: TaskInfo, hard_weight: float) -> AffinityScore | None:
        return self._by_labels("score", task, lambda: self._affinity_score(task, hard_weight))

    def _affinity_score(self, task: TaskInfo, hard_weight: float) -> AffinityScore | None:
        aff = task.pod.pod_affinity
        preferred = aff.preferred if aff is not None else ()
        anti = aff.anti_preferred if aff is not None else ()
        kinds = frozenset({"pref", "antipref"} | ({"aff"} if hard_weight > 0 else set()))
        owned = owned_terms(self.ssn, self.pods)
        symmetric = owned.matching(task.index, kinds) if owned.kinds & kinds else ()
        if not preferred and not anti and not symmetric:
            return None

        def make() -> AffinityScore:
            pods, counters = self.pods, self.counters
            entries = [
                (counters.sums(counters.term(w.term), pods.domain(w.term.topology_key)), float(w.weight))
                for w in preferred
            ]
            entries += [
                (counters.sums(counters.term(w.term), pods.domain(w.term.topology_key)), -float(w.weight)) for w in anti
            ]
            for kind, term, weight in symmetric:
                sign = {"pref": weight, "antipref": -weight, "aff": hard_weight}[kind]
                entries.append(
                    (counters.sums(counters.owners(kind, term, weight), pods.domain(term.topology_key)), float(sign))
                )
            return AffinityScore(pods, entries)

        return self.shape(("score", preferred, anti, symmetric, hard_weight), make)

    def spread(self, task: TaskInfo) -> SpreadRule | None:
        pod = task.pod
        if not pod.spread:
            return None
        matches = tuple(c.selector is not None and c.selector.matches(pod.meta.labels) for c in pod.spread)
        key = ("spread", pod.meta.namespace, pod.spread, matches, task.signature)
        return self.shape(key, lambda: SpreadRule(self.pods, self.counters, pod, matches))


__all__ = ["K8S_PLUGINS", "CountedRule", "RuleSet"]
