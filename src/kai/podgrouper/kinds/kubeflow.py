"""Kubeflow training jobs and notebooks (``kubeflow/**``): PyTorchJob, TFJob, XGBoostJob, JAXJob, MPIJob,
Notebook.

A distributed job is one gang: minMember is ``runPolicy.schedulingPolicy.minAvailable`` if set, else the
sum of the replica specs' ``replicas`` (each must be > 0). PyTorchJob also honours
``elasticPolicy.minReplicas`` and splits the gang into ``master`` and ``worker`` subgroups, the workers
optionally cut into segments (``kai.scheduler/segment-size``) that carry their own topology constraint.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.errors import ManifestError, OwnerSpecError
from kai.api.objects import SubGroup, TopologyConstraint, parse_go_int
from kai.api.workloads import Fields
from kai.podgrouper._default import draft, origin, priority_class_for
from kai.podgrouper._model import Draft, Request

MAX_SEGMENTS = 10000  # maxAllowedSegmentation


def _total_replicas(spec: Fields, field: str, mandatory: tuple[str, ...]) -> int:
    """calcJobNumOfPods: every replica spec needs replicas > 0; the mandatory ones must exist."""
    if not spec.has(field):
        raise spec.inconsistent("is required (the job has no replica specs)", field)
    specs = spec.mapping(field)
    for name in mandatory:
        if name not in specs:
            raise spec.inconsistent(f"a {name} replica spec is required", field)
    total = 0
    for name in specs:
        replicas = spec.integer(field, name, "replicas")
        if replicas is None or replicas <= 0:
            raise spec.inconsistent("must be greater than 0", field, name, "replicas")
        total += replicas
    return total


def _distributed(req: Request, field: str, mandatory: tuple[str, ...] = ()) -> Draft:
    """KubeflowDistributedGrouper: minAvailable if set, else the sum of the replicas."""
    d = draft(req)
    spec = req.top.fields().at("spec")
    min_available = _non_negative(spec, "runPolicy", "schedulingPolicy", "minAvailable")
    d.min_member = min_available if min_available is not None else _total_replicas(spec, field, mandatory)
    return d


def _non_negative(spec: Fields, *path: str) -> int | None:
    value = spec.integer(*path)
    if value is not None and value < 0:
        raise spec.inconsistent(f"{value} must not be negative", *path)
    return value


def tfjob(req: Request) -> Draft:
    return _distributed(req, "tfReplicaSpecs")


def xgboostjob(req: Request) -> Draft:
    return _distributed(req, "xgbReplicaSpecs", ("Master", "Worker"))


def jaxjob(req: Request) -> Draft:
    return _distributed(req, "jaxReplicaSpecs", ("Worker",))


def mpijob(req: Request) -> Draft:
    """With ``launcherCreationPolicy: WaitForWorkersReady`` the launcher is created after the workers run, so
    until a launcher pod exists the gang is the workers alone."""
    d = _distributed(req, "mpiReplicaSpecs", ("Launcher", "Worker"))
    spec = req.top.fields().at("spec")
    if spec.string("launcherCreationPolicy") == "WaitForWorkersReady":
        launchers = req.view.pods(
            req.top.meta.namespace or "default",
            {C.LABEL_KUBEFLOW_JOB_NAME: req.top.meta.name, C.LABEL_KUBEFLOW_JOB_ROLE: "launcher"},
        )
        if not any(p.meta.deletion_timestamp is None for p in launchers):
            assert d.min_member is not None
            d.min_member -= spec.integer("mpiReplicaSpecs", "Launcher", "replicas") or 0
    return d


def notebook(req: Request) -> Draft:
    """One pod, priority build (interactive work is not preempted)."""
    d = draft(req)
    d.priority_class, d.priority_from = priority_class_for(req, req.top, C.PRIORITY_BUILD)
    return d


# --- PyTorchJob ------------------------------------------------------------------------------------


def pytorchjob(req: Request) -> Draft:
    d = _distributed(req, "pytorchReplicaSpecs")
    spec = req.top.fields().at("spec")
    min_replicas = _non_negative(spec, "elasticPolicy", "minReplicas")
    if min_replicas is not None:
        d.min_member = min_replicas
    min_available = _non_negative(spec, "runPolicy", "schedulingPolicy", "minAvailable")
    if min_available is not None:
        d.min_member = min_available
    assert d.min_member is not None
    _pytorch_subgroups(req, d, spec.at("pytorchReplicaSpecs"), d.min_member)
    return d


def _pytorch_subgroups(req: Request, d: Draft, specs: Fields, total: int) -> None:
    """``master`` (min = Master replicas) and ``worker`` (min = total − master); with a segment size, the
    worker subgroup becomes the parent of ``worker-<i>`` leaves of that size (the last one may be short)."""
    role = req.pod.meta.labels.get(C.LABEL_KUBEFLOW_REPLICA_TYPE, "")
    master = specs.integer("Master", "replicas", default=0) or 0
    groups: list[SubGroup] = []
    if specs.has("Master") and master:
        groups.append(SubGroup("master", min_member=master))
        if role == "master":
            d.pod_subgroup = "master"
    if specs.has("Worker"):
        # KAI writes the workers' minimum on the worker subgroup even when it is the parent of segments.
        groups.append(SubGroup("worker", min_member=max(0, total - master)))
        size = _segment_size(req, specs)
        if size is None:
            if role == "worker":
                d.pod_subgroup = "worker"
        else:
            workers = specs.integer("Worker", "replicas", default=1) or 0
            n = -(-workers // size)
            if n > MAX_SEGMENTS:
                raise specs.inconsistent(f"{n} segments is more than the {MAX_SEGMENTS} allowed", "Worker", "replicas")
            topology = _segment_topology(req, specs)
            for i in range(n):
                last_short = i == n - 1 and workers % size
                groups.append(
                    SubGroup(
                        f"worker-{i}",
                        min_member=workers % size if last_short else size,
                        parent="worker",
                        topology_constraint=topology,
                    )
                )
            if role == "worker":
                d.pod_subgroup = f"worker-{_replica_index(req) // size}"
    d.subgroups = groups


def _replica_index(req: Request) -> int:
    text = req.pod.meta.labels.get(C.LABEL_KUBEFLOW_REPLICA_INDEX)
    where = f"metadata.labels.{C.LABEL_KUBEFLOW_REPLICA_INDEX}"
    if text is None:
        raise ManifestError("a segmented PyTorchJob worker needs this label", obj=origin(req.pod).ref, field=where)
    index = parse_go_int(text)
    if index is None or index < 0:
        raise ManifestError(f"{text!r} is not a replica index", obj=origin(req.pod).ref, field=where)
    return index


def _segment_size(req: Request, specs: Fields) -> int | None:
    """The pod's segment-size annotation, else the Worker template's; a positive integer."""
    key = C.ANNOTATION_SEGMENT_SIZE
    text = req.pod.meta.annotations.get(key)
    path = ("Worker", "template", "metadata", "annotations", key)
    from_pod = bool(text)
    if not from_pod:
        text = specs.string(*path)
    if not text:
        return None
    size = parse_go_int(text)
    if size is None or size <= 0:
        message = f"{text!r} is not a positive integer"
        if from_pod:
            error = OwnerSpecError if size is not None else ManifestError
            raise error(message, obj=origin(req.pod).ref, field=f"metadata.annotations.{key}")
        raise specs.inconsistent(message, *path) if size is not None else specs.error(message, *path)
    return size


def _worker_annotation(req: Request, specs: Fields, key: str) -> str:
    value = req.pod.meta.annotations.get(key)
    if value:
        return value
    return specs.string("Worker", "template", "metadata", "annotations", key)


def _segment_topology(req: Request, specs: Fields) -> TopologyConstraint | None:
    topology = _worker_annotation(req, specs, C.ANNOTATION_TOPOLOGY) or req.top.meta.annotations.get(
        C.ANNOTATION_TOPOLOGY, ""
    )
    if not topology:
        return None
    required = _worker_annotation(req, specs, C.ANNOTATION_SEGMENT_TOPOLOGY_REQUIRED)
    preferred = _worker_annotation(req, specs, C.ANNOTATION_SEGMENT_TOPOLOGY_PREFERRED)
    if not required and not preferred:
        return None
    return TopologyConstraint(topology, required, preferred)
