"""podaffinity: preferred inter-pod affinity and anti-affinity as node scores (KAI's podaffinity plugin: the
score of kube-scheduler's InterPodAffinity, scaled as KAI scales Kubernetes plugin scores, x 1,000,000).

The required terms filter in the predicates plugin, as in KAI. Argument ``hardPodAffinityWeight`` (0-100):
what each required affinity term of a pod already placed adds to the nodes of its domain when it matches
the incoming pod; KAI passes kube-scheduler's plugin empty arguments, hence 0 (kube-scheduler's default
profile uses 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kai.scheduler.framework import Arg, NodeRule
from kai.scheduler.model import TaskInfo
from kai.scheduler.plugins._args import number
from kai.scheduler.plugins.predicates import PodRulesPlugin
from kai.scheduler.session import Session


def _weight(value: Any) -> float:
    w = number(0)(value)
    if w > 100:
        raise ValueError(f"{value!r} must be from 0 to 100")
    return w


class PodAffinity(PodRulesPlugin):
    name: ClassVar[str] = "podaffinity"
    ARGS: ClassVar[Mapping[str, Arg]] = {"hardPodAffinityWeight": _weight}
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"hardPodAffinityWeight": 0.0}

    def node_filter(self, ssn: Session, task: TaskInfo) -> NodeRule | None:
        return self._rule_set(ssn).affinity_score(task, self.args["hardPodAffinityWeight"])
