"""Skip-top-owner kinds (``skiptopowner/skiptopowner.go``): Argo Workflow, Kubeflow Trainer's TrainJob.

Such an owner only wraps the real workload, so the pod is grouped by the next owner down (for a pod the
Workflow created directly, the pod itself), with that owner's grouper. The wrapper's labels and
annotations are inherited where the next owner does not set its own, so the Workflow's queue and priority
still apply.
"""

from __future__ import annotations

import dataclasses

from kai.api.workloads import Workload, pod_as_owner
from kai.podgrouper._default import default
from kai.podgrouper._model import Draft, Request


def skip_top_owner(req: Request) -> Draft:
    skipped = req.top
    below = req.owners[-2] if len(req.owners) > 1 else pod_as_owner(req.pod)
    meta = dataclasses.replace(
        below.meta,
        labels={**skipped.meta.labels, **below.meta.labels},
        annotations={**skipped.meta.annotations, **below.meta.annotations},
    )
    top = Workload(meta=meta, api_version=below.api_version, kind=below.kind, doc=below.doc)
    owners = (*req.owners[:-2], top) if len(req.owners) > 1 else ()
    grouper = req.registry(top.api_version, top.kind) or default
    d = grouper(Request(req.pod, top, owners or (top,), req.view, req.priority_class_exists, req.registry))
    d.grouper = d.grouper or grouper.__name__
    return d
