"""The pod-grouper: owner kind → PodGroup, as KAI's pod-grouper decides it (kai-behaviour §7).

Rules: pure code, no I/O. ``group_pod(pod, owners, view=...)`` takes a pod and its owner chain (owners
kept as raw manifests, ``kai.api.workloads.Workload``) and returns a ``Grouping``: the PodGroup kai should
create (name, minMember, queue, priority class, preemptibility, subgroups, topology constraint), the
subgroup the pod joins, and where the queue and priority came from. The grouper is chosen from one table
(``REGISTRY``, keyed by the top owner's group, version and kind); each family of kinds is one small
module under ``kinds/``. A kind missing from the table gets the default grouper and
``Grouping.unknown_kind`` says so, for the caller to report.
"""

from kai.podgrouper._default import default, podgroup_name
from kai.podgrouper._group import group_pod, skips_podgrouper
from kai.podgrouper._model import NO_CLUSTER, ClusterView, Draft, Grouper, Grouping, Origin, Request
from kai.podgrouper._registry import REGISTRY, lookup
from kai.podgrouper._update import GROUPER_SPEC_FIELDS, updated_podgroup

__all__ = [
    "GROUPER_SPEC_FIELDS",
    "NO_CLUSTER",
    "REGISTRY",
    "ClusterView",
    "Draft",
    "Grouper",
    "Grouping",
    "Origin",
    "Request",
    "default",
    "group_pod",
    "lookup",
    "podgroup_name",
    "skips_podgrouper",
    "updated_podgroup",
]
