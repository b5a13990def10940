"""batch/v1 Job and CronJob (``job/job_grouper.go``, ``cronjobs/crobjob-grouper.go``)."""

from __future__ import annotations

from kai.api import constants as C
from kai.api.errors import ManifestError, OwnerSpecError
from kai.api.workloads import annotation_int
from kai.podgrouper._default import draft, origin
from kai.podgrouper._model import Draft, Request


def job(req: Request) -> Draft:
    """One PodGroup per Job, minMember 1 unless the Job's ``kai.scheduler/batch-min-member`` says otherwise
    (so a parallel Job can be a gang). KAI's --search-legacy-pg (reuse an old per-pod group) has nothing
    to find in a fresh cluster and is not modelled."""
    d = draft(req)
    override = annotation_int(req.top.ref, req.top.meta.annotations, C.ANNOTATION_BATCH_MIN_MEMBER)
    if override is not None:
        if override < 0:
            raise OwnerSpecError(
                f"{override} must not be negative",
                obj=req.top.ref,
                field=f"metadata.annotations.{C.ANNOTATION_BATCH_MIN_MEMBER}",
            )
        d.min_member = override
    return d


def cronjob(req: Request) -> Draft:
    """Grouped by the pod's own Job, with KAI's default grouper (minMember 1; batch-min-member is not read,
    as in KAI's CronJob plugin), so every run of the CronJob is its own job."""
    ref = next((o for o in req.pod.meta.owner_references if o.kind == "Job"), None)
    if ref is None:
        raise ManifestError(
            "a CronJob's pod needs an owner reference to its Job",
            obj=origin(req.pod).ref,
            field="metadata.ownerReferences",
        )
    ns = req.pod.meta.namespace or "default"
    the_job = next((o for o in req.owners if o.kind == "Job" and o.meta.name == ref.name), None)
    if the_job is None:
        the_job = req.view.get("batch/v1", "Job", ns, ref.name)
    if the_job is None:
        raise ManifestError(f"Job {ns}/{ref.name} does not exist", obj=req.top.ref)
    return draft(Request(req.pod, the_job, (the_job,), req.view, req.priority_class_exists, req.registry))
