"""KubeRay: RayCluster, RayJob, RayService (``ray/*.go``).

The whole cluster is one gang: minMember = 1 (head) + Σ over the worker groups of (minReplicas if > 0,
else replicas) × numOfHosts. A group that is suspended, or has replicas = minReplicas = 0, is skipped;
minReplicas > replicas is an error. With ``enableInTreeAutoscaling`` the autoscaler may start a group at
its minReplicas, so that is the group's count even when 0 (KAI's current code). Subgroups:
``headgroup`` (1) and one per counted worker group (its ``groupName``, else ``worker-group-<i>``), each
with the topology constraint of its pod template's annotations; pods join them by their ``ray.io/group``
label. RayJob and RayService are grouped on the RayCluster named in their status, under their own name,
queue and priority. The top owner's ``ray.io/priority-class-name`` label overrides the priority class.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import SubGroup, TopologyConstraint
from kai.api.workloads import Fields, Workload
from kai.podgrouper._default import draft, origin
from kai.podgrouper._model import Draft, Request


def ray_cluster(req: Request) -> Draft:
    return _ray(req, req.top)


def ray_job(req: Request) -> Draft:
    return _ray(req, _cluster_of(req, (("status", "rayClusterName"),)))


def ray_service(req: Request) -> Draft:
    paths = (("status", "activeServiceStatus", "rayClusterName"), ("status", "pendingServiceStatus", "rayClusterName"))
    return _ray(req, _cluster_of(req, paths))


def _ray(req: Request, cluster: Workload) -> Draft:
    d = draft(req)
    d.min_member, d.subgroups = gang(cluster)
    override = req.top.meta.labels.get(C.LABEL_RAY_PRIORITY_CLASS)
    if override is not None:
        d.priority_class = override
        d.priority_from = origin(req.top, f"metadata.labels.{C.LABEL_RAY_PRIORITY_CLASS}")
    group = req.pod.meta.labels.get(C.LABEL_RAY_GROUP)
    if group is not None and any(s.name == group for s in d.subgroups):
        d.pod_subgroup = group  # KAI logs a pod without a matching group and leaves it out of every subgroup
    return d


def _cluster_of(req: Request, paths: tuple[tuple[str, ...], ...]) -> Workload:
    """The RayCluster a RayJob or RayService status names. kai also accepts the RayCluster of the pod's own
    owner chain when the status is still empty (KubeRay writes it before the pods exist; a hand-written
    manifest may not)."""
    top = req.top.fields()
    name = next((n for p in paths if (n := top.string(*p))), "")
    for owner in req.owners:
        if owner.kind == "RayCluster" and (owner.meta.name == name or not name):
            return owner
    ns = req.top.meta.namespace or "default"
    found = req.view.get(req.top.api_version, "RayCluster", ns, name) if name else None
    if found is None:
        where = ".".join(paths[0])
        raise ManifestError(
            f"RayCluster {ns}/{name} does not exist" if name else "names no RayCluster yet",
            obj=req.top.ref,
            field=where,
        )
    return found


def gang(cluster: Workload) -> tuple[int, list[SubGroup]]:
    """(minMember, subgroups) of a RayCluster's spec (calcJobNumOfPodsAndSubGroups)."""
    spec = cluster.fields().at("spec")
    subgroups = [
        SubGroup(C.RAY_HEAD_GROUP, min_member=1, topology_constraint=_template_topology(spec.at("headGroupSpec")))
    ]
    autoscaling = spec.flag("enableInTreeAutoscaling")
    total = 1
    for i, group in enumerate(spec.items("workerGroupSpecs")):
        # KubeRay's field is `suspend`; KAI reads `suspended`. Either one skips the group here.
        if group.flag("suspend") or group.flag("suspended"):
            continue
        replicas = group.integer("replicas", default=0) or 0
        min_replicas = group.integer("minReplicas", default=0) or 0
        max_replicas = group.integer("maxReplicas")
        hosts = group.integer("numOfHosts", default=1) or 0
        for field, value in (("replicas", replicas), ("minReplicas", min_replicas), ("numOfHosts", hosts)):
            if value < 0:
                raise group.inconsistent(f"{value} must not be negative", field)
        if min_replicas > replicas:
            raise group.inconsistent(f"minReplicas {min_replicas} is more than replicas {replicas}", "minReplicas")
        if max_replicas is not None and min_replicas > max_replicas:
            raise group.inconsistent(
                f"minReplicas {min_replicas} is more than maxReplicas {max_replicas}", "minReplicas"
            )
        if replicas == 0 and min_replicas == 0:
            continue
        count = (min_replicas if autoscaling or min_replicas > 0 else replicas) * hosts
        total += count
        name = group.string("groupName") or f"worker-group-{i}"
        subgroups.append(SubGroup(name, min_member=count, topology_constraint=_template_topology(group)))
    return total, subgroups


def _template_topology(group: Fields) -> TopologyConstraint | None:
    """A group's constraint from its pod template's annotations; a placement level without a topology name is
    an error, a topology name without a level means nothing (as in KAI)."""
    path = ("template", "metadata", "annotations")
    annotations = group.string_map(*path)
    required = annotations.get(C.ANNOTATION_TOPOLOGY_REQUIRED, "")
    preferred = annotations.get(C.ANNOTATION_TOPOLOGY_PREFERRED, "")
    if not required and not preferred:
        return None
    topology = annotations.get(C.ANNOTATION_TOPOLOGY, "")
    if not topology:
        raise group.inconsistent(
            "is required when a topology placement annotation is set", *path, C.ANNOTATION_TOPOLOGY
        )
    return TopologyConstraint(topology, required, preferred)
