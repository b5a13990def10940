"""What the pod-grouper may change on a PodGroup it made before (kai-behaviour §7).

When an owner changes (a Job's parallelism, a RayCluster's worker groups), the grouper decides its
PodGroup again. The spec fields it sets follow the new decision; labels and annotations are merged over
the old ones, so what the scheduler wrote there (the stale timestamp) and the creation time stay, as
KAI's podgroup handler keeps them. Both backends use this rule: the embedded cluster stores the result,
the Kubernetes backend patches the difference.
"""

from __future__ import annotations

import dataclasses

from kai.api.objects import PodGroup

GROUPER_SPEC_FIELDS = (
    "min_member",
    "queue",
    "priority_class_name",
    "preemptibility",
    "min_subgroup",
    "sub_groups",
    "topology_constraint",
    "preemption_delay",
    "staleness_grace_period",
)  # the PodGroup fields the grouper decides; no other is its to change


def updated_podgroup(existing: PodGroup, decided: PodGroup) -> PodGroup:
    """*existing* itself when the new decision changes nothing, else a copy with *decided*'s spec and its
    labels and annotations merged over the old ones."""
    same = all(getattr(existing, f) == getattr(decided, f) for f in GROUPER_SPEC_FIELDS)
    labels = {**existing.meta.labels, **decided.meta.labels}
    annotations = {**existing.meta.annotations, **decided.meta.annotations}
    if same and labels == existing.meta.labels and annotations == existing.meta.annotations:
        return existing
    meta = dataclasses.replace(existing.meta, labels=labels, annotations=annotations)
    return dataclasses.replace(existing, meta=meta, **{f: getattr(decided, f) for f in GROUPER_SPEC_FIELDS})
