"""predicates: the nodes a pod may ever use (KAI's predicates plugin: kube-scheduler's static filters).

Node readiness, ``nodeSelector``, required node affinity (``kai.scheduler.predicates``, vectorized over nodes
and cached per scheduling signature by the Session), KAI's MIG rules (no legacy MIG pod is placed, no MIG pod
beside one), and, for a fractional GPU request, nodes whose GPUs can be shared (not MIG, with GPUs).
"""

from __future__ import annotations

from typing import ClassVar

from kai.api.objects import Pod
from kai.scheduler.framework import NodeVerdict, Plugin
from kai.scheduler.model import GpuShare
from kai.scheduler.predicates import mig_fit, static_fit
from kai.scheduler.session import Session


class Predicates(Plugin):
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
