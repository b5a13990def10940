"""predicates: the nodes a pod may use (KAI's predicates plugin: kube-scheduler's filters).

Static, per scheduling signature (``predicate``): node readiness, ``nodeSelector``, required node affinity,
taints (``kai.scheduler.predicates``, vectorized over nodes and cached per signature by the Session), KAI's
MIG rules (no legacy MIG pod is placed, no MIG pod beside one), and, for a fractional GPU request, nodes whose
GPUs can be shared (not MIG, with GPUs).

Stateful, per task (``node_filter``, kept current by ``on_task_change``; ``kai.scheduler.podrules``): the
filters KAI's predicates plugin runs from kube-scheduler that depend on the other pods: host ports
(NodePorts), volumes (VolumeBinding, and NodeVolumeLimits' CSI attach limits) and required inter-pod affinity
and anti-affinity (InterPodAffinity's filter; its score is the podaffinity plugin). Topology spread, which
KAI does not run, is kai's podtopologyspread plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kai.api.objects import Pod
from kai.scheduler.framework import NodeRule, NodeVerdict, Plugin
from kai.scheduler.model import GpuShare, TaskInfo, TaskStatus
from kai.scheduler.podrules import RuleSet
from kai.scheduler.predicates import mig_fit, static_fit
from kai.scheduler.session import Session


class PodRulesPlugin(Plugin):
    """A plugin whose stateful rules come from a ``RuleSet`` of its own (made on its first ``node_filter``)."""

    def __init__(self, args: Mapping[str, Any] | None = None, *, where: str = "") -> None:
        super().__init__(args, where=where)
        self._rules: RuleSet | None = None

    def _rule_set(self, ssn: Session) -> RuleSet:
        if self._rules is None:
            self._rules = RuleSet(ssn)
        return self._rules

    def stateful(self, ssn: Session) -> bool:
        return ssn.snap.pod_rules  # no pod has affinity, spread, ports or claims: nothing to follow

    def on_task_change(self, ssn: Session, task: TaskInfo, old_status: TaskStatus, old_node: int) -> None:
        if self._rules is not None:
            self._rules.changed(task, old_status, old_node)


class Predicates(PodRulesPlugin):
    name: ClassVar[str] = "predicates"

    def predicate(self, ssn: Session, pod: Pod, share: GpuShare | None) -> NodeVerdict:
        verdict = static_fit(ssn.snap.nodes, ssn.labels, pod)
        mig = mig_fit(ssn.snap.nodes, pod)
        if mig is not None:
            verdict = NodeVerdict(verdict.mask & mig.mask, (*verdict.failures, *mig.failures))
        if share is None:
            return verdict
        no = ~ssn.snap.gpus.sharing_nodes
        return NodeVerdict(verdict.mask & ~no, (*verdict.failures, ("have no GPUs to share (no GPUs, or MIG)", no)))

    def node_filter(self, ssn: Session, task: TaskInfo) -> tuple[NodeRule, ...]:
        rules = self._rule_set(ssn)
        return tuple(r for r in (rules.ports(task), rules.volume_rule(task), rules.affinity_filter(task)) if r)
