"""apps/v1 Deployment (``deployment/deployment_grouper.go``). StatefulSet and ReplicaSet use the default
grouper directly (see the registry)."""

from __future__ import annotations

from kai.api import constants as C
from kai.api.workloads import pod_as_owner
from kai.podgrouper._default import draft, podgroup_name, priority_class_for
from kai.podgrouper._model import Draft, Request


def deployment(req: Request) -> Draft:
    """One PodGroup per pod (``pg-<pod>-<uid>``, owned by the pod), minMember 1, priority inference: the
    replicas of a serving Deployment scale one by one and must not wait for each other."""
    d = draft(req)
    d.owner = pod_as_owner(req.pod)
    d.priority_class, d.priority_from = priority_class_for(req, req.top, C.PRIORITY_INFERENCE)
    d.name = podgroup_name(req.pod)
    return d
