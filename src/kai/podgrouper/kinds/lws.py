"""leaderworkerset.x-k8s.io LeaderWorkerSet (``leaderworkerset/lws_grouper.go``).

One PodGroup per replica group, ``pg-<lws>-<uid>-group-<groupIndex>``. minMember is the group size
(``leaderWorkerTemplate.size``); with ``startupPolicy: LeaderReady`` it is 1 while the leader is not yet
scheduled (the workers do not exist then). Subgroups: ``leader`` (1) and ``workers`` (size − 1), or, with
a segment size (``subGroupPolicy.subGroupSize``, else the ``kai.scheduler/segment-size`` annotation on the
LWS, else on its worker template), ``segment-<i>`` subgroups with the segment topology constraint; policy
``LeaderWorker`` puts the leader inside segment 0, ``LeaderExcluded`` gives it a subgroup of its own.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.errors import ManifestError, OwnerSpecError
from kai.api.objects import Pod, SubGroup, TopologyConstraint, parse_go_int
from kai.api.workloads import Fields, format_path
from kai.podgrouper._default import draft, origin
from kai.podgrouper._model import Draft, Request

MAX_SEGMENTS = 10000


def leaderworkerset(req: Request) -> Draft:
    d = draft(req)
    spec = req.top.fields().at("spec")
    size = spec.integer("leaderWorkerTemplate", "size", default=1) or 0  # the CRD defaults size to 1
    if size <= 0:
        raise spec.inconsistent(f"{size} is not a valid group size", "leaderWorkerTemplate", "size")
    policy = spec.string("startupPolicy", default="LeaderCreated")
    worker_index = _worker_index(req.pod, required=False)
    if policy == "LeaderReady":
        d.min_member = _leader_ready_min_member(req.pod, size, worker_index)
    elif policy == "LeaderCreated":
        d.min_member = size
    else:
        raise spec.error(f"{policy!r} is not LeaderCreated or LeaderReady", "startupPolicy")
    d.subgroups, d.pod_subgroup = _subgroups(req, spec, d.min_member)
    group_index = parse_go_int(req.pod.meta.labels.get(C.LABEL_LWS_GROUP_INDEX, ""))
    if group_index is not None:
        d.name = f"{d.name}-group-{group_index}"
    return d


def _worker_index(pod: Pod, *, required: bool) -> int | None:
    text = pod.meta.labels.get(C.LABEL_LWS_WORKER_INDEX)
    where = f"metadata.labels.{C.LABEL_LWS_WORKER_INDEX}"
    if text is None:
        if required:
            raise ManifestError("a segmented LeaderWorkerSet's pod needs this label", obj=origin(pod).ref, field=where)
        return None
    index = parse_go_int(text)
    if index is None or index < 0:
        raise ManifestError(f"{text!r} is not a worker index", obj=origin(pod).ref, field=where)
    return index


def _leader_ready_min_member(pod: Pod, size: int, worker_index: int | None) -> int:
    size = parse_go_int(pod.meta.annotations.get(C.ANNOTATION_LWS_SIZE, "")) or size
    return 1 if worker_index == 0 and not pod.node_name else size


def _subgroups(req: Request, spec: Fields, replicas: int) -> tuple[list[SubGroup], str | None]:
    leader = _worker_index(req.pod, required=False) == 0
    segment = _segment_size(req, spec, replicas)
    if segment is None:
        groups = [SubGroup("leader", min_member=1)]
        if replicas > 1:
            groups.append(SubGroup("workers", min_member=replicas - 1))
        return groups, ("leader" if leader else "workers" if replicas > 1 else None)
    policy = spec.string("leaderWorkerTemplate", "subGroupPolicy", "subGroupPolicyType", default="LeaderWorker")
    n = _segment_index(replicas - 1, replicas, segment) + 1
    if n > MAX_SEGMENTS:
        raise spec.inconsistent(f"{n} segments is more than the {MAX_SEGMENTS} allowed", "leaderWorkerTemplate", "size")
    topology = _segment_topology(req, spec)
    sizes = [segment] * n
    sizes[-1] = sum(1 for w in range(replicas) if _segment_index(w, replicas, segment) == n - 1)
    pod_segment = _segment_index(_worker_index(req.pod, required=True) or 0, replicas, segment)
    segments = [SubGroup(f"segment-{i}", min_member=sizes[i], topology_constraint=topology) for i in range(n)]
    divisible = (replicas - 1) % segment == 0
    if policy == "LeaderWorker":
        first = sizes[0] + (1 if divisible else 0)
        segments[0] = SubGroup("segment-0", min_subgroup=2, topology_constraint=topology)
        segments += [
            SubGroup("leader", min_member=1, parent="segment-0"),
            SubGroup("workers", min_member=first - 1, parent="segment-0"),
        ]
        if leader:
            return segments, "leader"
        return segments, ("workers" if pod_segment == 0 else f"segment-{pod_segment}")
    if policy == "LeaderExcluded":
        if not divisible:
            raise spec.inconsistent(
                f"LeaderExcluded needs size - 1 ({replicas - 1}) divisible by the segment size {segment}",
                "leaderWorkerTemplate",
                "subGroupPolicy",
                "subGroupPolicyType",
            )
        groups = [SubGroup("leader", min_member=1), *segments]
        return groups, ("leader" if leader else groups[pod_segment + 1].name)
    raise spec.error(
        f"{policy!r} is not LeaderWorker or LeaderExcluded",
        "leaderWorkerTemplate",
        "subGroupPolicy",
        "subGroupPolicyType",
    )


def _segment_index(worker: int, replicas: int, segment: int) -> int:
    """getSegmentIndex: the leader is in segment 0; when size − 1 divides evenly the leader is an extra pod of
    the first segment, otherwise it takes a worker's place in it."""
    if worker == 0:
        return 0
    if (replicas - 1) % segment == 0:
        return (worker - 1) // segment
    return worker // segment


def _segment_size(req: Request, spec: Fields, replicas: int) -> int | None:
    """subGroupPolicy.subGroupSize, else the LWS's segment-size annotation, else its worker template's."""
    key = C.ANNOTATION_SEGMENT_SIZE
    policy_path = ("leaderWorkerTemplate", "subGroupPolicy", "subGroupSize")
    template_path = ("leaderWorkerTemplate", "workerTemplate", "metadata", "annotations", key)

    def error(message: str, kind: type[ManifestError] = ManifestError) -> ManifestError:
        if spec.has(*policy_path):
            return kind(message, obj=spec.ref, field=format_path(spec.base + policy_path))
        if key in req.top.meta.annotations:
            return kind(message, obj=req.top.ref, field=f"metadata.annotations.{key}")
        return kind(message, obj=spec.ref, field=format_path(spec.base + template_path))

    size = spec.integer(*policy_path)
    if size is None:
        text = req.top.meta.annotations.get(key)
        if text is None:
            text = spec.string(*template_path) or None
        if text is None:
            return None
        size = parse_go_int(text)
        if size is None:
            raise error(f"{text!r} is not an integer")
    if size <= 1:
        raise error(f"segment size {size} must be greater than 1", OwnerSpecError)
    if size > replicas:
        raise error(f"segment size {size} is greater than the group size {replicas}", OwnerSpecError)
    return size


def _worker_annotation(req: Request, spec: Fields, key: str) -> str:
    return req.pod.meta.annotations.get(key) or spec.string(
        "leaderWorkerTemplate", "workerTemplate", "metadata", "annotations", key
    )


def _segment_topology(req: Request, spec: Fields) -> TopologyConstraint | None:
    topology = _worker_annotation(req, spec, C.ANNOTATION_TOPOLOGY) or req.top.meta.annotations.get(
        C.ANNOTATION_TOPOLOGY, ""
    )
    if not topology:
        return None
    required = _worker_annotation(req, spec, C.ANNOTATION_SEGMENT_TOPOLOGY_REQUIRED)
    preferred = _worker_annotation(req, spec, C.ANNOTATION_SEGMENT_TOPOLOGY_PREFERRED)
    if not required and not preferred:
        return None
    return TopologyConstraint(topology, required, preferred)
