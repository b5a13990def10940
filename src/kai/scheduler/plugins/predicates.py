"""predicates: the nodes a pod may ever use (KAI's predicates plugin: kube-scheduler's static filters).

Node readiness, ``nodeSelector``, required node affinity (``kai.scheduler.predicates``, vectorized over nodes
and cached per scheduling signature by the Session), and, for a fractional GPU request, nodes whose GPUs can
be shared (not MIG, with GPUs).
"""

from __future__ import annotations

from typing import ClassVar

from kai.api.objects import Pod
from kai.scheduler.framework import NodeVerdict, Plugin
from kai.scheduler.model import GpuShare
from kai.scheduler.predicates import static_fit
from kai.scheduler.session import Session


class Predicates(Plugin):
    name: ClassVar[str] = "predicates"

    def predicate(self, ssn: Session, pod: Pod, share: GpuShare | None) -> NodeVerdict:
        verdict = static_fit(ssn.snap.nodes, ssn.labels, pod)
        if share is None:
            return verdict
        no = ~ssn.snap.gpus.sharing_nodes
        return NodeVerdict(verdict.mask & ~no, (*verdict.failures, ("have no GPUs to share (no GPUs, or MIG)", no)))
