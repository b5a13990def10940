"""Knative Serving (``knative/knative.go``): a Service's pods are grouped per Revision.

With KAI's default ``--knative-gang-schedule``: one PodGroup per Revision, ``pg-<revision>-<uid>``, owned
by the Revision, minMember = its ``autoscaling.knative.dev/min-scale`` annotation (default 1), priority
inference, queue and labels from the Revision. The Revision is the one named by the pod's
``serving.knative.dev/revision`` label. KAI's backward-compatible per-pod groups (kept only for
revisions that already had them) have nothing to keep in a fresh cluster and are not modelled.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.workloads import annotation_int
from kai.podgrouper._default import draft, origin, priority_class_for
from kai.podgrouper._model import Draft, Request


def knative_service(req: Request) -> Draft:
    name = req.pod.meta.labels.get(C.LABEL_KNATIVE_REVISION)
    if not name:
        raise ManifestError(
            "a Knative Service's pod needs this label",
            obj=origin(req.pod).ref,
            field=f"metadata.labels.{C.LABEL_KNATIVE_REVISION}",
        )
    ns = req.pod.meta.namespace or "default"
    revision = next((o for o in req.owners if o.kind == "Revision" and o.meta.name == name), None)
    if revision is None:
        revision = req.view.get("serving.knative.dev/v1", "Revision", ns, name)
    if revision is None:
        raise ManifestError(
            f"Revision {ns}/{name} does not exist",
            obj=origin(req.pod).ref,
            field=f"metadata.labels.{C.LABEL_KNATIVE_REVISION}",
        )
    sub = Request(req.pod, revision, (revision,), req.view, req.priority_class_exists, req.registry)
    d = draft(sub)
    d.priority_class, d.priority_from = priority_class_for(sub, revision, C.PRIORITY_INFERENCE)
    min_scale = annotation_int(revision.ref, revision.meta.annotations, C.ANNOTATION_KNATIVE_MIN_SCALE)
    d.min_member = 1 if min_scale is None else min_scale
    if d.min_member < 0:
        raise ManifestError(
            f"{min_scale} must not be negative",
            obj=revision.ref,
            field=f"metadata.annotations.{C.ANNOTATION_KNATIVE_MIN_SCALE}",
        )
    # KAI's revision PodGroup carries no topology, delays or preemptibility of its own.
    d.topology = None
    d.preemption_delay = d.staleness_grace_period = None
    d.preemptibility = ""
    return d
