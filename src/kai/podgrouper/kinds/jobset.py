"""jobset.x-k8s.io JobSet (``jobset/jobset_grouper.go``).

One PodGroup for the JobSet, in two levels of subgroups: a parent per replicatedJob (minSubGroup = its
replicas) and a leaf per replica, ``<rj>-replica-<i>``, whose minMember is the Job's parallelism (or the
replicatedJob template's ``kai.scheduler/batch-min-member``). The root needs minSubGroup parents: all of
them, or 1 with ``startupPolicyOrder: InOrder`` (the JobSet controller starts them one at a time), or the
JobSet's ``batch-min-member`` (capped at the number of replicatedJobs). Pods are routed by their
``replicatedjob-name`` and ``job-index`` labels.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.errors import ManifestError, OwnerSpecError
from kai.api.objects import SubGroup, TopologyConstraint, parse_go_int
from kai.api.workloads import Fields, annotation_int
from kai.podgrouper._default import draft, origin
from kai.podgrouper._model import Draft, Request


def jobset(req: Request) -> Draft:
    spec = req.top.fields().at("spec")
    rjobs = spec.items("replicatedJobs")
    if not rjobs:
        raise spec.inconsistent("a JobSet needs at least one replicated job", "replicatedJobs")
    d = draft(req)
    d.min_member = None
    d.min_subgroup = _root_min_subgroup(req, spec, len(rjobs))
    d.subgroups = []
    for rj in rjobs:
        name = rj.string("name")
        if not name:
            raise rj.error("is required", "name")
        replicas = rj.integer("replicas", default=1) or 0
        leaf_min = _leaf_min_member(rj)
        leaf_topology = _leaf_topology(rj)
        d.subgroups.append(SubGroup(name, min_subgroup=replicas))
        d.subgroups += [
            SubGroup(f"{name}-replica-{i}", min_member=leaf_min, parent=name, topology_constraint=leaf_topology)
            for i in range(replicas)
        ]
    d.pod_subgroup = _leaf_of(req, d)
    return d


def _root_min_subgroup(req: Request, spec: Fields, n: int) -> int:
    key = C.ANNOTATION_BATCH_MIN_MEMBER
    override = annotation_int(req.top.ref, req.top.meta.annotations, key)
    if override is not None:
        if override < 1:
            raise OwnerSpecError(f"{override} must be at least 1", obj=req.top.ref, field=f"metadata.annotations.{key}")
        return min(override, n)
    return 1 if spec.string("startupPolicy", "startupPolicyOrder") == "InOrder" else n


def _leaf_min_member(rj: Fields) -> int:
    parallelism = rj.integer("template", "spec", "parallelism", default=1) or 0
    path = ("template", "metadata", "annotations", C.ANNOTATION_BATCH_MIN_MEMBER)
    text = rj.string(*path)
    if not text:
        return parallelism
    value = parse_go_int(text)
    if value is None or value >= 2**31:
        raise rj.error(f"{text!r} is not a positive integer", *path)
    if value < 1:
        raise rj.inconsistent(f"{text!r} is not a positive integer", *path)
    return value


def _leaf_topology(rj: Fields) -> TopologyConstraint | None:
    annotations = rj.string_map("template", "metadata", "annotations")
    topology = annotations.get(C.ANNOTATION_TOPOLOGY, "")
    required = annotations.get(C.ANNOTATION_TOPOLOGY_REQUIRED, "")
    preferred = annotations.get(C.ANNOTATION_TOPOLOGY_PREFERRED, "")
    if not topology or not (required or preferred):
        return None
    return TopologyConstraint(topology, required, preferred)


def _leaf_of(req: Request, d: Draft) -> str:
    labels = req.pod.meta.labels
    for key in (C.LABEL_JOBSET_REPLICATED_JOB, C.LABEL_JOBSET_JOB_INDEX):
        if not labels.get(key):
            raise ManifestError(
                "a JobSet's pod needs this label", obj=origin(req.pod).ref, field=f"metadata.labels.{key}"
            )
    leaf = f"{labels[C.LABEL_JOBSET_REPLICATED_JOB]}-replica-{labels[C.LABEL_JOBSET_JOB_INDEX]}"
    if not any(s.name == leaf for s in d.subgroups):
        raise OwnerSpecError(
            f"subgroup {leaf!r} is not in the JobSet",
            obj=origin(req.pod).ref,
            field=f"metadata.labels.{C.LABEL_JOBSET_JOB_INDEX}",
        )
    return leaf
