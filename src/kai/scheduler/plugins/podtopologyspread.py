"""podtopologyspread (kai): pod topology spread constraints (kube-scheduler's PodTopologySpread plugin).

``whenUnsatisfiable: DoNotSchedule`` constraints filter, ``ScheduleAnyway`` ones score
(``kai.scheduler.podrules``: maxSkew, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys).
KAI does not run this plugin (its scheduler ignores the constraints); kai does, enabled by default, so a pod
spec means under kai what it means under kube-scheduler. kube-scheduler's cluster-wide default constraints
(for pods of Services and ReplicaSets that set none) are not applied.
"""

from __future__ import annotations

from typing import ClassVar

from kai.scheduler.framework import NodeRule
from kai.scheduler.model import TaskInfo
from kai.scheduler.plugins.predicates import PodRulesPlugin
from kai.scheduler.session import Session


class PodTopologySpread(PodRulesPlugin):
    name: ClassVar[str] = "podtopologyspread"

    def node_filter(self, ssn: Session, task: TaskInfo) -> NodeRule | None:
        return self._rule_set(ssn).spread(task)
