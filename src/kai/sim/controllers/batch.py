"""batch/v1: Job → pods (parallelism, completions, Indexed mode); CronJob → one Job.

Simplifications: no backoff or failure policy (pods do not fail in kai sim); a CronJob runs its job once,
when the simulation starts, instead of on its schedule.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.objects import Pod
from kai.api.workloads import Workload
from kai.sim.controllers._base import (
    Created,
    Names,
    Result,
    View,
    active,
    namespace_of,
    object_manifest,
    pod_manifest,
    pods_of,
    workloads_of,
)


def _index(pod: Pod) -> int | None:
    text = pod.meta.labels.get(C.LABEL_JOB_COMPLETION_INDEX, "")
    return int(text) if text.isdigit() else None


def job(owner: Workload, view: View) -> Result:
    """Keep ``min(parallelism, completions − succeeded)`` pods active (without completions: ``parallelism``
    until one pod succeeds). Pods are ``<job>-<5 chars>``, or ``<job>-<index>-<5 chars>`` in Indexed mode,
    where each completion index runs until one pod with it succeeds."""
    spec = owner.fields().at("spec")
    if spec.flag("suspend"):
        return Result()
    parallelism = spec.integer("parallelism", default=1) or 0
    completions = spec.integer("completions")
    indexed = spec.string("completionMode", default="NonIndexed") == "Indexed"
    if indexed and completions is None:
        raise spec.error("is required when completionMode is Indexed", "completions")
    pods = pods_of(view, owner)
    running = [p for p in pods if active(p)]
    succeeded = [p for p in pods if p.phase == "Succeeded"]
    if completions is None:
        want = 0 if succeeded else parallelism
    elif indexed:
        done = {_index(p) for p in succeeded}
        want = min(parallelism, completions - len(done - {None}))
    else:
        want = min(parallelism, completions - len(succeeded))
    missing = max(0, want - len(running))
    if not missing:
        return Result()
    base = {
        C.LABEL_JOB_CONTROLLER_UID: owner.meta.uid,
        C.LABEL_JOB_NAME: owner.meta.name,
        C.LABEL_JOB_CONTROLLER_UID_LEGACY: owner.meta.uid,
        C.LABEL_JOB_NAME_LEGACY: owner.meta.name,
    }
    indexes: list[int | None] = [None] * missing
    if indexed:
        assert completions is not None
        busy = {_index(p) for p in running} | {_index(p) for p in succeeded}
        free: list[int | None] = [i for i in range(completions) if i not in busy]
        indexes = free[:missing]
    names = Names(view, namespace_of(owner))
    template = spec.at("template")
    out = []
    for index in indexes:
        labels, annotations, prefix = dict(base), {}, f"{owner.meta.name}-"
        if index is not None:
            labels[C.LABEL_JOB_COMPLETION_INDEX] = annotations[C.LABEL_JOB_COMPLETION_INDEX] = str(index)
            prefix = f"{owner.meta.name}-{index}-"
        doc = pod_manifest(owner, template, names.generate(prefix), labels=labels, annotations=annotations)
        out.append(Created(doc, ("", "spec.template")))
    return Result(out)


def cronjob(owner: Workload, view: View) -> Result:
    """One Job, ``<cronjob>-<scheduled time in minutes>`` as the CronJob controller names them, from
    ``spec.jobTemplate``, created when the simulation starts."""
    spec = owner.fields().at("spec")
    if spec.flag("suspend") or workloads_of(view, owner, "Job"):
        return Result()
    template = spec.at("jobTemplate")
    meta = template.at("metadata")
    doc = object_manifest(
        "batch/v1",
        "Job",
        f"{owner.meta.name}-{int(view.now // 60)}",
        owner,
        template.mapping("spec"),
        labels=meta.string_map("labels"),
        annotations=meta.string_map("annotations"),
    )
    return Result([Created(doc, ("", "spec.jobTemplate"))])
